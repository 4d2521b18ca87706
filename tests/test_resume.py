"""Resume is exact or refused: a run killed with SIGKILL or stopped by Ctrl-C resumes to the uninterrupted
run's result (the same seed gives the same result), and a resume whose settings, data, teacher or saved state
changed is refused, leaving the interrupted run as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from distill.models import load_model
from tests.conftest import (DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, copy_of, dev_metrics, interrupted_in_epoch_2, kd_with,
                            nlp_train, run_main, snapshot, student_on, with_option, write)


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


def killed_and_resumed(args: list, tmp_path, epochs_before: int, too_late: str):
    """`args` run whole in-process, and as a CLI process killed 0.3 s after its first resume state (fewer than
    `epochs_before` epochs done, else `too_late`), then resumed: the two runs' folders, their dev metrics equal."""
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    cli(*args, "--output", whole)  # uninterrupted, in-process: also one thread
    kill_after(nlp_train(*args, "--output", resumed), lambda: (resumed / "resume.pt").exists(), 0.3)
    assert len(dev_metrics(resumed)) < epochs_before, too_late
    finish = nlp_train(*args, "--output", resumed, "--resume")
    assert finish.wait() == 0, finish.stderr.read().decode()
    assert dev_metrics(resumed) == dev_metrics(whole)
    return whole, resumed


def test_kd_killed_mid_epoch_resumes_to_the_same_result(tiny_classifier_teacher, tmp_path):
    args = ["kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--hidden-dim", "128", "--batch-size",
            "2", "--epochs", "3", "--patience", "3", "--quiet", "--train", TRAIN, "--dev", DEV,
            "--cache-dir", tmp_path / "cache"]
    whole, resumed = killed_and_resumed(args, tmp_path, 3, "killed too late to test resuming")
    assert (resumed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    assert not (resumed / "resume.pt").exists()


def test_teacher_killed_mid_epoch_resumes_to_the_same_result(tiny_encoder_dir, tmp_path):
    """Covers the teacher's two learning rates and warm-up schedule, restored with the optimizer."""
    # batches of 2 make an epoch last well past the kill, 0.3 s into epoch 2's training (a SIGKILL while a
    # new best epoch is saved: test_a_save_that_fails_part_way_leaves_the_model_already_there_whole)
    args = ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "3", "--patience",
            "3", "--batch-size", "2", "--encoder-lr", "1e-3", "--max-length", "32", "--quiet", "--train", TRAIN,
            "--dev", DEV]
    whole, resumed = killed_and_resumed(args, tmp_path, 2, "killed after epoch 2 had ended: not mid-epoch")
    trained = [load_model(d).state_dict() for d in (whole, resumed)]
    assert all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])


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


