"""Callbacks and tracking: the events the training loop reports, TensorBoard's and MLflow's records read
back, and --report-to (docs/tracking.md)."""

import importlib.util
import math

import pytest

from distill.callbacks import Callback, EpochEnd, MLflowCallback, Step, register_reporter, REPORTERS
from distill.distillation import TeacherStudentDistill
from distill.models import load_model
from distill.distiller import Distiller
from distill.trainers import Runtime, train_student, train_teacher
from distill.models.teacher import TeacherConfig, TeacherTraining
from distill.training import TrainSettings
from tests.conftest import SAMPLES, cli, config_for

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
    result = train_student(config_for("lstm", embedding_dim=8, hidden_dim=6), str(TRAIN), str(DEV),
                           TrainSettings(epochs=2, patience=5), env=QUIET,
                           callbacks=[MLflowCallback(tracking_uri=uri, experiment="tests", run_name="lstm")])
    client = MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert run.info.run_name == "lstm" and run.info.status == "FINISHED"
    assert run.data.params["grad_accumulation"] == "1" and run.data.params["select_metric"] == "accuracy"
    nll = client.get_metric_history(run.info.run_id, "train/nll")
    assert [m.step for m in nll] == list(range(1, len(nll) + 1))
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
                           ("none,recorder", "error: --report-to none reports nowhere: give it alone")):
        with pytest.raises(SystemExit) as exit_info:
            main(["student", "--model", "lstm", "--train", str(TRAIN), "--dev", str(DEV), "--output",
                  str(tmp_path / "other"), "--report-to", value])
        assert exit_info.value.code == 2 and capsys.readouterr().err.strip() == message
    register_reporter("recorder", build)  # the API's way, same registry
    assert REPORTERS["recorder"] is build
