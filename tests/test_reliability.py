"""Reliability and security: bad input, kill -9 and resume, untrusted checkpoints, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from distill.errors import DistillError
from distill.models import load_model
from distill.labels import LabelHierarchy
from distill.models.students import build_student
from tests.conftest import ROOT, SAMPLES, cli, config_for, interrupt_evaluation

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
SMALL_LSTM = ["--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--quiet"]


def run_main(capsys, *args) -> tuple[int, str]:
    """Run nlp-train in-process; return its exit status and stderr."""
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, capsys.readouterr().err


def nlp_train(*args, **kwargs) -> subprocess.Popen:
    """nlp-train in a child process (one thread, so runs are bit-for-bit comparable)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen([sys.executable, "-m", "procedures.cli", "--threads", "1", *map(str, args)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)


def kill_after(process: subprocess.Popen, ready, delay: float, timeout: float = 120) -> None:
    """SIGKILL `process` `delay` seconds after `ready()` first holds; fail if it ends before that."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"finished before it could be killed: {process.stderr.read().decode()}"
        assert time.monotonic() < deadline, "timed out waiting to kill"
        time.sleep(0.01)
    time.sleep(delay)
    process.kill()
    assert process.wait() == -signal.SIGKILL, "the run ended before the kill landed"


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("student") / "lstm"
    cli("student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", out)
    return str(out)


# --- bad input: one line on stderr, exit status 2, no traceback, nothing written -------------------------------

def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def student_on(train: Path, out: Path) -> list:
    return ["student", *SMALL_LSTM, "--train", train, "--dev", DEV, "--output", out]


def with_option(args: list, option: str, value) -> list:
    """`args` with `option` set to `value`: replaced where given (an option may be given once), else added."""
    args = list(args)
    names = list(map(str, args))
    if option in names:
        args[names.index(option) + 1] = value
        return args
    return args + [option, value]


def tagger_on(train: Path, out: Path) -> list:
    return ["student", "--model", "lstm-tagger", "--quiet", "--train", train, "--dev", SAMPLES / "ner_dev.conll",
            "--output", out]


def kd_with(teacher: str, out: Path, *extra) -> list:
    return ["kd", "--teacher", teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", out, *extra]


def teacher_without_checkpoint(teacher: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(teacher, tmp / "broken-teacher"))
    (copy / "checkpoint.pt").unlink()
    return str(copy)


def truncated_weights(student: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(student, tmp / "truncated-student"))
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return str(copy)


def flipped_byte(teacher: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(teacher, tmp / "corrupt-teacher"))
    data = bytearray((copy / "checkpoint.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "checkpoint.pt").write_bytes(bytes(data))
    return str(copy)


# Each case: (id, argv builder (tmp, classifier teacher, student) -> argv, expected fragment of the message).
BAD_INPUT = [
    ("missing-file", lambda t, te, st: student_on(t / "nope.csv", t / "out"), "file not found"),
    ("empty-file", lambda t, te, st: student_on(write(t / "e.csv", ""), t / "out"), "file is empty"),
    ("binary-file", lambda t, te, st: student_on(write(t / "b.csv", b"text,label\n\x00\x01,pos\n"), t / "out"),
     "binary data"),
    ("not-utf8", lambda t, te, st: student_on(write(t / "l.csv", b"text,label\ncaf\xe9,pos\n"), t / "out"),
     "not UTF-8"),
    ("wrong-columns", lambda t, te, st: student_on(write(t / "c.csv", "review,label\ngood,pos\n"), t / "out"),
     "missing column 'text'"),
    ("wrong-field-count", lambda t, te, st: student_on(write(t / "f.csv", "text,label\ngood,pos,x\n"), t / "out"),
     ":2: wrong number of fields"),
    ("malformed-conll", lambda t, te, st: tagger_on(write(t / "m.conll", "EU NNP B-ORG\nrejects\n"), t / "out"),
     ":2: expected 3 fields"),
    ("mixed-tag-schemes", lambda t, te, st: tagger_on(write(t / "x.conll", "EU B-ORG\nrejects PER\n"), t / "out"),
     "mixed tagging schemes"),
    ("unseen-label-at-evaluation", lambda t, te, st: ["evaluate", te, write(t / "u.csv", "text,label\nok,meh\n")],
     "label 'meh' was not seen in training"),
    ("unlabeled-only-empty-lines", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                                       write(t / "blank.txt", "\n  \n\n"), "--output", t / "p.jsonl"],
     "no examples"),
    ("extremely-long-line", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                               write(t / "long.txt", "ok\n" + "word " * 40_000 + "\n"),
                                               "--output", t / "p.jsonl"],
     ":2: example is 199,999 characters long, over the 100,000 limit"),
    ("conll-sentence-over-limit", lambda t, te, st: tagger_on(write(t / "run-on.conll", "word O\n" * 30_000),
                                                               t / "out"),
     "run-on.conll:1: example is 149,999 characters long, over the 100,000 limit"),
    ("csv-field-over-csv-limit", lambda t, te, st: student_on(write(t / "h.csv", "text,label\n" + "x" * 200_000
                                                                  + ",pos\n"), t / "out"), "h.csv:2:"),
    ("teacher-dir-missing-files", lambda t, te, st: ["pseudo-label", "--teacher", teacher_without_checkpoint(te, t),
                                                     "--input", SAMPLES / "unlabeled_movies.txt",
                                                     "--output", t / "p.jsonl"], "missing checkpoint.pt"),
    ("teacher-student-label-sets-differ", lambda t, te, st: ["kd", "--teacher", te, *SMALL_LSTM, "--train",
                                                             SAMPLES / "topics_train.csv", "--dev",
                                                             SAMPLES / "topics_dev.csv", "--output", t / "out"],
     "label sets differ"),
    ("word-student-as-teacher-of-word-embeddings", lambda t, te, st: kd_with(st, t / "out"),
     "has no sub-word embeddings to start word embeddings from: use --random-embeddings"),
    ("tagger-student-classification-teacher", lambda t, te, st: ["kd", "--teacher", te, "--model", "lstm-tagger",
                                                                 "--train", SAMPLES / "ner_train.conll", "--dev",
                                                                 SAMPLES / "ner_dev.conll", "--output", t / "out"],
     "does tagging but teacher"),
    ("unknown-offline-encoder", lambda t, te, st: ["teacher", "--task", "classification", "--encoder",
                                                   "no-such-org/no-such-encoder", "--train", TRAIN, "--dev", DEV,
                                                   "--output", t / "out"], "minilm-l6"),
    ("temperature-zero", lambda t, te, st: kd_with(te, t / "out", "--temperature", "0"), "'--temperature'"),
    ("negative-weight", lambda t, te, st: kd_with(te, t / "out", "--distill-weight", "-1"), "'--distill-weight'"),
    ("batch-size-zero", lambda t, te, st: student_on(TRAIN, t / "out") + ["--batch-size", "0"], "'--batch-size'"),
    ("min-confidence-above-one", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                                    SAMPLES / "unlabeled_movies.txt", "--output", t / "p.jsonl",
                                                    "--min-confidence", "1.5"], "'--min-confidence'"),
    ("class-weights-wrong-length", lambda t, te, st: student_on(TRAIN, t / "out") + ["--class-weights", "1,2,3"],
     "3 class weights given for 2 labels"),
    ("output-under-a-file", lambda t, te, st: student_on(TRAIN, write(t / "afile", "x") / "out"),
     "is a file, not a directory"),
    ("truncated-safetensors", lambda t, te, st: ["evaluate", truncated_weights(st, t), SAMPLES / "sentiment_test.csv",
                                                 "--output", t / "m.json"], "corrupted or truncated"),
    ("corrupted-checkpoint", lambda t, te, st: ["evaluate", flipped_byte(te, t), SAMPLES / "sentiment_test.csv",
                                                "--output", t / "m.json"], "corrupted or truncated"),
    ("model-dir-not-found", lambda t, te, st: ["predict", t / "no-model"], "model directory not found"),
    ("malformed-hub-spec", lambda t, te, st: student_on("hub:rotten_tomatoes", t / "out"),
     "hub datasets are written hub:NAME[:CONFIG]:SPLIT"),
]


@pytest.mark.parametrize("build, fragment", [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_written(build, fragment, tmp_path, tiny_classifier_teacher,
                                                      tiny_student, capsys):
    before = set(tmp_path.rglob("*"))
    argv = build(tmp_path, tiny_classifier_teacher, tiny_student)
    inputs = set(tmp_path.rglob("*")) - before
    status, err = run_main(capsys, *argv)
    assert status == 2, err
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert set(tmp_path.rglob("*")) - before == inputs, "bad input left output behind"


def test_disk_full_leaves_no_partial_file(tmp_path):
    """A write that fails half-way (file size limit, as on a full disk) is one line, exit 2, nothing half-written."""
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = tmp_path / "out"
    process = nlp_train("student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", out,
                        preexec_fn=limit_file_size)
    err = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 2, err
    assert err.startswith("error: ") and "File too large" in err and len(err.strip().splitlines()) == 1
    assert not out.exists(), "a failed run left its output directory behind"


# --- interruption and resume ------------------------------------------------------------------------------------

def dev_metrics(out: Path) -> list:
    return [record["dev"] for record in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def test_kd_killed_mid_epoch_resumes_to_the_same_result(tiny_classifier_teacher, tmp_path):
    args = ["kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--hidden-dim", "128", "--batch-size",
            "2", "--epochs", "3", "--patience", "3", "--quiet", "--train", TRAIN, "--dev", DEV,
            "--cache-dir", tmp_path / "cache"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    cli(*args, "--output", whole)  # uninterrupted, in-process: also one thread
    kill_after(nlp_train(*args, "--output", resumed), lambda: (resumed / "resume.pt").exists(), 0.3)
    assert len(dev_metrics(resumed)) < 3, "killed too late to test resuming"
    finish = nlp_train(*args, "--output", resumed, "--resume")
    assert finish.wait() == 0, finish.stderr.read().decode()
    assert dev_metrics(resumed) == dev_metrics(whole)
    assert (resumed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    assert not (resumed / "resume.pt").exists()


def test_teacher_killed_mid_epoch_resumes_to_the_same_result(tiny_encoder_dir, tmp_path):
    """Covers the teacher's two learning rates and warm-up schedule, restored with the optimizer."""
    # batches of 2 make an epoch last well past the kill, 0.3 s into epoch 2's training (a SIGKILL while a
    # new best epoch is saved: test_a_save_that_fails_part_way_leaves_the_model_already_there_whole)
    args = ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "3", "--patience",
            "3", "--batch-size", "2", "--encoder-lr", "1e-3", "--max-length", "32", "--quiet", "--train", TRAIN,
            "--dev", DEV]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    cli(*args, "--output", whole)  # uninterrupted, in-process: also one thread
    kill_after(nlp_train(*args, "--output", resumed), lambda: (resumed / "resume.pt").exists(), 0.3)
    assert len(dev_metrics(resumed)) < 2, "killed after epoch 2 had ended: not mid-epoch"
    finish = nlp_train(*args, "--output", resumed, "--resume")
    assert finish.wait() == 0, finish.stderr.read().decode()
    assert dev_metrics(resumed) == dev_metrics(whole)
    trained = [load_model(d).state_dict() for d in (whole, resumed)]
    assert all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])


