"""Callbacks and tracking: the events the training loop reports, TensorBoard's and MLflow's records read
back, and --report-to (docs/tracking.md)."""

import importlib.util
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from distill.callbacks import Callback, EpochEnd, MLflowCallback, Step, register_reporter, REPORTERS
from distill.distillation import TeacherStudentDistill
from distill.models import load_model
from distill.distiller import Distiller
from distill.trainers import Runtime, train_student, train_teacher
from distill.models.teacher import TeacherConfig, TeacherTraining
from distill.training import TrainSettings
from tests.conftest import SAMPLES, cli, config_for, free_port, interrupted_in_epoch_2, snapshot

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
QUIET = Runtime(progress=False)


class Recorder(Callback):
    """Every event, in order, with what it was given."""

    def __init__(self):
        self.events = []

    def on_train_begin(self, run):
        self.events.append(("begin", run))

    def on_step(self, step):
        self.events.append(("step", step))

    def on_epoch_end(self, epoch):
        self.events.append(("epoch", epoch))

    def on_best_saved(self, epoch):
        self.events.append(("best", epoch))

    def on_train_end(self, result):
        self.events.append(("end", result))

    def of(self, kind: str) -> list:
        return [value for name, value in self.events if name == kind]


def check_order(recorder: Recorder, epochs: int) -> None:
    """begin, then each epoch's steps, its end and (when best) its save, then end; steps counted from 1."""
    names = [name for name, _ in recorder.events]
    assert names[0] == "begin" and names[-1] == "end" and names.count("epoch") == epochs
    steps = recorder.of("step")
    assert [s.step for s in steps] == list(range(1, len(steps) + 1))
    epoch = 1
    for (name, value), (next_name, _) in zip(recorder.events, recorder.events[1:]):
        if name == "step":
            assert value.epoch == epoch
        if name == "epoch":
            assert value.epoch == epoch and value.step == max(s.step for s in steps if s.epoch == epoch)
            assert next_name == "best" if value.best else next_name in ("step", "end")
            epoch += 1
    assert recorder.of("end")[0]["steps"] == len(steps)


def test_a_kd_run_reports_every_event_in_order_with_every_loss_term(tiny_classifier_teacher):
    recorder = Recorder()
    result = Distiller(tiny_classifier_teacher, config_for("lstm", embedding_dim=8, hidden_dim=6),
                       settings=TrainSettings(epochs=2, patience=5), env=QUIET).fit(str(TRAIN), str(DEV),
                                                                                    callbacks=[recorder])
    check_order(recorder, 2)
    begin = recorder.of("begin")[0]
    assert begin["epochs"] == 2 and begin["first_epoch"] == 1 and begin["settings"]["grad_accumulation"] == 1
    assert begin["model"] is result.model  # the model trained, to read (e.g. each epoch's weights)
    for step in recorder.of("step"):
        assert set(step.losses) == {"student", "distillation", "total"} and step.task == ""
        assert step.losses["total"] == pytest.approx(step.losses["student"] + step.losses["distillation"])
        assert set(step.learning_rates) == {"lr"} and all(math.isfinite(v) for v in step.losses.values())
    epochs = recorder.of("epoch")
    assert [e.train_loss for e in epochs] == pytest.approx([r["train_loss"] for r in result.history])
    assert epochs[0].select_metric == "accuracy" and epochs[0].score == result.history[0]["dev"]["accuracy"]
    assert epochs[0].dev == result.history[0]["dev"] and epochs[0].best
    steps_per_epoch = len(recorder.of("step")) // 2
    first = [s.losses["total"] for s in recorder.of("step")[:steps_per_epoch]]
    assert sum(first) / len(first) == pytest.approx(epochs[0].train_loss)  # the epoch's loss is its steps' mean
    assert recorder.of("end")[0]["best"] == result.best


def test_layer_terms_are_reported_by_name(tiny_classifier_teacher):
    recorder = Recorder()
    loss = TeacherStudentDistill(hidden_weight=1.0, attention_weight=1.0, cosine_weight=1.0)
    Distiller(tiny_classifier_teacher, config_for("transformer", layers=1, max_length=64), loss,
              TrainSettings(epochs=1), env=QUIET).fit(str(TRAIN), str(DEV), callbacks=[recorder])
    for step in recorder.of("step"):
        assert set(step.losses) == {"student", "distillation", "hidden", "attention", "cosine", "total"}
        assert step.losses["total"] == pytest.approx(sum(v for k, v in step.losses.items() if k != "total"))


