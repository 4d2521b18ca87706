"""Reliability and security: bad input, kill -9 and resume, untrusted checkpoints, determinism."""

from __future__ import annotations

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
from tests.conftest import ROOT, SAMPLES, cli

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
    ("unlabelled-only-empty-lines", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
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
    ("student-given-as-teacher", lambda t, te, st: kd_with(st, t / "out"),
     "is a student directory, expected a teacher"),
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
    assert not (out / "model.safetensors").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")], "temporary file left behind"


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
    args = ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "3", "--patience",
            "3", "--batch-size", "4", "--encoder-lr", "1e-3", "--max-length", "32", "--quiet", "--train", TRAIN,
            "--dev", DEV]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    cli(*args, "--output", whole)  # uninterrupted, in-process: also one thread
    kill_after(nlp_train(*args, "--output", resumed), lambda: (resumed / "resume.pt").exists(), 0.3)
    finish = nlp_train(*args, "--output", resumed, "--resume")
    assert finish.wait() == 0, finish.stderr.read().decode()
    assert dev_metrics(resumed) == dev_metrics(whole)
    trained = [load_model(d).state_dict() for d in (whole, resumed)]
    assert all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])


def test_resume_refuses_changed_settings_and_finished_runs(tmp_path, capsys, monkeypatch):
    import distill.training
    out = tmp_path / "run"
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", out, "--epochs", "3"]
    evaluations = []
    real_evaluate = distill.training.evaluate

    def interrupted_in_epoch_2(*a, **k):
        evaluations.append(1)
        if len(evaluations) == 2:
            raise KeyboardInterrupt  # Ctrl-C during epoch 2's evaluation
        return real_evaluate(*a, **k)

    monkeypatch.setattr(distill.training, "evaluate", interrupted_in_epoch_2)
    assert run_main(capsys, *args)[0] == 130
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)
    assert (out / "resume.pt").exists()
    status, err = run_main(capsys, *args, "--resume", "--lr", "0.01")
    assert status == 2 and "cannot resume with different settings (config)" in err
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