@pytest.fixture
def busy_cores():
    """Four processes spinning beside the test, killed after it: the load of a shared machine, where a
    SIGTERM once took minutes to end a run (the interpreter's teardown, starved of CPU)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def test_sigterm_cleans_up_as_ctrl_c_does_and_puts_an_overwritten_model_back(tmp_path, busy_cores):
    """`kill`, `timeout` and job schedulers stop a run with SIGTERM: a fresh run's output goes, and a
    model that --overwrite moved aside comes back whole, as after Ctrl-C; promptly, on a busy machine too."""
    args = ["student", *SMALL_LSTM, "--batch-size", "2", "--train", TRAIN, "--dev", DEV]
    model = tmp_path / "model"
    cli(*args, "--epochs", "1", "--output", model)
    before = {f.name: f.read_bytes() for f in model.iterdir()}
    for output, extra, ready in ((model, ["--overwrite"], lambda: (tmp_path / ".model.replaced").exists()),
                                 (tmp_path / "fresh", [], lambda: (tmp_path / "fresh").exists())):
        process = nlp_train(*args, "--epochs", "200", "--patience", "200", "--output", output, *extra)
        deadline = time.monotonic() + 600  # the start-up, slow beside the busy processes, is not what is tested
        while not ready():
            assert process.poll() is None, process.stderr.read().decode()
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("the run did not start within 600 s")
            time.sleep(0.01)
        time.sleep(0.5)
        process.terminate()
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
        assert process.stderr.read().decode().strip().splitlines()[-1] == "terminated"
    assert {f.name: f.read_bytes() for f in model.iterdir()} == before
    assert not (tmp_path / ".model.replaced").exists()
    assert not (tmp_path / "fresh").exists() or (tmp_path / "fresh" / "resume.pt").exists()


def test_a_sigterm_dropped_inside_a_finalizer_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """A signal's exception raised while a `__del__` runs is printed and dropped by Python; the command line
    delivers it again, so the run stops (143) instead of training on with SIGTERM ignored."""
    import distill.training
    import procedures.cli
    real_evaluate = distill.training.evaluate

    class Finalized:
        def __del__(self):
            procedures.cli._raise_terminated(signal.SIGTERM, None)  # as if SIGTERM came while it ran

    def evaluate(*args, **kwargs):
        Finalized()
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(distill.training, "evaluate", evaluate)
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--epochs", "3", "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "out")
    assert status == 128 + signal.SIGTERM and err.strip().splitlines()[-1] == "terminated"


@pytest.mark.parametrize("own_process", [True, False], ids=["own-process", "in-process"])
def test_an_interrupted_command_line_ends_without_tearing_the_interpreter_down(own_process, tmp_path, monkeypatch):
    """Once an interrupted run has cleaned up, its process ends at once (`end_process`): the interpreter's
    teardown collects every object of torch and transformers, which took most of a minute on a loaded
    machine. `main` called with arguments (from Python, these tests) is not its process's own: it raises."""
    import procedures.cli
    args = ["student", *SMALL_LSTM, "--epochs", "2", "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "out"]
    monkeypatch.setattr(sys, "argv", ["nlp-train", *map(str, args)])
    ended = []
    monkeypatch.setattr(procedures.cli, "end_process", lambda code: ended.append(code) or sys.exit(code))
    interrupt_evaluation(monkeypatch, call=1)
    with pytest.raises(SystemExit) as exit_info:
        procedures.cli.main(None if own_process else [str(a) for a in args])
    assert exit_info.value.code == 130 and ended == ([130] if own_process else [])


@pytest.mark.parametrize("left", ["partial files", "no folder"])
def test_a_model_that_a_killed_overwrite_run_moved_aside_is_put_back(left, tmp_path, capsys, caplog):
    """SIGKILL (or the kernel out of memory) gives an --overwrite run no time to put the old model
    back: the next run on that output does, before anything else, unless there is a run to resume."""
    args = ["student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "model"]
    cli(*args)
    before = {f.name: f.read_bytes() for f in (tmp_path / "model").iterdir()}
    os.replace(tmp_path / "model", tmp_path / ".model.replaced")  # what a killed --overwrite run leaves
    if left == "partial files":
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "vocab.json").write_text("{")
    status, error = run_main(capsys, *args)
    assert status == 2 and "already holds a student model" in error
    assert {f.name: f.read_bytes() for f in (tmp_path / "model").iterdir()} == before
    assert not (tmp_path / ".model.replaced").exists()
    assert "put back the model that a killed --overwrite run had moved aside" in caplog.text
    os.replace(tmp_path / "model", tmp_path / ".model.replaced")  # killed after an epoch: resumable, left alone
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "resume.pt").write_bytes(b"")
    assert run_main(capsys, *args)[0] == 2
    assert (tmp_path / ".model.replaced").is_dir() and (tmp_path / "model" / "resume.pt").exists()


def test_evaluate_of_a_read_only_model_names_its_default_output(tiny_student, tmp_path, capsys, monkeypatch):
    """The error named the model folder as not writable, not the metrics file evaluate writes there by default.
    (os.access stands in for a read-only share: the tests may run as root, for whom a chmod changes nothing.)"""
    import distill.evaluation
    model = copy_of(tiny_student, tmp_path, "shared")
    real_access = os.access
    monkeypatch.setattr(distill.evaluation.os, "access",
                        lambda path, mode: real_access(path, mode) and not (Path(path) == model and mode & os.W_OK))
    status, err = run_main(capsys, "evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet")
    assert status == 2 and f"{model / 'eval_metrics.json'}: not writable: evaluate writes its metrics beside" in err
    assert run_main(capsys, "evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet", "--output",
                    tmp_path / "m.json")[0] == 0


def test_overwrite_replaces_a_model_beside_its_evaluate_results_only(tiny_classifier_teacher, tmp_path, capsys):
    """The model's evaluate results are no reason to refuse --overwrite (under evaluate's default name also once
    the folder was renamed); anything else may be the user's work and is refused, pseudo-label output too (it
    may have been corrected by hand, or be a part to resume), and a JSON that merely looks like a result."""
    model = tmp_path / "student"
    args = ["student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", model]
    cli(*args)
    run_files = sorted(p.name for p in model.iterdir())
    cli("evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet")
    cli("evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", model / "dev_metrics.json", "--quiet")
    cli(*args, "--seed", "3", "--overwrite")
    assert sorted(p.name for p in model.iterdir()) == run_files
    cli("evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet")
    model = model.rename(tmp_path / "renamed")  # its evaluate result names the old path
    args[-1] = model
    cli(*args, "--overwrite")
    assert sorted(p.name for p in model.iterdir()) == run_files
    for name, content in (("pseudo.jsonl", '{"line": 1, "text": "good", "label": "pos", "confidence": 0.9}\n'),
                          ("p.jsonl.part", '{"line": 1, "text": "a fi'),
                          ("mine.json", '{"model": "elsewhere", "data": "x.csv", "examples": 3}')):
        write(model / name, content)
        status, err = run_main(capsys, *args, "--overwrite")
        assert status == 2 and f"holds {name}, which distill did not write" in err, err
        assert (model / name).read_text() == content
        (model / name).unlink()


def test_overwrite_keeps_the_hidden_files_of_a_model_repository(tmp_path, capsys, monkeypatch):
    """A model folder kept as a repository (`.git`, `.gitattributes`, as on the Hugging Face hub): --overwrite
    moved the whole folder aside and deleted it, history and all. The hidden entries now move into the new
    model, back with the old one when the run fails, and back from a killed run's partial output."""
    model = tmp_path / "model"
    args = ["student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", model]
    (model / ".git").mkdir(parents=True)
    (model / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (model / ".gitattributes").write_text("*.safetensors filter=lfs\n")

    def hidden() -> dict:
        return {name: (model / name).read_text() for name in (".git/HEAD", ".gitattributes") if (model / name).is_file()}

    kept = hidden()
    assert len(kept) == 2
    cli(*args)  # a folder of hidden files alone takes a model
    cli(*args, "--overwrite")
    assert hidden() == kept and (model / "distill.json").is_file()
    weights = (model / "model.safetensors").read_bytes()
    interrupt_evaluation(monkeypatch, call=1)
    assert run_main(capsys, *args, "--overwrite")[0] == 130  # Ctrl-C: the old model comes back, and its history
    assert hidden() == kept and (model / "model.safetensors").read_bytes() == weights
    os.replace(model, tmp_path / ".model.replaced")  # what a SIGKILL after the move leaves: history in the new folder
    model.mkdir()
    for name in (".git", ".gitattributes"):
        os.replace(tmp_path / ".model.replaced" / name, model / name)
    (model / "vocab.json").write_text("{")
    assert run_main(capsys, *args)[0] == 2  # the old model is put back first, then refused without --overwrite
    assert hidden() == kept and (model / "model.safetensors").read_bytes() == weights


def interrupted_in_epoch_2(capsys, monkeypatch, *args) -> list:
    """Run nlp-train ARGS and press Ctrl-C during epoch 2's evaluation, so the output holds resume
    state after epoch 1; returns ARGS."""
    import distill.training
    real_evaluate = distill.training.evaluate
    interrupt_evaluation(monkeypatch)
    assert run_main(capsys, *args)[0] == 130
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)
    output = Path(args[list(map(str, args)).index("--output") + 1])
    assert (output / "resume.pt").exists()
    return list(args)