def test_a_teacher_reports_its_two_learning_rates(tiny_encoder_dir):
    recorder = Recorder()
    train_teacher(str(TRAIN), str(DEV), TeacherConfig(encoder=tiny_encoder_dir, max_length=32),
                  TeacherTraining(epochs=1, batch_size=8, encoder_lr=1e-3), env=QUIET, callbacks=[recorder])
    check_order(recorder, 1)
    steps = recorder.of("step")
    assert set(steps[0].losses) == {"nll", "total"} and set(steps[0].learning_rates) == {"lr/encoder", "lr/head"}
    assert steps[0].learning_rates["lr/head"] == 0.0  # the warm-up starts from 0
    assert steps[-1].learning_rates["lr/head"] < max(s.learning_rates["lr/head"] for s in steps)  # then decays


def test_callbacks_must_be_callbacks():
    from distill.errors import DistillError
    with pytest.raises(DistillError, match="callbacks: give distill.callbacks.Callback objects, not function"):
        train_student("lstm", str(TRAIN), str(DEV), TrainSettings(epochs=1), env=QUIET, callbacks=[lambda step: None])


def scalars_of(log_dir) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_events_of_a_kd_run_hold_every_loss_term_and_the_model_still_loads(tiny_classifier_teacher,
                                                                                       tmp_path):
    out = tmp_path / "kd"
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6",
        "--train", TRAIN, "--dev", DEV, "--epochs", "2", "--patience", "5", "--quiet", "--report-to", "tensorboard",
        "--output", out)
    scalars = scalars_of(out / "runs")
    assert {"train/student", "train/distillation", "train/total", "lr", "epoch/train_loss", "dev/accuracy",
            "dev/macro_f1", "select/accuracy"} <= set(scalars)
    steps = len(scalars["train/total"])
    assert [step for step, _ in scalars["train/student"]] == list(range(1, steps + 1))
    assert [step for step, _ in scalars["dev/accuracy"]] == [steps // 2, steps]
    for (_, total), (_, student), (_, kd) in zip(scalars["train/total"], scalars["train/student"],
                                                 scalars["train/distillation"]):
        assert total == pytest.approx(student + kd, rel=1e-5)
    model = load_model(out)  # the events folder is beside the model, not in what its card verifies
    assert len(model.predict(["a wonderful film", "dull and slow"])) == 2
    cli("evaluate", out, DEV, "--output", tmp_path / "scores.json")
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6",
        "--train", TRAIN, "--dev", DEV, "--epochs", "1", "--quiet", "--output", out, "--overwrite")
    assert not (out / "runs").exists()  # --overwrite replaced the run's folder, events and all


def test_logging_dir_puts_the_events_elsewhere(tmp_path):
    cli("student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6", "--train", TRAIN, "--dev", DEV,
        "--epochs", "1", "--quiet", "--report-to", "tensorboard",
        "--logging-dir", tmp_path / "logs", "--output", tmp_path / "student")
    assert not (tmp_path / "student" / "runs").exists()
    assert {"train/nll", "lr", "dev/accuracy"} <= set(scalars_of(tmp_path / "logs"))


def test_mlflow_file_store_holds_the_run(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps a file store for those who ask
    uri = f"file:{tmp_path / 'mlruns'}"
    batches = []
    real_log_batch = MlflowClient.log_batch
    monkeypatch.setattr(MlflowClient, "log_batch", lambda self, *args, **kwargs: batches.append(1) or
                        real_log_batch(self, *args, **kwargs))
    result = train_student(config_for("lstm", embedding_dim=8, hidden_dim=6), str(TRAIN), str(DEV),
                           TrainSettings(epochs=2, patience=5), env=QUIET,
                           callbacks=[MLflowCallback(tracking_uri=uri, experiment="tests", run_name="lstm")])
    client = MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert run.info.run_name == "lstm" and run.info.status == "FINISHED"
    assert run.data.params["grad_accumulation"] == "1" and run.data.params["select_metric"] == "accuracy"
    nll = client.get_metric_history(run.info.run_id, "train/nll")
    assert [m.step for m in nll] == list(range(1, len(nll) + 1))
    assert len(nll) > 6 and len(batches) <= 4  # the parameters, each epoch, the end: not a store call per step
    accuracy = client.get_metric_history(run.info.run_id, "dev/accuracy")
    assert [m.value for m in accuracy] == pytest.approx([r["dev"]["accuracy"] for r in result.history])
    assert {"lr", "epoch/train_loss", "select/accuracy", "best/epoch"} <= set(run.data.metrics)
    assert run.data.metrics["best/epoch"] == result.best["epoch"]


@pytest.mark.parametrize("reporter, module", [("tensorboard", "tensorboard"), ("mlflow", "mlflow")])
def test_a_missing_package_names_the_extra(reporter, module, tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
              str(tmp_path / "out"), "--report-to", reporter])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == (f"error: --report-to {reporter} needs the {module} package: "
                                                 "pip install 'distill[tracking]'\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", ["sqlalchemy", "alembic"])