def test_same_seed_same_metrics(tiny_classifier_teacher, tmp_path):
    for run in ("a", "b"):
        cli("kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--epochs", "2", "--train", TRAIN,
            "--dev", DEV, "--output", tmp_path / run, "--cache-dir", tmp_path / "cache")
    assert dev_metrics(tmp_path / "a") == dev_metrics(tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_resume_of_a_run_whose_state_file_was_deleted_says_so(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    (out / "resume.pt").unlink()
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "holds no resume state (resume.pt is missing) and no finished run" in err, err


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


@pytest.mark.parametrize("content", [b"hi\n", b"\x80\x02.", b"\x80\x02X\x02\x00\x00\x00\xff\xfe.",
                                     b"\x80\x02J\x01\x00."], ids=["text", "empty-stack", "bad-utf-8", "cut-number"])
def test_a_resume_state_that_is_no_checkpoint_is_one_line(content, tmp_path, capsys, monkeypatch):
    """A text or damaged file at resume.pt was torch's unpickler's KeyError, IndexError, UnicodeDecodeError or
    struct.error traceback (after its warning of the pickle protocol it read)."""
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    (out / "resume.pt").write_bytes(content)
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "resume.pt: corrupt or truncated checkpoint" in err, err
    assert err.strip().endswith("start over with --overwrite"), err  # what to do, as a changed run is told


def test_a_resume_clears_what_a_killed_save_left_half_written(tmp_path, capsys, monkeypatch):
    """A SIGKILL while the resume state or a best model was saved leaves its temporary file or staging folder;
    the resumed run's finished folder kept them (a teacher's resume state: hundreds of megabytes, never read)."""
    out = tmp_path / "run"
    args = interrupted_student(out, TRAIN, capsys, monkeypatch)
    (out / ".resume.pt.k1x2.tmp").write_bytes((out / "resume.pt").read_bytes()[:1000])
    (out / ".saving-k3y4").mkdir()
    (out / ".saving-k3y4" / "model.safetensors").write_bytes(b"\0" * 100)
    (out / ".gitattributes").write_text("*.safetensors filter=lfs\n")  # the user's: kept
    cli(*args, "--resume")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".gitattributes"]


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


def interrupted_before_its_summary(out: Path, capsys, monkeypatch) -> list:
    """A student run of 2 epochs stopped by Ctrl-C as it writes its summary: its resume state is of its last epoch,
    so a resume trains nothing and ends on the model in the folder; returns its argv."""
    import distill.trainers

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(distill.trainers, "_finish_files", interrupt)
    args = [*student_on(TRAIN, out), "--epochs", "2", "--patience", "2"]
    assert run_main(capsys, *args)[0] == 130 and (out / "resume.pt").exists()
    monkeypatch.undo()
    return args


def test_a_resume_that_ends_on_the_folders_model_refuses_one_its_state_did_not_save(tmp_path, capsys, monkeypatch):
    """A resume state copied in from another run of the same settings, or a model of the same student put in the
    folder: every file whole, so the resume ended on a model that was never its best epoch's, whose record the
    summary kept (a model of 0.55 dev accuracy reported as 0.75). The state records the model it saved."""
    out = tmp_path / "run"
    args = interrupted_before_its_summary(out, capsys, monkeypatch)
    cli(*with_option(args, "--output", tmp_path / "other"), "--seed", "7")
    for name in json.loads((tmp_path / "other" / "distill.json").read_text())["sha256"]:
        (out / name).write_bytes((tmp_path / "other" / name).read_bytes())
    (out / "distill.json").write_bytes((tmp_path / "other" / "distill.json").read_bytes())
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "the model there is not the one the resume state saved for its best epoch" in err, err
    assert (out / "resume.pt").exists() and not (out / "train_summary.json").exists()


def test_a_resume_of_a_run_stopped_between_its_best_model_and_its_state_is_exact(tmp_path, capsys, monkeypatch):
    """Stopped after epoch 2's model was saved, before its resume state (a SIGKILL there): the folder's model is
    newer than the state, and the resume, which trains epoch 2 again and saves it again, ends as the whole run."""
    import distill.training
    cli(*student_on(TRAIN, tmp_path / "whole"), "--epochs", "3", "--patience", "3")
    first, second = (record["accuracy"] for record in dev_metrics(tmp_path / "whole")[:2])
    assert second > first, "epoch 2 saves no model: the stop would not fall between a model and its state"
    real_save, saves = distill.training.save_sealed, []

    def save_once(*args, **kwargs):
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt
        real_save(*args, **kwargs)

    monkeypatch.setattr(distill.training, "save_sealed", save_once)
    args = [*student_on(TRAIN, tmp_path / "run"), "--epochs", "3", "--patience", "3"]
    assert run_main(capsys, *args)[0] == 130
    monkeypatch.undo()
    cli(*args, "--resume")
    assert dev_metrics(tmp_path / "run") == dev_metrics(tmp_path / "whole")
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == \
        (tmp_path / "whole" / "model.safetensors").read_bytes()


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
    ("min-confidence", "(--min-confidence)"),  # as the user gave it, not the field's name
    ("logits", "(--logits)"),
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