def test_kd_resume_refuses_other_teacher_logits_than_it_trained_on(tiny_classifier_teacher, tmp_path, capsys,
                                                                   monkeypatch):
    """A teacher's logits depend slightly on the batch each example was scored in: a cache filled by
    pseudo-label, then cleared before the resume, gave logits kd computed anew, and the resumed run ended
    on another model than the uninterrupted one. Now refused (here: logits changed by 1e-6), leaving the
    interrupted run as it was; with the logits it trained on, the resume goes on."""
    import distill.cache
    out = tmp_path / "kd"
    args = interrupted_in_epoch_2(capsys, monkeypatch, *kd_with(tiny_classifier_teacher, out, "--epochs", "3",
                                                                "--cache-dir", tmp_path / "cache"))
    before = snapshot(out)
    real_logits = distill.cache.teacher_logits

    def other_batches(*call_args, **call_kwargs):
        results, hits = real_logits(*call_args, **call_kwargs)
        return type(results)(results.logits + 1e-6, results.offsets, results.scored), hits

    monkeypatch.setattr(distill.cache, "teacher_logits", other_batches)
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "cannot resume: the teacher's logits differ from those the interrupted run" in err, err
    assert snapshot(out) == before
    monkeypatch.setattr(distill.cache, "teacher_logits", real_logits)
    cli(*args, "--resume")
    assert len(dev_metrics(out)) == 3 and not (out / "resume.pt").exists()


def test_resume_refuses_changed_settings_and_finished_runs(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    args = interrupted_in_epoch_2(capsys, monkeypatch, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV,
                                  "--output", out, "--epochs", "3")
    status, err = run_main(capsys, *args, "--resume", "--lr", "0.01")
    assert status == 2 and "cannot resume with different settings or data (settings.lr)" in err
    cli(*args, "--resume")
    assert len(dev_metrics(out)) == 3 and not (out / "resume.pt").exists()
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "already finished" in err


def test_pseudo_label_killed_with_sigkill_resumes_to_identical_rows(tiny_tagging_teacher, tmp_path):
    corpus = write(tmp_path / "corpus.txt", (SAMPLES / "unlabeled_news.txt").read_text() * 3)
    args = ["pseudo-label", "--teacher", tiny_tagging_teacher, "--input", corpus, "--chunk-size", "16", "--quiet"]
    whole, resumed = tmp_path / "whole.jsonl", tmp_path / "resumed.jsonl"
    cli(*args, "--output", whole)  # uninterrupted, in-process: also one thread
    part = tmp_path / "resumed.jsonl.part"
    kill_after(nlp_train(*args, "--output", resumed), lambda: part.exists() and part.stat().st_size > 10_000, 0.05)
    assert not resumed.exists() and part.exists()
    finish = nlp_train(*args, "--output", resumed, "--resume")
    assert finish.wait() == 0, finish.stderr.read().decode()
    assert resumed.read_bytes() == whole.read_bytes()


# --- untrusted files --------------------------------------------------------------------------------------------

class Payload:
    """Unpickling this runs code: what a planted checkpoint would do if loaded with plain pickle."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_planted_pickle_is_refused_and_never_runs(tiny_classifier_teacher, tmp_path):
    from distill.io import file_sha256
    from distill.models.card import MODEL_CARD
    teacher = Path(shutil.copytree(tiny_classifier_teacher, tmp_path / "teacher"))
    marker = tmp_path / "pwned"
    checkpoint = torch.load(teacher / "checkpoint.pt", weights_only=True)
    checkpoint["config"] = Payload(marker)
    torch.save(checkpoint, teacher / "checkpoint.pt")
    with pytest.raises(DistillError, match="corrupted or truncated"):
        load_model(teacher)  # the checksum catches the swapped file first...
    card = json.loads((teacher / MODEL_CARD).read_text())
    card["sha256"]["checkpoint.pt"] = file_sha256(teacher / "checkpoint.pt")
    (teacher / MODEL_CARD).write_text(json.dumps(card))
    with pytest.raises(DistillError, match="refused to load: not a plain tensor checkpoint"):
        load_model(teacher)  # ...and weights_only loading refuses it even with a forged checksum
    assert not marker.exists()


# --- determinism ------------------------------------------------------------------------------------------------

def test_same_seed_same_metrics(tiny_classifier_teacher, tmp_path):
    for run in ("a", "b"):
        cli("kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--epochs", "2", "--train", TRAIN,
            "--dev", DEV, "--output", tmp_path / run, "--cache-dir", tmp_path / "cache")
    assert dev_metrics(tmp_path / "a") == dev_metrics(tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()


# --- outputs never clobber what the user needs ------------------------------------------------------------------

def snapshot(path: Path) -> dict:
    """Every file under `path` (or the file itself) with its bytes: to prove nothing changed."""
    path = Path(path)
    if path.exists() and not path.is_dir() and not path.is_file():
        return {str(path): "not a regular file"}  # a pipe: reading it would block
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): f.read_bytes() for f in files}


def copy_of(source: str | Path, tmp: Path, name: str) -> Path:
    source = Path(source)
    target = tmp / name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target


# Each case: (id, build(tmp, teacher, student) -> (argv, protected path), expected fragment). The protected
# file or directory must be byte-identical afterwards.
def _data_loss_cases():
    def kd_into_teacher(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return kd_with(str(teacher), teacher), teacher

    def kd_inside_teacher(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return kd_with(str(teacher), teacher / "student"), teacher

    def evaluate_over_data(t, te, st):
        data = copy_of(SAMPLES / "sentiment_test.csv", t, "test.csv")
        return ["evaluate", st, data, "--output", data], data

    def evaluate_over_model_file(t, te, st):
        student = copy_of(st, t, "student")
        return ["evaluate", student, SAMPLES / "sentiment_test.csv", "--output", student / "model.safetensors"], \
            student

    def pseudo_label_over_input(t, te, st):
        corpus = copy_of(SAMPLES / "unlabeled_movies.txt", t, "movies.txt")
        return ["pseudo-label", "--teacher", te, "--input", corpus, "--output", corpus], corpus

    def pseudo_label_over_input_link(t, te, st):
        corpus = copy_of(SAMPLES / "unlabeled_movies.txt", t, "movies.txt")
        (t / "link.jsonl").symlink_to(corpus)
        return ["pseudo-label", "--teacher", te, "--input", corpus, "--output", t / "link.jsonl"], corpus

    def student_over_its_data_folder(t, te, st):
        folder = t / "data"
        folder.mkdir()
        train = copy_of(TRAIN, folder, "train.csv")
        return ["student", *SMALL_LSTM, "--train", train, "--dev", DEV, "--output", folder], folder

    def teacher_over_a_student(t, te, st):
        student = copy_of(st, t, "student")
        return ["teacher", "--task", "classification", "--encoder", Path(te) / "encoder", "--train", TRAIN, "--dev",
                DEV, "--output", student], student

    def student_over_another_model(t, te, st):
        student = copy_of(st, t, "student")
        return ["student", "--model", "cnn", "--quiet", "--train", TRAIN, "--dev", DEV, "--output", student], student

    def student_over_foreign_files(t, te, st):
        folder = t / "notes"
        folder.mkdir()
        (folder / "config.json").write_text('{"mine": true}')
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", folder], folder

    def pseudo_label_over_a_csv(t, te, st):
        data = copy_of(TRAIN, t, "train.csv")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output", data], data

    def evaluate_into_the_encoder_folder(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return ["evaluate", teacher, SAMPLES / "sentiment_test.csv", "--output", teacher / "encoder" / "m.json"], \
            teacher

    def pseudo_label_into_a_pipe(t, te, st):
        os.mkfifo(t / "pipe")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                t / "pipe"], t / "pipe"

    def pseudo_label_into_another_models_encoder(t, te, st):
        other = copy_of(te, t, "other-teacher")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                other / "encoder" / "p.jsonl"], other

    def student_inside_another_model(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", other / "sub"], other

    def evaluate_over_another_models_weights(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "model.safetensors"], other

    def evaluate_over_other_json(t, te, st):
        other = write(t / "settings.json", '{"keep": "me"}')
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other], other

    def evaluate_over_another_models_result(t, te, st):
        other = copy_of(st, t, "other-student")
        cli("evaluate", other, SAMPLES / "sentiment_test.csv", "--quiet")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "eval_metrics.json"], other

    def evaluate_over_a_training_record(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "train_summary.json",
                "--overwrite"], other

    def pseudo_label_over_a_training_log(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                other / "metrics.jsonl", "--overwrite"], other

    def student_overwrite_through_a_link(t, te, st):
        student = copy_of(st, t, "v1")
        (t / "latest").symlink_to("v1")  # the usual latest -> v1 layout: --overwrite would replace the link
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", t / "latest", "--overwrite"], \
            student

    def pseudo_label_into_a_dangling_link(t, te, st):
        (t / "gone.jsonl").symlink_to(t / "nowhere" / "p.jsonl")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                t / "gone.jsonl"], t / "gone.jsonl"

    def evaluate_into_a_name_the_loader_reads(t, te, st):  # a teacher folder holds no config.json
        teacher = copy_of(te, t, "teacher")
        return ["evaluate", teacher, SAMPLES / "sentiment_test.csv", "--output", teacher / "config.json"], teacher

    def pseudo_label_into_a_name_the_loader_reads(t, te, st):  # a classifier student holds no CRF
        student = copy_of(st, t, "student")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                student / "crf.safetensors"], student

    def student_overwrite_of_a_folder_of_models_and_a_log(t, te, st):  # the user's metrics.jsonl, not a run's
        folder = t / "experiments"
        folder.mkdir()
        copy_of(st, folder, "student")
        write(folder / "metrics.jsonl", '{"step": 1, "loss": 0.5}\n')
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", folder, "--overwrite"], folder

    def student_overwrite_of_a_model_beside_notes(t, te, st):
        student = copy_of(st, t, "student")
        write(student / "notes.txt", "what I tried")
        write(student / "labels.json", '["positive", "negative"]')  # JSON, but no evaluate result
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", student, "--overwrite"], student

    def kd_cache_inside_its_output(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / "kd" / "cache"), t

    def kd_cache_is_its_output(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / "kd"), t

    def kd_cache_is_the_model_it_replaces(t, te, st):  # --overwrite moves the old model there, then deletes it
        return kd_with(te, copy_of(st, t, "kd"), "--cache-dir", t / ".kd.replaced" / "logits", "--overwrite"), t

    def kd_cache_is_its_lock(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / ".kd.lock"), t

    return [
        ("student-overwrite-through-a-link", student_overwrite_through_a_link, "is a symbolic link (to v1)"),
        ("pseudo-label-output-is-a-dangling-link", pseudo_label_into_a_dangling_link, "which does not exist"),
        ("kd-cache-inside-its-output", kd_cache_inside_its_output, "the model this run writes"),
        ("kd-cache-is-its-output", kd_cache_is_its_output, "the model this run writes"),
        ("kd-cache-is-the-model-it-replaces", kd_cache_is_the_model_it_replaces, "uses the name .kd.replaced"),
        ("kd-cache-is-its-lock", kd_cache_is_its_lock, "uses the name .kd.lock"),
        ("kd-output-is-the-teacher", kd_into_teacher, "is an input of this command"),
        ("kd-output-inside-the-teacher", kd_inside_teacher, "lies inside"),
        ("evaluate-output-is-the-data", evaluate_over_data, "is an input of this command"),
        ("evaluate-output-is-a-model-file", evaluate_over_model_file, "is a file of the model"),
        ("pseudo-label-output-is-the-input", pseudo_label_over_input, "is an input of this command"),
        ("pseudo-label-output-links-to-the-input", pseudo_label_over_input_link, "is a symbolic link"),
        ("student-output-holds-its-data", student_over_its_data_folder, "holds"),
        ("teacher-output-holds-a-student", teacher_over_a_student, "already holds a student model"),
        ("student-output-holds-another-model", student_over_another_model, "pass --overwrite to replace it"),
        ("student-output-holds-foreign-files", student_over_foreign_files, "holds no distill model"),
        ("pseudo-label-output-is-a-csv", pseudo_label_over_a_csv, "exists and is not pseudo-label output"),
        ("evaluate-output-is-another-json", evaluate_over_other_json, "exists and is not an evaluate result"),
        ("evaluate-output-in-the-encoder-folder", evaluate_into_the_encoder_folder, "lies in a folder of the model"),
        ("pseudo-label-output-is-a-pipe", pseudo_label_into_a_pipe, "is not a regular file"),
        ("pseudo-label-output-in-another-models-encoder", pseudo_label_into_another_models_encoder,
         "lies in a folder of the model"),
        ("student-output-inside-another-model", student_inside_another_model, "lies inside the model directory"),
        ("evaluate-output-is-another-models-weights", evaluate_over_another_models_weights, "is a file of the model"),
        ("evaluate-output-is-another-models-result", evaluate_over_another_models_result,
         "exists and is not an evaluate result of"),
        ("evaluate-overwrite-of-a-training-record", evaluate_over_a_training_record, "is a file of the model"),
        ("student-overwrite-of-a-folder-of-models-and-a-log", student_overwrite_of_a_folder_of_models_and_a_log,
         "is not empty and holds no distill model"),
        ("student-overwrite-of-a-model-beside-notes", student_overwrite_of_a_model_beside_notes,
         "holds labels.json, which distill did not write"),
        ("evaluate-output-named-as-a-loaded-file", evaluate_into_a_name_the_loader_reads,
         "is a name the model's loader reads"),
        ("pseudo-label-output-named-as-a-loaded-file", pseudo_label_into_a_name_the_loader_reads,
         "is a name the model's loader reads"),
        ("pseudo-label-overwrite-of-a-training-log", pseudo_label_over_a_training_log, "is a file of the model"),
    ]


DATA_LOSS = _data_loss_cases()


@pytest.mark.parametrize("build, fragment", [c[1:] for c in DATA_LOSS], ids=[c[0] for c in DATA_LOSS])
def test_outputs_never_clobber_inputs_or_models(build, fragment, tmp_path, tiny_classifier_teacher, tiny_student,
                                                capsys):
    argv, protected = build(tmp_path, tiny_classifier_teacher, tiny_student)
    before, files = snapshot(protected), set(tmp_path.rglob("*"))
    status, err = run_main(capsys, *argv)
    assert status == 2, err
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(protected) == before, "the protected file changed"
    assert set(tmp_path.rglob("*")) == files, "the refused command wrote something"


@pytest.mark.parametrize("command, where, fragment", [
    ("kd", "teacher/encoder", "lies inside the model directory"), ("kd", "kd", "the model this run writes"),
    ("kd", ".kd.lock", "uses the name .kd.lock"), ("pseudo-label", "teacher/encoder", "lies inside the model directory"),
    ("pseudo-label", "kd.jsonl", "uses the name kd.jsonl")])
def test_the_default_cache_is_checked_as_a_cache_dir_is(command, where, fragment, tmp_path, tiny_classifier_teacher,
                                                        capsys, monkeypatch):
    """$DISTILL_CACHE moves the default logit cache; pointed into a model (or the run's own output, or a name
    beside it) it wrote shards there, and the teacher was refused from then on, as a --cache-dir there is."""
    teacher = copy_of(tiny_classifier_teacher, tmp_path, "teacher")
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / where))
    output = tmp_path / ("kd" if command == "kd" else "kd.jsonl")
    argv = kd_with(teacher, output) if command == "kd" else \
        ["pseudo-label", "--teacher", teacher, "--input", SAMPLES / "unlabeled_movies.txt", "--output", output]
    before, files = snapshot(teacher), set(tmp_path.rglob("*"))
    status, err = run_main(capsys, *argv)
    assert status == 2 and fragment in err and "$DISTILL_CACHE/teacher-logits" in err, err
    assert len(err.strip().splitlines()) == 1 and snapshot(teacher) == before and set(tmp_path.rglob("*")) == files


@pytest.mark.parametrize("command", ["student", "kd"])
def test_class_weights_on_a_crf_tagger_are_refused(command, tiny_tagging_teacher, tmp_path, capsys):
    """A CRF's loss scores whole tag sequences: --class-weights trained the very model it trained without."""
    argv = ["student", "--model", "lstm-tagger"] if command == "student" else \
        ["kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", "--random-embeddings"]
    argv += ["--crf", "--epochs", "1", "--embedding-dim", "8", "--hidden-dim", "8", "--quiet", "--train",
             SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--output", tmp_path / "out"]
    status, err = run_main(capsys, *argv, "--class-weights", "inverse")
    assert status == 2 and "class weights do not apply to this model's loss (a CRF" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert run_main(capsys, *argv, "--class-weights", "none")[0] == 0


@pytest.mark.parametrize("extra, fragment", [
    (["--resume", "--overwrite"], "--resume continues the interrupted run and --overwrite starts over"),
    (["--online-teacher", "--cache-dir", "cache"], "an online teacher scores every batch and keeps no logit cache"),
    (["--unlabeled", SAMPLES / "unlabeled_movies.txt", "--unlabeled-ratio", "0.001"],
     "unlabeled ratio 0.001 keeps none of the 300 unlabeled examples"),
], ids=["resume-and-overwrite", "online-teacher-and-cache", "ratio-keeps-nothing"])
def test_kd_options_that_would_be_ignored_are_refused(extra, fragment, tiny_classifier_teacher, tmp_path, capsys):
    status, err = run_main(capsys, *kd_with(tiny_classifier_teacher, tmp_path / "kd", *extra))
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "kd").exists()


def test_kd_refuses_the_dev_set_as_its_unlabeled_text(tiny_classifier_teacher, tmp_path, capsys):
    """Taught the dev texts with the teacher's labels, the student would be picked on what it learnt."""
    import csv
    texts = [row["text"] for row in csv.DictReader(open(DEV, encoding="utf-8"))]
    dev_texts = write(tmp_path / "dev.txt", "\n".join(texts) + "\n")
    status, err = run_main(capsys, *kd_with(tiny_classifier_teacher, tmp_path / "kd", "--unlabeled", dev_texts))
    assert status == 2 and "100% of its examples are also in the unlabeled data" in err, err
    assert not (tmp_path / "kd").exists()


def test_resume_of_a_run_whose_state_file_was_deleted_says_so(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    (out / "resume.pt").unlink()
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "holds no resume state (resume.pt is missing) and no finished run" in err, err


def test_overwrite_replaces_a_model_and_puts_it_back_if_the_run_fails(tiny_student, tmp_path, capsys):
    student = copy_of(tiny_student, tmp_path, "student")
    before = snapshot(student)
    bad_dev = write(tmp_path / "dev.csv", "text,label\nfine,neutral\n")  # a label the training data lacks
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev, "--output", student,
                           "--overwrite")
    assert status == 2 and "label 'neutral' was not seen in training" in err
    assert snapshot(student) == before, "a failed --overwrite run lost the model it was replacing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.csv", "student"], "backup left behind"
    cli("student", "--model", "cnn", "--quiet", "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", student,
        "--overwrite")
    assert json.loads((student / "distill.json").read_text())["model"] == "cnn"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.csv", "student"]