@pytest.mark.parametrize("store", ["sqlite:///{tmp}/mlflow.db", "postgresql://localhost:{port}/mlflow"])
def test_a_database_store_without_its_package_names_the_extra(module, store, tmp_path, capsys, monkeypatch):
    """mlflow-skinny alone (not the extra) keeps no database store: SQLAlchemy and Alembic are the tracking
    extra's. The SQLite store's path, read through SQLAlchemy, was a traceback; MLflow's own failure named
    neither the package nor the extra."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.format(tmp=tmp_path, port=free_port()))
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
              str(tmp_path / "out"), "--report-to", "mlflow"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == (f"error: --report-to mlflow needs the {module} package: "
                                                 "pip install 'distill[tracking]'\n")
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("reporter", ["tensorboard", "mlflow"])
def test_a_package_that_does_not_import_names_the_extra_before_the_run(reporter, tmp_path, capsys, monkeypatch):
    """Installed, but failing at its import (a dependency missing or of another version): it was found installed,
    then the run stopped with the import's traceback once the training had begun."""
    from tests.conftest import broken_package
    broken_package(monkeypatch, tmp_path / "site", reporter)
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
              str(tmp_path / "out"), "--report-to", reporter])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == (f"error: --report-to {reporter} needs the {reporter} package: "
                                                 f"pip install 'distill[tracking]' ({reporter} is installed, but its "
                                                 "import fails: ImportError: libdep.so.1: cannot open shared object "
                                                 "file)\n")
    assert not (tmp_path / "out").exists()


def test_a_database_server_store_without_its_driver_names_the_extra(tmp_path, capsys, monkeypatch):
    """MLFLOW_TRACKING_URI=postgresql://... of a server that answers, without psycopg: MLflow's own line ("No module
    named 'psycopg'") named no extra."""
    import socket
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as an uninstalled package: its import fails
    from procedures.cli import main
    with socket.create_server(("127.0.0.1", 0)) as server, pytest.raises(SystemExit) as exit_info:  # it answers
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"postgresql://me@127.0.0.1:{server.getsockname()[1]}/mlflow")
        main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
              str(tmp_path / "out"), "--report-to", "mlflow"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == ("error: --report-to mlflow needs the psycopg package: pip install "
                                                 "'distill[postgres]'\n")
    assert not (tmp_path / "out").exists()


def test_a_tensorboard_whose_writer_does_not_import_names_the_extra_before_the_run(tmp_path, capsys, monkeypatch):
    """tensorboard imported, but torch's writer of its events did not (its protobuf missing or of another version):
    the run stopped with the import's traceback once the training had begun."""
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # its import fails
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
              str(tmp_path / "out"), "--report-to", "tensorboard"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == ("error: --report-to tensorboard needs the tensorboard package: pip "
                                                 "install 'distill[tracking]' (tensorboard is installed, but its "
                                                 "import fails: ModuleNotFoundError: import of "
                                                 "torch.utils.tensorboard halted; None in sys.modules)\n")
    assert not (tmp_path / "out").exists()