def test_rerunning_a_command_replaces_only_its_own_earlier_file(tiny_student, tmp_path):
    out = tmp_path / "metrics.json"
    for _ in range(2):  # an earlier evaluate result may be replaced without --overwrite
        cli("evaluate", tiny_student, SAMPLES / "sentiment_test.csv", "--output", out, "--quiet")
    assert json.loads(out.read_text())["examples"] == 60


@pytest.mark.parametrize("command", ["student", "pseudo-label", "evaluate"])
def test_a_second_run_on_a_locked_output_is_refused(command, tiny_classifier_teacher, tiny_student, tmp_path,
                                                    capsys):
    """While one run writes an output, another run on the same output is refused, not interleaved."""
    import fcntl
    if command == "student":
        target = tmp_path / "out"
        target.mkdir()
        (target / "resume.pt").write_bytes(b"")  # what the other run has written so far
        lock_path, argv = target, student_on(TRAIN, target)
    elif command == "pseudo-label":
        target = tmp_path / "p.jsonl"
        lock_path = tmp_path / ".p.jsonl.lock"
        argv = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
                "--output", target, "--quiet"]
    else:
        target = tmp_path / "m.json"
        lock_path = tmp_path / ".m.json.lock"
        argv = ["evaluate", tiny_student, SAMPLES / "sentiment_test.csv", "--output", target, "--quiet"]
    fd = os.open(lock_path, os.O_RDONLY if lock_path.is_dir() else os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the "other run"
        status, err = run_main(capsys, *argv)
    finally:
        os.close(fd)
    assert status == 2 and "another nlp-train run is writing it right now" in err, err
    assert not target.exists() or sorted(p.name for p in target.iterdir()) == ["resume.pt"]


@pytest.mark.parametrize("command", ["teacher", "student", "kd", "pseudo-label", "evaluate"])
def test_failed_runs_leave_no_output_behind(command, tiny_classifier_teacher, tiny_encoder_dir, tmp_path, capsys):
    """A run that fails after its output was set up (here: on a bad line in its data) removes it all,
    folders it made included."""
    bad_dev = write(tmp_path / "dev.csv", "text,label\nfine,positive\n\x00,positive\n")
    out = tmp_path / "deep" / "er" / "out"
    argv = {
        "teacher": ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--train", TRAIN,
                    "--dev", bad_dev, "--output", out, "--quiet"],
        "student": ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev, "--output", out],
        "kd": ["kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev,
               "--output", out],
        "pseudo-label": ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                         write(tmp_path / "in.txt", "good\n\x00\n"), "--output", out, "--quiet"],
        "evaluate": ["evaluate", tiny_classifier_teacher, bad_dev, "--output", out, "--quiet"],
    }[command]
    status, err = run_main(capsys, *argv)
    assert status == 2 and "binary data" in err, err
    assert not (tmp_path / "deep").exists(), "a failed run left folders or files behind"


# --- resume is exact or refused ---------------------------------------------------------------------------------

def interrupted_student(out: Path, train: Path, capsys, monkeypatch) -> list:
    """A student run stopped by Ctrl-C in epoch 2, so OUTPUT holds resume state; returns its argv."""
    return interrupted_in_epoch_2(capsys, monkeypatch, "student", *SMALL_LSTM, "--train", train, "--dev", DEV,
                                  "--output", out, "--epochs", "3")


def same_size_edit(path: Path) -> None:
    """Change a file's content but not its size, and put its modification time back."""
    stat = path.stat()
    data = path.read_text()
    path.write_text(data.replace("remake", "REMAKE", 1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("change, fragment", [
    (lambda args, train: (same_size_edit(train), args)[1], "inputs.train"),
    (lambda args, train: with_option(args, "--dev", SAMPLES / "sentiment_test.csv"), "inputs.dev"),
    (lambda args, train: ["--threads", "2", *args], "runtime.threads"),
    (lambda args, train: args + ["--dropout", "0.3"], "config.dropout"),
    (lambda args, train: (flip_middle_byte(Path(args[args.index("--output") + 1]) / "resume.pt"), args)[1],
     "corrupted (its checksum does not match)"),
], ids=["train-edited-same-size-and-mtime", "other-dev-file", "threads", "dropout", "state-file-corrupted"])
def test_resume_refuses_any_change_that_alters_the_result(change, fragment, tmp_path, capsys, monkeypatch):
    train = copy_of(TRAIN, tmp_path, "train.csv")
    out = tmp_path / "run"
    args = interrupted_student(out, train, capsys, monkeypatch)
    before = snapshot(out)
    status, err = run_main(capsys, *change(args, train), "--resume")
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    if "corrupted" not in fragment:
        assert snapshot(out) == before, "a refused resume touched the interrupted run"


def test_an_interrupted_run_is_neither_restarted_nor_lost_without_a_choice(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    status, err = run_main(capsys, *args)
    assert status == 2 and "holds an interrupted run; continue it with --resume" in err
    cli(*args, "--overwrite")
    assert len(dev_metrics(out)) == 3 and not (out / "resume.pt").exists()


def test_an_interrupted_run_is_not_used_as_a_model(tmp_path, capsys, monkeypatch):
    """Its folder holds the best epoch so far: scoring, exporting or distilling from it would serve a
    half-trained model as a finished one (and evaluate's metrics file would outlive the resume)."""
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    for command in (["evaluate", out, DEV], ["predict", out, SAMPLES / "unlabeled_movies.txt"],
                    ["export", out, "--output", tmp_path / "onnx"], kd_with(str(out), tmp_path / "kd")):
        status, err = run_main(capsys, *command)
        assert status == 2 and "holds an interrupted run (resume.pt), not a finished model" in err, err
    assert not (tmp_path / "kd").exists() and not (tmp_path / "onnx").exists()
    assert not (out / "eval_metrics.json").exists()
    cli(*args, "--resume")
    assert run_main(capsys, "evaluate", out, DEV)[0] == 0


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_resume_refuses_when_the_best_model_so_far_is_damaged(damage, tmp_path, capsys, monkeypatch):
    """A resumed run that never beats its best epoch keeps that epoch's saved model: it must be whole."""
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    weights = out / "model.safetensors"
    weights.unlink() if damage == "deleted" else weights.write_bytes(weights.read_bytes()[:100])
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "the model of the interrupted run's best epoch (1) is missing or damaged" in err, err
    assert (out / "resume.pt").exists()


def test_teacher_resume_refuses_a_changed_encoder_folder(tiny_encoder_dir, tmp_path, capsys, monkeypatch):
    """The weights in the resume state were trained on that folder's token ids: another tokenizer
    (or other weights) at the same path would make a run that is neither the old nor a new one."""
    encoder = copy_of(tiny_encoder_dir, tmp_path, "encoder")
    args = interrupted_in_epoch_2(capsys, monkeypatch, "teacher", "--task", "classification", "--encoder", encoder,
                                  "--epochs", "3", "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "t",
                                  "--max-length", "32", "--quiet")
    vocab = encoder / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace("film", "flim", 1), encoding="utf-8")
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "cannot resume with different settings or data (inputs.encoder)" in err, err


def test_kd_resume_refuses_a_retrained_teacher(tiny_classifier_teacher, tmp_path, capsys, monkeypatch):
    teacher = copy_of(tiny_classifier_teacher, tmp_path, "teacher")
    args = interrupted_in_epoch_2(capsys, monkeypatch, *kd_with(str(teacher), tmp_path / "kd", "--epochs", "3",
                                                                "--cache-dir", tmp_path / "cache"))
    card = json.loads((teacher / "distill.json").read_text())
    card["labels"] = list(card["labels"])  # rewritten as a retrained teacher's card would be
    (teacher / "distill.json").write_text(json.dumps(card, indent=1))
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "inputs.teacher" in err, err


@pytest.mark.parametrize("change, fragment", [
    ("input", "inputs.input"),
    ("min-confidence", "min_confidence"),
    ("logits", "with_logits"),
    ("damaged-part", "the partial output is damaged"),
    ("records-removed", "the partial output holds 90 records for the 100 input lines it covers"),
    ("no-settings-record", "no record of the interrupted run's settings"),
])
def test_pseudo_label_resume_refuses_a_changed_run(change, fragment, tiny_classifier_teacher, tmp_path, capsys):
    corpus = copy_of(SAMPLES / "unlabeled_movies.txt", tmp_path, "movies.txt")
    out, part = tmp_path / "p.jsonl", tmp_path / "p.jsonl.part"
    args = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", corpus, "--output", out, "--quiet",
            "--chunk-size", "50"]
    cli(*args)
    rows = out.read_text().splitlines(keepends=True)
    out.rename(tmp_path / "full.jsonl")
    # as a run killed after 100 records leaves it: the part and the record of the run's settings
    from distill.pseudo_label import run_signature, signature_path
    part.write_text("".join(rows[:100]))
    signature = run_signature(tiny_classifier_teacher, str(corpus), min_confidence=0.0, with_logits=False,
                              batch_size=64, chunk_size=50)
    signature_path(out).write_text(json.dumps(signature))
    cli(*args, "--resume")  # unchanged: resumes to the same file
    assert out.read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    out.unlink()
    part.write_text("".join(rows[:100]))
    signature_path(out).write_text(json.dumps(signature))
    extra = []
    if change == "input":
        corpus.write_text(corpus.read_text().replace("a", "e", 1))
    elif change == "min-confidence":
        extra = ["--min-confidence", "0.9"]
    elif change == "logits":
        extra = ["--logits"]
    elif change == "damaged-part":
        part.write_text("".join(rows[:50] + rows[60:61] + rows[51:100]))
    elif change == "records-removed":  # lines still rising: only the count can tell
        part.write_text("".join(rows[:40] + rows[50:100]))
    else:
        signature_path(out).unlink()
    before = part.read_bytes()
    status, err = run_main(capsys, *args, *extra, "--resume")
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert part.read_bytes() == before and not out.exists()


def test_pseudo_label_says_it_does_not_read_stdin(tiny_student, tmp_path, capsys):
    status, err = run_main(capsys, "pseudo-label", "--teacher", tiny_student, "--input", "-", "--output",
                           tmp_path / "p.jsonl")
    assert status == 2 and "pseudo-label reads a file, not stdin" in err and not (tmp_path / "p.jsonl").exists()


def test_stdin_is_read_as_strictly_as_a_file(tiny_student):
    """A Latin-1 byte on stdin is refused with its line, as in a file; it is never predicted as U+FFFD."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    run = lambda data: subprocess.run([sys.executable, "-m", "procedures.cli", "--threads", "1", "predict",  # noqa: E731
                                       str(tiny_student)], input=data, capture_output=True, env=env, cwd=ROOT)
    bad = run(b"a fine film\ncaf\xe9 noir\n")
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.decode().strip() == "error: stdin:2: not UTF-8 text (byte 0xe9)"
    good = run("\ufeffa fine film\r\ncaf\u00e9 noir\n".encode())  # BOM and CRLF are fine
    assert good.returncode == 0, good.stderr.decode()
    assert [json.loads(line)["text"] for line in good.stdout.decode().splitlines()] == ["a fine film", "caf\u00e9 noir"]


# --- model directories are verified whole -----------------------------------------------------------------------

def _edit_json(path: Path) -> None:
    data = json.loads(path.read_text())
    data["edited"] = True
    path.write_text(json.dumps(data))


def _sealed_edit(path: Path, edit) -> None:
    """Edit a model file by hand and record its new checksum in the card, as a careful vandal would."""
    from distill.io import file_sha256
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    model = next(p for p in path.parents if (p / "distill.json").exists())
    card = json.loads((model / "distill.json").read_text())
    card["sha256"][str(path.relative_to(model))] = file_sha256(path)
    (model / "distill.json").write_text(json.dumps(card))


def _edit_card(model: Path, edit) -> None:
    card = json.loads((model / "distill.json").read_text())
    edit(card)
    (model / "distill.json").write_text(json.dumps(card))


MODEL_DAMAGE = [
    ("student-card-checksums-removed", "student", lambda d: _edit_card(d, lambda c: c.pop("sha256")),
     "records no checksum of config.json, so the model cannot be verified"),
    ("student-weights-unlisted", "student", lambda d: _edit_card(d, lambda c: c["sha256"].pop("model.safetensors")),
     "records no checksum of model.safetensors"),
    ("teacher-encoder-unlisted", "teacher", lambda d: _edit_card(
        d, lambda c: [c["sha256"].pop(n) for n in list(c["sha256"]) if n.startswith("encoder/")]),
     "encoder/config.json: not part of the model as saved"),
    ("student-card-lists-a-file-outside", "student", lambda d: _edit_card(d, lambda c: c["sha256"].update(
        {"../elsewhere.json": "0" * 64})), "outside the model directory"),
    ("student-config-size-a-string", "student", lambda d: _sealed_edit(d / "config.json", lambda c: c["config"].update(
        hidden_dim="16")), "hidden_dim must be a whole number, got '16'"),
    ("student-config-flag-a-string", "student", lambda d: _sealed_edit(d / "config.json", lambda c: c["config"].update(
        lowercase="no")), "lowercase must be true or false, got 'no'"),
    ("teacher-encoder-config-wrong-type", "teacher", lambda d: _sealed_edit(d / "encoder" / "config.json",
                                                                           lambda c: c.update(dim="32")),
     "its files do not make a model"),
    *[(f"student-card-version-{version!r}", "student", lambda d, v=version: _edit_card(d, lambda c: c.update(
        format_version=v)), "is not a version (1, 2, ...)") for version in ("2", 2.0, None, True, -7)],
    ("student-vocab-deleted", "student", lambda d: (d / "vocab.json").unlink(), "missing vocab.json"),
    ("student-config-edited", "student", lambda d: _edit_json(d / "config.json"), "corrupted or truncated"),
    ("student-vocab-edited", "student", lambda d: _edit_json(d / "vocab.json"), "corrupted or truncated"),
    ("teacher-tokenizer-config-edited", "teacher", lambda d: _edit_json(d / "encoder" / "tokenizer_config.json"),
     "corrupted or truncated"),
    ("teacher-encoder-config-deleted", "teacher", lambda d: (d / "encoder" / "config.json").unlink(),
     "missing encoder/config.json"),
    ("teacher-tokenizer-file-added", "teacher",
     lambda d: write(d / "encoder" / "special_tokens_map.json", '{"unk_token": "[MASK]"}'), "not part of the model"),
]


@pytest.mark.parametrize("kind, damage, fragment", [c[1:] for c in MODEL_DAMAGE], ids=[c[0] for c in MODEL_DAMAGE])
def test_damaged_model_directories_are_refused_before_any_prediction(kind, damage, fragment, tiny_classifier_teacher,
                                                                     tiny_student, tmp_path, capsys):
    model = copy_of(tiny_student if kind == "student" else tiny_classifier_teacher, tmp_path, "model")
    damage(model)
    status, err = run_main(capsys, "predict", model, SAMPLES / "unlabeled_movies.txt")
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert capsys.readouterr().out == "", "predictions were written from a damaged model"


# --- numbers are sane or refused at the option ------------------------------------------------------------------

NUMBERS = [
    ("lr-nan", ["--lr", "nan"], "'--lr'"),
    ("lr-inf", ["--lr", "inf"], "'--lr'"),
    ("lr-above-one", ["--lr", "5"], "'--lr'"),
    ("dropout-one", ["--dropout", "1"], "'--dropout'"),
    ("seed-negative", ["--seed", "-1"], "'--seed'"),
    ("seed-too-big", ["--seed", str(2**40)], "'--seed'"),
    ("class-weights-nan", ["--class-weights", "1,nan"], "'--class-weights'"),
    ("class-weights-all-zero", ["--class-weights", "0,0"], "'--class-weights'"),
    ("max-vocab-one", ["--max-vocab", "1"], "'--max-vocab'"),
    ("crf-on-a-classifier", ["--crf"], "'--crf'"),
    ("both-loss-weights-zero", ["KD", "--student-weight", "0", "--distill-weight", "0"], "nothing to train on"),
    ("ratio-without-unlabeled", ["KD", "--unlabeled-ratio", "2"], "--unlabeled-ratio applies to unlabeled text"),
    ("min-confidence-without-unlabeled", ["KD", "--min-confidence", "0.5"], "--min-confidence applies to unlabeled"),
    ("temperature-with-mse", ["KD", "--kd-loss", "mse", "--temperature", "4"], "'--temperature'"),
    ("temperature-inf", ["KD", "--temperature", "inf"], "'--temperature'"),
    ("unlabeled-ratio-zero", ["KD", "--unlabeled", SAMPLES / "unlabeled_movies.txt", "--unlabeled-ratio", "0"],
     "'--unlabeled-ratio'"),
    ("model-too-large-for-memory", ["--hidden-dim", str(10**9)], "error: out of memory"),
]


@pytest.mark.parametrize("extra, fragment", [c[1:] for c in NUMBERS], ids=[c[0] for c in NUMBERS])
def test_nonsensical_numbers_are_refused_at_the_option(extra, fragment, tiny_classifier_teacher, tmp_path, capsys):
    out = tmp_path / "out"
    if extra[0] == "KD":
        argv = kd_with(tiny_classifier_teacher, out, *extra[1:])
    else:
        argv = with_option(student_on(TRAIN, out), *extra) if len(extra) == 2 else student_on(TRAIN, out) + extra
    status, err = run_main(capsys, *argv)
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("repeated, message", [
    (["--head", "a", "--head", "b"], "--head is given twice: give it once"),
    (["--batch-size", "8", "--batch-size=16"], "--batch-size is given twice: give it once"),
])
def test_an_option_given_twice_is_refused_not_overridden(repeated, message, tiny_classifier_teacher, capsys):
    """click keeps the last value silently: `--head sent --head ner` scored `ner`."""
    status, err = run_main(capsys, "evaluate", tiny_classifier_teacher, DEV, *repeated)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    status, err = run_main(capsys, *student_on(TRAIN, "unused"), "--lowercase", "--cased")
    assert status == 2 and "--lowercase is given twice (as --lowercase and --cased)" in err, err
    status, err = run_main(capsys, "--threads", "1", "evaluate", tiny_classifier_teacher, DEV, "--threads", "2")
    assert status == 2 and "--threads is given twice: give it once" in err, err  # a global option, after the command


def test_binary_tagger_and_long_teacher_inputs_are_refused(tiny_encoder_dir, tmp_path, capsys):
    status, err = run_main(capsys, *tagger_on(SAMPLES / "ner_train.conll", tmp_path / "t"), "--binary")
    assert status == 2 and "'--binary'" in err
    status, err = run_main(capsys, "teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--train",
                           TRAIN, "--dev", DEV, "--output", tmp_path / "te", "--max-length", "512")
    assert status == 2 and "--max-length 512 is more than the 128 positions" in err, err
    assert not (tmp_path / "t").exists() and not (tmp_path / "te").exists()


def test_commands_that_score_a_trained_model_offer_no_label_separator(tiny_classifier_teacher, tmp_path, capsys):
    """The model's own label hierarchy reads the labels there: the option would be silently ignored."""
    for command in (["evaluate", tiny_classifier_teacher, DEV], ["compare", tiny_classifier_teacher, "--data", DEV]):
        status, err = run_main(capsys, *command, "--label-separator", ":")
        assert status == 2 and "No such option '--label-separator'" in err, err


# --- a full disk names the path, for every writing command ------------------------------------------------------

@pytest.mark.parametrize("command", ["teacher", "kd", "pseudo-label", "evaluate"])
def test_a_full_disk_names_the_file_and_leaves_nothing(command, tiny_classifier_teacher, tiny_encoder_dir, tmp_path):
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200) if command == "evaluate" else (20_000, 20_000))

    out = tmp_path / "out"
    argv = {
        "teacher": ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1",
                    "--train", TRAIN, "--dev", DEV, "--output", out, "--quiet"],
        "kd": kd_with(tiny_classifier_teacher, out, "--epochs", "1", "--cache-dir", tmp_path / "cache"),
        "pseudo-label": ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                         SAMPLES / "unlabeled_movies.txt", "--output", out, "--quiet"],
        "evaluate": ["evaluate", tiny_classifier_teacher, SAMPLES / "sentiment_test.csv", "--output", out, "--quiet"],
    }[command]
    process = nlp_train(*argv, preexec_fn=limit_file_size)
    err = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "cannot write (File too large)" in err and str(tmp_path) in err, err
    assert ".tmp" not in err, "the message names a temporary file instead of the output"
    if command != "pseudo-label":  # pseudo-label keeps its complete records for --resume
        assert not out.exists()