def test_report_to_takes_registered_reporters_and_refuses_unknown_ones(tmp_path, capsys, monkeypatch):
    from procedures.cli import main
    recorders = []

    def build(target):
        recorders.append(Recorder())
        recorders[-1].target = target
        return recorders[-1]

    monkeypatch.setitem(REPORTERS, "recorder", build)
    cli("student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6", "--train", TRAIN, "--dev", DEV,
        "--epochs", "1", "--quiet", "--report-to", "recorder", "--report-to", "recorder",
        "--output", tmp_path / "out")
    assert len(recorders) == 1 and str(recorders[0].target.output) == str(tmp_path / "out")
    assert isinstance(recorders[0].of("step")[0], Step) and isinstance(recorders[0].of("epoch")[0], EpochEnd)
    for value, message in (("foo", "error: unknown reporter 'foo': choose from tensorboard, mlflow, recorder, none"),
                           ("none,recorder", "error: --report-to none reports nowhere: give it alone"),
                           ("recorder,,", "error: --report-to 'recorder,,' has an empty reporter name: give names "
                                          "separated by single commas"),
                           # reported nowhere, unsaid (`--report-to "$TRACKER"` with the variable unset)
                           ("", "error: --report-to '' names no reporter: give tensorboard, mlflow, recorder, none"),
                           (" , ", "error: --report-to ' , ' names no reporter: give tensorboard, mlflow, recorder, "
                                   "none")):
        with pytest.raises(SystemExit) as exit_info:
            main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
                  str(tmp_path / "other"), "--report-to", value])
        assert exit_info.value.code == 2 and capsys.readouterr().err.strip() == message
    register_reporter("recorder", build)  # the API's way, same registry
    assert REPORTERS["recorder"] is build


# --- MLflow: a store that cannot be used, runs closed on any exit, resumed runs continued ------------------------

STUDENT = ["student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6", "--train", TRAIN, "--dev", DEV,
           "--quiet", "--report-to", "mlflow"]


def run_cli(capsys, *args) -> tuple[int, str]:
    """nlp-train in-process: its exit status and stderr."""
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, capsys.readouterr().err


def deleted_experiment(tmp_path, monkeypatch) -> str:
    from mlflow.tracking import MlflowClient
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.delete_experiment(client.create_experiment("old"))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "old")
    return uri


def written(path, text: str, uri: str) -> str:
    path.write_text(text)
    return uri


def file_store(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 opens a file store for those who ask
    return written(tmp_path / "notes.txt", "notes", str(tmp_path / "notes.txt"))


MISCONFIGURED = {  # name: (MLFLOW_TRACKING_URI for tmp_path and monkeypatch, the setting the message names)
    "a plain folder": (lambda tmp, mp: str(tmp), "MLFLOW_TRACKING_URI"),
    "a text file": (lambda tmp, mp: written(tmp / "notes.txt", "notes", str(tmp / "notes.txt")), "MLFLOW_TRACKING_URI"),
    "a text file as a file store": (file_store, "MLFLOW_TRACKING_URI"),
    "an SQLite path that is no database": (lambda tmp, mp: written(tmp / "x.db", "not a database",
                                                                   f"sqlite:///{tmp / 'x.db'}"), "MLFLOW_TRACKING_URI"),
    "a server that does not answer": (lambda tmp, mp: f"http://127.0.0.1:{free_port()}", "MLFLOW_TRACKING_URI"),
    # MLflow retried opening it for two minutes, printing a warning each time, before the line
    "an SQLite file it cannot open": (lambda tmp, mp: "sqlite:////proc/distill-mlflow.db", "MLFLOW_TRACKING_URI"),
    # the run was tracked in memory, and nothing of it was kept
    "an in-memory SQLite database": (lambda tmp, mp: "sqlite:///:memory:", "MLFLOW_TRACKING_URI"),
    "a deleted experiment": (deleted_experiment, "MLFLOW_EXPERIMENT_NAME"),
    # urllib's ValueError traceback, before the run began
    "no URL (an unclosed IPv6 bracket)": (lambda tmp, mp: "http://[::1", "MLFLOW_TRACKING_URI"),
}


@pytest.mark.parametrize("store", list(MISCONFIGURED))
def test_an_mlflow_store_that_cannot_be_used_is_one_line_naming_the_setting(store, tmp_path, capsys, monkeypatch):
    make_uri, setting = MISCONFIGURED[store]
    uri = make_uri(tmp_path, monkeypatch)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    capsys.readouterr()  # what MLflow said while the test made its store
    status, err = run_cli(capsys, *STUDENT, "--epochs", "1", "--output", tmp_path / "out")
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert f"set {setting} to " in err and "Traceback" not in err
    assert "tracking store None" not in err and ("tracking store" not in err or uri in err), err  # the store asked
    assert not (tmp_path / "out").exists()


def sqlite_store_in_a_model(tmp_path, model: str) -> tuple[str, object]:
    return f"sqlite:///{model}/mlflow.db", model


def file_store_in_a_model(tmp_path, model: str) -> tuple[str, object]:
    return f"file:{model}/mlruns", model


def sqlite_store_in_the_output(tmp_path, model: str) -> tuple[str, object]:
    return f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}", None