# --- data readers are strict where a guess would change results -------------------------------------------------

def classification_file(t: Path, name: str, content: str | bytes) -> list:
    return student_on(write(t / name, content), t / "out")


def tagging_file(t: Path, name: str, content: str) -> list:
    return tagger_on(write(t / name, content), t / "out")


STRICT_DATA = [
    ("duplicate-column", lambda t: classification_file(t, "d.csv", "text,label,text\na,pos,b\nc,neg,d\n"),
     "column 'text' appears twice"),
    ("semicolon-separated", lambda t: classification_file(t, "s.csv", "text;label\ngood;pos\nbad;neg\n"),
     "seems to be separated by ';'"),
    ("labels-differ-in-case", lambda t: classification_file(t, "c.csv", "text,label\ngood,Positive\nfine,positive\n"
                                                            "bad,negative\n"), "differ only in case"),
    ("labels-differ-in-unicode-form", lambda t: classification_file(
        t, "u.csv", "text,label\ngood,caf\u00e9\nfine,cafe\u0301\nbad,th\u00e9\n"), "differ only in case"),
    ("single-label", lambda t: classification_file(t, "one.csv", "text,label\ngood,pos\nfine,pos\n"),
     "a classifier needs at least two labels"),
    ("jsonl-label-is-a-list", lambda t: classification_file(t, "l.jsonl", '{"text": "a", "label": ["pos"]}\n'),
     "must be a string or a finite number"),
    ("jsonl-field-named-twice", lambda t: classification_file(
        t, "k.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b", "label": "pos", "label": "neg"}\n'),
     "k.jsonl:2: the record names the field 'label' twice"),
    ("json-array-field-named-twice", lambda t: classification_file(
        t, "k.json", '[{"text": "a", "label": "pos", "label": "neg"}]'), "names the field 'label' twice"),
    ("jsonl-label-is-nan", lambda t: classification_file(t, "n.jsonl", '{"text": "a", "label": NaN}\n'),
     "must be a string or a finite number"),
    ("tagging-tokens-a-string", lambda t: tagging_file(t, "s.jsonl", '{"tokens": "EU rejects", "tags": "B-ORG O"}\n'),
     "must be lists"),
    ("tags-all-O", lambda t: tagging_file(t, "o.conll", "EU O\nrejects O\n\nGerman O\n"), "every tag is 'O'"),
    ("tags-differ-in-case", lambda t: tagging_file(t, "t.conll", "EU B-ORG\nrejects O\n\nEU B-Org\n"),
     "differ only in case"),
    ("labels-differ-in-number-format", lambda t: classification_file(t, "n.csv", "text,label\na,1\nb,1.0\nc,0\n"),
     "differ only in case, spacing, Unicode form, invisible characters or number format"),
    ("labels-differ-by-a-zero-width-space", lambda t: classification_file(
        t, "z.csv", "text,label\ngood,positive\nfine,positive\u200b\nbad,negative\n"), "invisible characters"),
    ("lower-case-tags-all-o", lambda t: tagging_file(t, "o.conll", "EU o\nrejects o\n\nGerman o\n"),
     "every tag is 'o'"),
    ("one-plain-tag", lambda t: tagging_file(t, "nn.conll", "EU NN\nrejects NN\n\nGerman NN\n"), "every tag is 'NN'"),
    ("header-repeated-mid-file", lambda t: classification_file(
        t, "h.csv", "text,label\ngood,pos\nbad,neg\ntext,label\nfine,pos\n"), "h.csv:4: repeats the header row"),
    ("lines-quoted-whole", lambda t: classification_file(t, "q.csv", '"text,label"\n"good,pos"\n"bad,neg"\n'),
     "each line seems to be quoted whole"),
    ("conll-without-tags", lambda t: tagging_file(t, "w.conll", "EU\nrejects\n\nGerman\n"), "is the word itself"),
    ("jsonl-tags-null", lambda t: tagging_file(t, "n.jsonl", '{"tokens": ["EU", "x"], "tags": [null, "O"]}\n'),
     "must hold strings"),
    ("csv-to-a-tagging-command", lambda t: tagging_file(t, "x.csv", "text,label\ngood,pos\n"),
     "is CSV (classification data), but this command or model tags words"),
    ("conll-to-a-classification-command", lambda t: classification_file(t, "x.conll", "EU B-ORG\n"),
     "is CoNLL (tagging data), but this command or model classifies texts"),
    ("tagging-jsonl-to-a-classifier", lambda t: classification_file(
        t, "x.jsonl", '{"tokens": ["EU"], "tags": ["B-ORG"]}\n'), "holds tagging data (tokens and tags)"),
    ("classification-jsonl-to-a-tagger", lambda t: tagging_file(t, "x.jsonl", '{"text": "good", "label": "pos"}\n'),
     "holds classification data (text and label)"),
]


@pytest.mark.parametrize("build, fragment", [c[1:] for c in STRICT_DATA], ids=[c[0] for c in STRICT_DATA])
def test_ambiguous_data_is_refused_with_the_file(build, fragment, tmp_path, capsys):
    argv = build(tmp_path)
    status, err = run_main(capsys, *argv)
    assert status == 2 and fragment in err and str(tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_tagging_model_given_a_csv_says_which_task_fits(tiny_tagging_teacher, capsys):
    status, err = run_main(capsys, "evaluate", tiny_tagging_teacher, SAMPLES / "sentiment_test.csv")
    assert status == 2 and "this command or model tags words" in err, err


def test_spreadsheet_and_script_exports_are_read_as_meant(tmp_path):
    """Quotes in TSV are text; blank padding rows are skipped; 1.0 is the label 1; JSON arrays and BILOU tags."""
    from distill.data import read_classification, read_tagging
    tsv = read_classification(str(write(tmp_path / "a.tsv", 'text\tlabel\n"Great" fun\t1\n"so bad\t0\nok\t1\n\t\n')))
    assert tsv["text"] == ['"Great" fun', '"so bad', "ok"] and tsv["label"] == ["1", "0", "1"]
    spaced = read_classification(str(write(tmp_path / "s.csv", " text , label\ngood,1\nbad,0\n")))
    assert spaced["text"] == ["good", "bad"]
    padded = read_classification(str(write(tmp_path / "p.csv", "text,label,\ngood,1,\nbad,0,\n,,\n,,\n")))
    assert padded["text"] == ["good", "bad"] and padded["label"] == ["1", "0"]
    array = read_classification(str(write(tmp_path / "r.json", '[{"text": "good", "label": 1.0},\n'
                                                               ' {"text": "bad", "label": 0}]')))
    assert array["label"] == ["1", "0"]
    bilou = read_tagging(str(write(tmp_path / "b.conll", "EU U-ORG\nNew B-LOC\nYork L-LOC\nrejects O\n")))
    assert bilou["tags"] == [["U-ORG", "B-LOC", "L-LOC", "O"]]


@pytest.mark.parametrize("content, name, fragment", [
    ("text,label\ngood,positive\n", "texts.csv", "is CSV, a labelled format"),
    ('{"text": 5}\n', "texts.jsonl", "'text' must be a text (a string), got a number"),
    ('{"text": "   "}\n', "blank.jsonl", "empty 'text'"),
])
def test_unlabeled_input_that_would_be_misread_is_refused(content, name, fragment, tiny_classifier_teacher,
                                                           tmp_path, capsys):
    source = write(tmp_path / name, content)
    status, err = run_main(capsys, "pseudo-label", "--teacher", tiny_classifier_teacher, "--input", source,
                           "--output", tmp_path / "p.jsonl")
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_predict_tags_every_token_of_jsonl_numbers_too(tiny_tagging_teacher, tmp_path, capsys):
    source = write(tmp_path / "in.jsonl", '{"tokens": ["Paid", 2000, "euros", 3.5]}\n')
    cli("predict", tiny_tagging_teacher, source)
    record = json.loads(capsys.readouterr().out)
    assert record["tokens"] == ["Paid", "2000", "euros", "3.5"] and len(record["tags"]) == 4


def test_a_damaged_logit_cache_is_recomputed_not_trusted(tiny_classifier_teacher, tmp_path):
    args = kd_with(tiny_classifier_teacher, tmp_path / "a", "--epochs", "1", "--cache-dir", tmp_path / "cache")
    cli(*args)
    shards = list((tmp_path / "cache").rglob("*.safetensors"))
    assert len(shards) == 2  # the transfer set's and the dev set's (the teacher's dev score kd reports)
    for cache_file in shards:
        data = bytearray(cache_file.read_bytes())
        data[-3] ^= 0x40  # one logit's value changes; the file still loads
        cache_file.write_bytes(bytes(data))
    cli(*kd_with(tiny_classifier_teacher, tmp_path / "b", "--epochs", "1", "--cache-dir", tmp_path / "cache"))
    summary = json.loads((tmp_path / "b" / "train_summary.json").read_text())
    assert summary["cached_examples"] == 0
    assert dev_metrics(tmp_path / "b") == dev_metrics(tmp_path / "a")


@pytest.mark.parametrize("dev", ["train", "copy", "rows"])
def test_a_dev_set_made_of_training_examples_is_refused(tmp_path, capsys, dev):
    """The same file, a copy of it, or a dev set most of whose rows are training rows: the best epoch
    would be picked on what the model learns from. Nothing is written."""
    rows = TRAIN.read_text().splitlines()
    paths = {"train": TRAIN, "copy": tmp_path / "copy.csv", "rows": tmp_path / "rows.csv"}
    paths["copy"].write_text(TRAIN.read_text())
    held_out = DEV.read_text().splitlines()[1:]
    paths["rows"].write_text("\n".join([rows[0], *rows[1:7], *held_out[:4]]) + "\n")  # 6 of 10 from train
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", paths[dev],
                           "--output", tmp_path / "out")
    assert status == 2 and "of its examples are also in the training data" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_dev_set_sharing_some_training_examples_is_warned_of_or_accepted(caplog):
    from distill.data import Examples, check_held_out
    train = Examples([f"text {i}" for i in range(100)], ["a"] * 100, "memory:train")
    for shared, warned in [(0, False), (1, False), (3, True)]:  # of 10 dev examples
        dev = Examples([f"text {i}" for i in range(shared)] + [f"new {i}" for i in range(10 - shared)], ["a"] * 10,
                       "memory:dev")
        caplog.clear()
        check_held_out(train, dev)
        assert ("30% of its examples are also in the training data" in caplog.text) == warned


@pytest.mark.parametrize("args", [
    ["--task", "tagging", "--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--pooling", "mean"],
    ["--task-spec", f"sentiment:classification:{TRAIN}:{DEV}",
     "--task-spec", f"ner:tagging:{SAMPLES / 'ner_train.conll'}:{SAMPLES / 'ner_dev.conll'}:pooling=first"]])
def test_a_pooling_choice_for_a_tagger_is_refused(tmp_path, capsys, args):
    """A tagger scores each word from its first sub-token: a pooling choice would be stored and never used."""
    status, err = run_main(capsys, "teacher", *args, "--output", tmp_path / "out", "--quiet")
    assert status == 2 and "is for classification: a tagger scores each word" in err
    assert not (tmp_path / "out").exists()


def test_a_tagging_teacher_records_no_pooling(tiny_tagging_teacher, tiny_classifier_teacher):
    """A tagger pools nothing, so its stored config keeps "auto" (a classifier's is made concrete)."""
    from distill.models import load_model
    assert load_model(tiny_tagging_teacher).config.pooling == "auto"
    assert load_model(tiny_classifier_teacher).config.pooling in ("first", "mean")


def test_a_logit_cache_inside_a_model_is_refused(tmp_path, capsys, tiny_classifier_teacher):
    """Shards written into a teacher's folder would make every later command refuse the teacher."""
    import shutil
    teacher = tmp_path / "teacher"
    shutil.copytree(tiny_classifier_teacher, teacher)
    for cache in (teacher / "encoder", teacher, teacher / "encoder" / "new"):
        status, err = run_main(capsys, "pseudo-label", "--teacher", teacher, "--input", SAMPLES / "unlabeled_movies.txt",
                               "--output", tmp_path / "p.jsonl", "--cache-dir", cache, "--quiet")
        assert status == 2 and "lies inside the model directory" in err, err
        status, err = run_main(capsys, "kd", "--teacher", teacher, *SMALL_LSTM, "--epochs", "1", "--train", TRAIN,
                               "--dev", DEV, "--output", tmp_path / "kd", "--cache-dir", cache)
        assert status == 2 and "lies inside the model directory" in err, err
    assert not (teacher / "encoder" / "new").exists() and not (tmp_path / "kd").exists()
    status, err = run_main(capsys, "predict", teacher, SAMPLES / "unlabeled_movies.txt")
    assert status == 0, err  # still whole