MISPLACED = {"an SQLite store in another model's folder": sqlite_store_in_a_model,
             "a file store in another model's folder": file_store_in_a_model,
             "an SQLite store among the run's own model files": sqlite_store_in_the_output}


@pytest.mark.parametrize("place", list(MISPLACED))
def test_an_mlflow_store_on_this_machine_is_under_the_output_rule(place, tmp_path, capsys, monkeypatch):
    """MLflow wrote its SQLite file (or a file store's folder) wherever MLFLOW_TRACKING_URI pointed: into another
    model's folder, or among the run's own model files (whose --overwrite then refused the folder). It is refused
    in one line naming the setting, as --logging-dir is, before anything is written."""
    model = tmp_path / "model"
    cli("student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6", "--train", TRAIN, "--dev", DEV,
        "--epochs", "1", "--quiet", "--output", model)
    before = snapshot(model)
    uri, where = MISPLACED[place](tmp_path, model)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    status, err = run_cli(capsys, *STUDENT, "--epochs", "1", "--output", tmp_path / "out")
    assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "MLflow's tracking store" in err and "(MLFLOW_TRACKING_URI)" in err, err
    assert (f"lies in the model directory {where}" if where else "lies in the output") in err, err
    assert not (tmp_path / "out").exists() and snapshot(model) == before


def mlflow_runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    return client.search_runs([client.get_experiment_by_name("distill").experiment_id])


def stop_at_evaluation(monkeypatch, call: int, stop) -> None:
    """Training's `call`-th dev evaluation calls `stop()` first (raise, or signal this process)."""
    import distill.training
    real_evaluate, calls = distill.training.evaluate, []

    def evaluate(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            stop()
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(distill.training, "evaluate", evaluate)


def fail() -> None:
    raise RuntimeError("a bug in epoch 2")


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def ctrl_c() -> None:
    raise KeyboardInterrupt


def stopped_and_resumed(uri: str, stop, status: str, code: int | None, tmp_path, capsys, monkeypatch) -> None:
    """A student run tracked in `uri`, stopped by `stop` in epoch 2, is closed `status` (not left RUNNING);
    --resume of an interrupted one (exit `code`) logs on to the same tracked run, which ends FINISHED with
    every epoch."""
    import distill.training
    from mlflow.tracking import MlflowClient
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    args = [*STUDENT, "--epochs", "3", "--patience", "3", "--output", tmp_path / "out"]
    real_evaluate = distill.training.evaluate
    stop_at_evaluation(monkeypatch, 2, stop)
    if code is None:
        with pytest.raises(RuntimeError, match="a bug in epoch 2"):
            run_cli(capsys, *args)
    else:
        assert run_cli(capsys, *args)[0] == code
    [run] = mlflow_runs(uri)
    assert run.info.status == status
    client = MlflowClient(uri)
    [first_epoch] = client.get_metric_history(run.info.run_id, "epoch/train_loss")
    steps = [metric.step for metric in client.get_metric_history(run.info.run_id, "train/nll")]
    assert steps == list(range(1, 2 * first_epoch.step + 1))  # the queued steps of epoch 2 were sent at the stop
    if code is None:
        return
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)
    assert run_cli(capsys, *args, "--resume")[0] == 0
    [resumed] = mlflow_runs(uri)
    assert resumed.info.run_id == run.info.run_id and resumed.info.status == "FINISHED"
    epochs = MlflowClient(uri).get_metric_history(run.info.run_id, "epoch/train_loss")
    assert len(epochs) == 3 and resumed.data.metrics["best/epoch"] >= 1
    # the steps of the interrupted epoch 2, sent at the stop and computed again on resume, are in it once
    steps = [metric.step for metric in client.get_metric_history(run.info.run_id, "train/nll")]
    assert steps == list(range(1, epochs[-1].step + 1))


@pytest.mark.parametrize("stop, status, code", [(fail, "FAILED", None), (sigterm, "KILLED", 143),
                                                (ctrl_c, "KILLED", 130)], ids=["error", "sigterm", "ctrl-c"])