@pytest.mark.parametrize("text, expected", [
    ('{"text": "a fine film"}\n{"text": "dull"}\n', ["a fine film", "dull"]),  # JSON lines, as --help says
    ("a fine film\ndull\n", ["a fine film", "dull"])])
def test_stdin_reads_lines_or_json_lines(capsys, monkeypatch, tmp_path, text, expected):
    import io
    model = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                          ["good film"])
    model.save_pretrained(tmp_path / "m")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", str(tmp_path / "m")])
    assert exit_info.value.code == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == expected


@pytest.mark.parametrize("text, message", [("text,label\ngood,positive\n", "looks like CSV"),
                                           ("Mina B-PER\nspoke O\n. O\n", "looks like CoNLL"),
                                           ("go\x00od\n", "NUL byte")])
def test_stdin_refuses_what_a_file_refuses(capsys, monkeypatch, tmp_path, text, message):
    import io
    model = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                          ["good film"])
    model.save_pretrained(tmp_path / "m")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    status, err = run_main(capsys, "predict", tmp_path / "m")
    assert status == 2 and message in err and err.startswith("error: stdin")


def test_a_model_is_never_written_into_the_encoder_folder_it_reads(tmp_path, capsys, tiny_encoder_dir):
    """A local --encoder folder is an input: an output inside it, or one holding it, is refused (the
    latter used to move the encoder aside with --overwrite and then fail to load it)."""
    encoder = tmp_path / "enc"
    shutil.copytree(tiny_encoder_dir, encoder)
    before = sorted(p.name for p in encoder.iterdir())
    common = ["teacher", "--task", "classification", "--encoder", encoder, "--epochs", "1", "--train", TRAIN,
              "--dev", DEV, "--quiet"]
    status, err = run_main(capsys, *common, "--output", encoder / "t")
    assert status == 2 and "lies inside" in err and "an input of this command" in err
    status, err = run_main(capsys, *common, "--output", tmp_path, "--overwrite")
    assert status == 2 and "holds" in err and "an input of this command" in err
    assert sorted(p.name for p in encoder.iterdir()) == before


def test_scoring_a_model_on_the_data_it_learnt_from_is_flagged_wherever_the_copy_lives(tiny_classifier_teacher,
                                                                                    tmp_path, caplog):
    """evaluate, compare and export --check-data on the training file (here a copy, found by content)
    warn and record it, so a training-set score is never read as a test score; held-out data does not."""
    from distill.compare import compare_models
    from distill.evaluation import evaluate_model
    from distill.export import export_model
    copy = tmp_path / "renamed.csv"
    shutil.copyfile(TRAIN, copy)
    result = evaluate_model(tiny_classifier_teacher, str(copy), output=str(tmp_path / "train.json"), progress=False)
    assert result["learnt_from"] == "train"
    assert f"{copy} is the data {tiny_classifier_teacher} was trained on" in caplog.text
    caplog.clear()
    held_out = evaluate_model(tiny_classifier_teacher, str(DEV), output=str(tmp_path / "dev.json"), progress=False)
    assert "learnt_from" not in held_out and "was trained on" not in caplog.text
    compare_models([tiny_classifier_teacher], str(copy), limit=4)
    assert "was trained on" in caplog.text
    caplog.clear()
    card = export_model(tiny_classifier_teacher, str(tmp_path / "slim"), "safetensors", check_data=str(copy))
    assert card["agreement"]["learnt_from"] == "train" and "was trained on" in caplog.text
    # the same examples in another file (other line ends, a trailing blank line), scored by the export
    other = tmp_path / "crlf.csv"
    other.write_bytes(TRAIN.read_bytes().replace(b"\n", b"\r\n") + b"\r\n")
    result = evaluate_model(str(tmp_path / "slim"), str(other), output=str(tmp_path / "slim.json"), progress=False)
    assert result["learnt_from"] == "train"


def test_an_export_keeps_what_its_source_learnt_from_when_the_source_folder_changes(tmp_path, caplog):
    """The check read the source folder's record as it is now: after a retrain there the export's own
    training file went unflagged and data it never saw was flagged. The export's card keeps the record."""
    from distill.evaluation import evaluate_model
    from distill.export import export_model
    from distill.provenance import learnt_record
    source = tmp_path / "m"
    cli("student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", source)
    export_model(str(source), str(tmp_path / "slim"), "safetensors")
    other = write(tmp_path / "other.csv", (SAMPLES / "sentiment_test.csv").read_bytes())
    cli("student", *SMALL_LSTM, "--epochs", "1", "--train", other, "--dev", DEV, "--output", source, "--overwrite")
    for data, role in ((TRAIN, "train"), (other, None)):
        result = evaluate_model(str(tmp_path / "slim"), str(data), output=str(tmp_path / "e.json"), progress=False)
        assert result.get("learnt_from") == role, data
    # an export made before cards kept the record: its source's, only while that holds the exported model
    card = json.loads((tmp_path / "slim" / "distill.json").read_text())
    del card["export"]["learnt_from"]
    old = tmp_path / "old-export"
    old.mkdir()
    (old / "distill.json").write_text(json.dumps(card))
    assert learnt_record(old) == {}  # the source was retrained since
    card["export"]["source_card_sha256"] = hashlib.sha256((source / "distill.json").read_bytes()).hexdigest()
    (old / "distill.json").write_text(json.dumps(card))
    assert learnt_record(old)["inputs"]["train"] == json.loads((source / "train_summary.json").read_text())[
        "inputs"]["train"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_while_a_best_epoch_is_saved_waits_for_the_save(signum, tmp_path, capsys, monkeypatch):
    """SIGTERM or Ctrl-C between writing a new best epoch's weights and its card is held until the model and
    the resume state are both saved: the run stops resumable and then finishes as an uninterrupted one."""
    import distill.models.students as students
    from distill.io import load_tensors
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "3"]
    cli(*args, "--output", tmp_path / "reference")
    real_card, cards = students.write_model_card, []

    def card_after_a_signal(*card_args, **card_kwargs):
        cards.append(1)
        if len(cards) == 1:
            signal.raise_signal(signum)
        return real_card(*card_args, **card_kwargs)

    monkeypatch.setattr(students, "write_model_card", card_after_a_signal)
    out = tmp_path / "run"
    # Python's own Ctrl-C handler, whatever the runner left (a shell starts background jobs ignoring SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status, err = run_main(capsys, *args, "--output", out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert status == (128 + signal.SIGTERM if signum == signal.SIGTERM else 130), err
    assert (out / "resume.pt").exists() and (out / "distill.json").exists()
    cli(*args, "--output", out, "--resume")
    ours, reference = load_tensors(out / "model.safetensors"), load_tensors(tmp_path / "reference/model.safetensors")
    assert ours.keys() == reference.keys() and all(torch.equal(ours[k], reference[k]) for k in ours)


def test_resume_refuses_a_hub_dataset_whose_rows_changed(tmp_path, capsys, monkeypatch):
    """A hub: spec names data that can change under it (a new revision, an edited local dataset folder):
    the signature records a digest of its rows, as it records a file's content, and evaluate still
    knows the spec as the training data."""
    import csv
    folder = tmp_path / "dataset"
    folder.mkdir()
    rows = list(csv.DictReader(open(TRAIN, encoding="utf-8")))

    def save(flip: bool) -> None:
        swap = {"positive": "negative", "negative": "positive"} if flip else {}
        (folder / "train.jsonl").write_text("".join(json.dumps({**row, "label": swap.get(row["label"], row["label"])})
                                                    + "\n" for row in rows), encoding="utf-8")

    save(flip=False)
    out, spec = tmp_path / "run", f"hub:{folder}:train"
    args = interrupted_in_epoch_2(capsys, monkeypatch, "student", *SMALL_LSTM, "--train", spec, "--dev", DEV,
                                  "--output", out, "--epochs", "2")
    save(flip=True)
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "(inputs.train)" in err, err
    save(flip=False)
    assert run_main(capsys, *args, "--resume")[0] == 0
    assert run_main(capsys, "evaluate", out, spec, "--output", tmp_path / "m.json")[0] == 0
    assert json.loads((tmp_path / "m.json").read_text())["learnt_from"] == "train"


def test_an_interrupt_after_the_last_epoch_keeps_the_run_to_resume(tmp_path, capsys, monkeypatch):
    """Between the last epoch and the summary the run still holds its resume state: Ctrl-C there keeps
    every epoch (the folder was removed), and --resume only writes the summary."""
    import distill.trainers as trainers
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "2", "--output", tmp_path / "run"]

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainers, "model_size_bytes", interrupted)  # called after the last epoch, before the summary
    assert run_main(capsys, *args)[0] == 130
    assert (tmp_path / "run" / "resume.pt").exists() and (tmp_path / "run" / "model.safetensors").exists()
    monkeypatch.undo()
    assert run_main(capsys, *args, "--resume")[0] == 0
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert len(summary["history"]) == 2 and not (tmp_path / "run" / "resume.pt").exists()


def test_output_dash_is_refused_and_a_closed_stdout_ends_predict_quietly(tiny_student, tmp_path, capsys):
    status, err = run_main(capsys, "evaluate", tiny_student, DEV, "--output", "-")
    assert status == 2 and err.strip() == "error: --output -: an evaluate result of " \
        f"{tiny_student} is written to a file; give its name", err
    lines = "".join(f"a fine film number {i}\n" for i in range(20000))
    reader = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    predict = subprocess.Popen([sys.executable, "-m", "procedures.cli", "--threads", "1", "predict", tiny_student, "-"],
                               env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=reader.stdin, stderr=subprocess.PIPE)
    reader.stdin.close()
    _, err = predict.communicate(lines.encode())
    reader.wait()
    assert predict.returncode == 1 and err == b"", err  # click's exit for a closed pipe: no traceback, no message


def test_a_save_that_fails_part_way_leaves_the_model_already_there_whole(tiny_student, tmp_path, monkeypatch):
    """A run's best epoch so far stays a whole model while the next best is written (in a staging
    folder beside it): a save stopped part-way (here an error after the weights; a SIGKILL alike)
    leaves the directory as it was, so `--resume` still finds that epoch's model."""
    import distill.models.students as students
    from distill.models.base import STAGING_PREFIX
    out = copy_of(tiny_student, tmp_path, "run")
    before = snapshot(out)
    model = load_model(out)

    def card_fails(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(students, "write_model_card", card_fails)
    with pytest.raises(OSError):
        model.write_model(out)
    assert snapshot(out) == before and not list(out.glob(f"{STAGING_PREFIX}*"))
    load_model(out)