def test_an_mlflow_run_is_closed_on_any_exit_and_resume_continues_it(stop, status, code, tmp_path, capsys,
                                                                      monkeypatch):
    stopped_and_resumed(f"sqlite:///{tmp_path / 'mlflow.db'}", stop, status, code, tmp_path, capsys, monkeypatch)


@pytest.fixture
def mlflow_server(tmp_path):
    """A real `mlflow server` on 127.0.0.1 (a free port, an SQLite store under tmp_path); skipped, with its
    reason, where it cannot start (its web app needs the full mlflow package: the tracking-server extra)."""
    if importlib.util.find_spec("flask") is None:
        pytest.skip("mlflow server needs the full mlflow package: pip install 'distill[tracking-server]'")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
                               "--default-artifact-root", str(tmp_path / "artifacts")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    uri, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
    try:
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.skip(f"mlflow server did not start: {server.stderr.read().decode()[-300:]}")
                time.sleep(0.5)
        yield uri
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server and its uvicorn worker
            server.wait(timeout=60)


def test_a_run_tracked_on_an_mlflow_server_is_killed_by_sigterm_and_resumed_as_the_same_run(mlflow_server, tmp_path,
                                                                                           capsys, monkeypatch):
    stopped_and_resumed(mlflow_server, sigterm, "KILLED", 143, tmp_path, capsys, monkeypatch)


def test_a_resumed_run_replaces_the_interrupted_epochs_tensorboard_steps(tmp_path, capsys, monkeypatch):
    """The steps of the epoch a Ctrl-C cut short are logged again by --resume: TensorBoard shows them once, the
    resumed run's, not a second line over the same steps."""
    args = interrupted_in_epoch_2(capsys, monkeypatch, *STUDENT[:-1], "tensorboard", "--epochs", "3",
                                  "--patience", "3", "--output", tmp_path / "out")
    assert run_cli(capsys, *args, "--resume")[0] == 0
    scalars = scalars_of(tmp_path / "out" / "runs")
    steps = [step for step, _ in scalars["train/nll"]]
    assert steps == list(range(1, len(steps) + 1))
    assert [step for step, _ in scalars["epoch/train_loss"]] == [steps[-1] // 3 * k for k in (1, 2, 3)]


def test_a_new_run_is_refused_a_logging_dir_holding_another_runs_events(tmp_path, capsys):
    """A second run given the first one's --logging-dir would draw its steps over the first one's lines in one
    TensorBoard run: it is refused in one line before it trains, and writes no model."""
    first = [*STUDENT[:-1], "tensorboard", "--epochs", "1", "--logging-dir", tmp_path / "logs"]
    assert run_cli(capsys, *first, "--output", tmp_path / "a")[0] == 0
    events = snapshot(tmp_path / "logs")
    code, err = run_cli(capsys, *first, "--output", tmp_path / "b")
    assert code == 2 and "holds another run's TensorBoard events" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists() and snapshot(tmp_path / "logs") == events


def test_a_tracking_uris_password_is_not_shown(tmp_path, capsys, monkeypatch):
    """user:password@ in MLFLOW_TRACKING_URI is MLflow's to send: the line that the server does not answer showed
    it, and the check of the server took it for part of the host name."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://me:s3cret@127.0.0.1:{free_port()}")
    status, err = run_cli(capsys, *STUDENT, "--epochs", "1", "--output", tmp_path / "out")
    assert status == 2 and "tracking server http://me:***@127.0.0.1:" in err and "s3cret" not in err, err
    assert "Connection refused" in err, err  # the address asked, not a host named "me:s3cret@127.0.0.1"


@pytest.mark.parametrize("scheme", ["postgresql", "mysql+pymysql"])
def test_a_tracking_database_that_does_not_answer_is_refused_at_once(scheme, tmp_path, capsys, monkeypatch):
    """MLflow's engine retried a database server that refuses connections for two minutes, a warning at each
    retry, before the line; its password is not shown."""
    port = free_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"{scheme}://me:s3cret@127.0.0.1:{port}/mlflow")
    started = time.monotonic()
    status, err = run_cli(capsys, *STUDENT, "--epochs", "1", "--output", tmp_path / "out")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"tracking database {scheme}://me:***@127.0.0.1:{port}/mlflow does not answer at 127.0.0.1:{port}" in err
    assert "set MLFLOW_TRACKING_URI to one that runs" in err and "s3cret" not in err, err
    assert time.monotonic() - started < 30 and not (tmp_path / "out").exists()
