"""What distill writes, appends to or continues is its own: never through a link, never into what is not
a file (or a folder where one is made), under $DISTILL_CACHE as under --cache-dir; --resume with nothing
to continue is refused; the numbers a run reports add up (a resumed pseudo-label run, a model's size,
the metric that chose a teacher's best epoch)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

from distill import io
from distill.errors import DistillError
from distill.metrics import size_text
from distill.models.card import MODEL_CARD, read_model_card
from distill.pseudo_label import pseudo_label, run_signature, signature_path
from tests.conftest import SAMPLES, SMALL_LSTM, cli, interrupt_evaluation, run_main_printed

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
MOVIES = SAMPLES / "unlabeled_movies.txt"  # 300 lines


def tree(folder: Path) -> dict:
    """Every entry under `folder`: a link as its target, a file as its bytes, a folder as such."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        entries[str(path)] = (f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes()
                              if path.is_file() else "dir" if path.is_dir() else "special")
    return entries


def assert_refused(capsys, argv: list, root: Path, *fragments: str) -> str:
    """The command fails with one line naming what is wrong, and changes nothing under `root`."""
    before = tree(root)
    status, _, err = run_main_printed(capsys, *argv)
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert all(fragment in err for fragment in fragments), err
    assert tree(root) == before, "the refused command wrote something"
    return err


# --- one rule for every file distill writes, appends to or makes -------------------------------------------------

FILE_WRITERS = {
    "write_text": lambda path: io.write_text(path, "new\n"),
    "write_json": lambda path: io.write_json(path, {"new": 1}),
    "save_tensors": lambda path: io.save_tensors(path, {"x": torch.zeros(2)}),
    "save_checkpoint": lambda path: io.save_checkpoint(path, {"x": torch.zeros(2)}),
    "save_sealed": lambda path: io.save_sealed(path, {"x": torch.zeros(2)}),
    "appending": lambda path: io.appending(path).__enter__().write("new\n"),
}


def atomic_folder(path: Path) -> None:
    with io.atomic_directory(path) as tmp:
        (tmp / "file").write_text("new")


FOLDER_WRITERS = {"make_folder": io.make_folder, "atomic_directory": atomic_folder}


def link_to_file(tmp: Path, name: str) -> tuple[Path, str]:
    (tmp / "other.txt").write_text("someone else's\n")
    (tmp / name).symlink_to(tmp / "other.txt")
    return tmp / name, "is a symbolic link (to"


def dangling_link(tmp: Path, name: str) -> tuple[Path, str]:
    (tmp / name).symlink_to(tmp / "nowhere" / name)
    return tmp / name, "which does not exist"


def link_to_folder(tmp: Path, name: str) -> tuple[Path, str]:
    (tmp / "elsewhere").mkdir()
    (tmp / name).symlink_to(tmp / "elsewhere")
    return tmp / name, "is a symbolic link (to"


def a_pipe(tmp: Path, name: str) -> tuple[Path, str]:
    os.mkfifo(tmp / name)
    return tmp / name, "is not a regular file"


def a_folder(tmp: Path, name: str) -> tuple[Path, str]:
    (tmp / name).mkdir()
    return tmp / name, "is a folder, where distill writes a file"


def a_file(tmp: Path, name: str) -> tuple[Path, str]:
    (tmp / name).write_text("mine")
    return tmp / name, "is a file, where distill writes a folder"


@pytest.mark.parametrize("target", [link_to_file, dangling_link, a_pipe, a_folder])
@pytest.mark.parametrize("writer", FILE_WRITERS)
def test_every_file_writer_refuses_a_link_or_a_non_file(writer, target, tmp_path):
    path, fragment = target(tmp_path, "out.bin")
    before = tree(tmp_path)
    with pytest.raises(DistillError) as error:
        FILE_WRITERS[writer](path)
    assert str(error.value).startswith(f"{path}: ") and fragment in str(error.value)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("target", [link_to_folder, dangling_link, a_file])
@pytest.mark.parametrize("writer", FOLDER_WRITERS)
def test_every_folder_writer_refuses_a_link_or_a_non_folder(writer, target, tmp_path):
    path, fragment = target(tmp_path, "made")
    before = tree(tmp_path)
    with pytest.raises(DistillError) as error:
        FOLDER_WRITERS[writer](path)
    assert str(error.value).startswith(f"{path}: ") and fragment in str(error.value)
    assert tree(tmp_path) == before


def test_atomic_directory_removes_the_folders_a_killed_writer_left_never_a_live_ones(tmp_path):
    """A process killed while it wrote a folder (a search's best/, an unpacked encoder) left its hidden .NAME.*.tmp
    copy beside it, which no later write removed: a whole model's worth each time. The next write of that folder
    removes such a copy (unlocked, unchanged for long), never one a writer holds (writing now, or stopped), nor one
    just made, nor another folder's."""
    import fcntl
    made = tmp_path / "best"
    stale, old, held, fresh, other = (tmp_path / name for name in (".best.stale.tmp", ".best.gone.old",
                                                                    ".best.held.tmp", ".best.fresh.tmp",
                                                                    ".other.stale.tmp"))
    for folder in (stale, old, held, fresh, other):
        folder.mkdir()
        (folder / "model.bin").write_bytes(b"weights")
    for folder in (stale, old, held, other):
        os.utime(folder, (0, os.stat(folder).st_mtime - io.STALE_AFTER_S - 1))
    writer = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(writer, fcntl.LOCK_EX)  # a writer stopped (Ctrl-Z) before it moved its folder in
        atomic_folder(made)
        assert not stale.exists() and not old.exists() and held.exists() and fresh.exists() and other.exists()
    finally:
        os.close(writer)
    assert (made / "file").read_text() == "new"
    with io.atomic_directory(made) as tmp:  # its writer gone, held's is removed; atomic_directory holds its own
        assert not held.exists()
        (tmp / "file").write_text("newer")
        os.utime(tmp, (0, 0))
        assert io.remove_stale_temporaries(tmp_path, ".best.*.tmp", folders=True) == 0 and tmp.exists()
    assert (made / "file").read_text() == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".best.fresh.tmp", ".other.stale.tmp", "best"]


# --- each command's own files: parts, signatures, locks, logs, resume state, the cache ----------------------------

def interrupted_pseudo_label(teacher: str, tmp: Path, lines: int = 130, **settings) -> tuple[Path, list[str]]:
    """OUTPUT as a run killed after `lines` input lines leaves it: OUTPUT.part and OUTPUT.part.json.
    Returns OUTPUT and the records an uninterrupted run writes."""
    full = tmp / "full.jsonl"
    pseudo_label(teacher, str(MOVIES), str(full), chunk_size=64, progress=False, **settings)
    rows = full.read_text().splitlines(keepends=True)
    full.unlink()
    output = tmp / "pseudo.jsonl"
    (tmp / "pseudo.jsonl.part").write_text("".join(row for row in rows if json.loads(row)["line"] <= lines))
    signature = run_signature(teacher, str(MOVIES), min_confidence=settings.get("min_confidence", 0.0),
                              with_logits=False, batch_size=64, chunk_size=64)
    signature_path(output).write_text(json.dumps(signature))
    return output, rows


def pseudo_label_args(teacher: str, output: Path, *extra) -> list:
    return ["pseudo-label", "--teacher", teacher, "--input", MOVIES, "--output", output, "--chunk-size", "64",
            "--quiet", *extra]


@pytest.mark.parametrize("name", ["pseudo.jsonl.part", "pseudo.jsonl.part.json", ".pseudo.jsonl.lock"])
def test_pseudo_label_refuses_its_own_files_as_links(name, tiny_classifier_teacher, tmp_path, capsys):
    """A part replaced by a link to another file was written through on --resume: the other file grew, and
    the output ended as a link to it. The part, its signature and the lock are each refused as a link."""
    output, _ = interrupted_pseudo_label(tiny_classifier_teacher, tmp_path)
    moved = tmp_path / "moved"
    if (tmp_path / name).exists():
        os.replace(tmp_path / name, moved)
    else:  # the lock, made by the run itself
        moved.write_text('{"line": 1}\n')
    (tmp_path / name).symlink_to(moved)
    assert_refused(capsys, pseudo_label_args(tiny_classifier_teacher, output, "--resume"), tmp_path,
                   f"{tmp_path / name}: is a symbolic link (to {moved})")


def interrupted_student(tmp: Path, capsys, monkeypatch) -> list:
    """A student run stopped by Ctrl-C in epoch 2's evaluation: its folder holds resume state."""
    import distill.training
    real = distill.training.evaluate
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "3", "--output", tmp / "student"]
    interrupt_evaluation(monkeypatch)
    assert run_main_printed(capsys, *args)[0] == 130
    monkeypatch.setattr(distill.training, "evaluate", real)
    assert (tmp / "student" / "resume.pt").exists()
    return args


@pytest.mark.parametrize("name", ["metrics.jsonl", "resume.pt", "model.safetensors", "run_config.yaml"])
def test_a_resumed_run_refuses_its_files_as_links(name, tmp_path, capsys, monkeypatch):
    """A resumed run appends to its log and replaces its state and model: a link among them is refused
    before anything is written, naming it (the log's target grew before)."""
    args = interrupted_student(tmp_path, capsys, monkeypatch)
    real = tmp_path / "student" / name
    moved = tmp_path / f"moved-{name}"
    os.replace(real, moved)
    real.symlink_to(moved)
    assert_refused(capsys, [*args, "--resume"], tmp_path, f"{real}: is a symbolic link (to {moved})")


def test_a_resumed_run_refuses_a_folder_where_it_writes_a_file(tmp_path, capsys, monkeypatch):
    args = interrupted_student(tmp_path, capsys, monkeypatch)
    log = tmp_path / "student" / "metrics.jsonl"
    log.unlink()
    log.mkdir()
    assert_refused(capsys, [*args, "--resume"], tmp_path, f"{log}: is a folder, where distill writes a file")


def kd_args(teacher: str, output: Path, *extra) -> list:
    return ["kd", "--teacher", teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", output, *extra]


def test_a_cache_folder_that_is_a_link_is_refused(tiny_classifier_teacher, tmp_path, capsys):
    (tmp_path / "real-cache").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "real-cache")
    assert_refused(capsys, kd_args(tiny_classifier_teacher, tmp_path / "kd", "--cache-dir", tmp_path / "cache"),
                   tmp_path, f"{tmp_path / 'cache'}: is a symbolic link")


# --- a folder where a file is (the default cache as --cache-dir) ------------------------------------------------

@pytest.mark.parametrize("command", ["kd", "pseudo-label"])
@pytest.mark.parametrize("how", ["env", "env-under-a-file", "option-under-a-file"])
def test_a_cache_under_a_file_is_refused_as_such(command, how, tiny_classifier_teacher, tmp_path, capsys,
                                                 monkeypatch):
    """$DISTILL_CACHE naming a regular file failed with '.../teacher-logits/<sha>: Not a directory' at the
    first shard; a --cache-dir below a file likewise."""
    plain = tmp_path / "plain.txt"
    plain.write_text("a file")
    extra = []
    if how == "env":
        monkeypatch.setenv("DISTILL_CACHE", str(plain))
    elif how == "env-under-a-file":
        monkeypatch.setenv("DISTILL_CACHE", str(plain / "cache"))
    else:
        extra = ["--cache-dir", plain / "cache"]
    argv = kd_args(tiny_classifier_teacher, tmp_path / "kd", *extra) if command == "kd" else \
        pseudo_label_args(tiny_classifier_teacher, tmp_path / "p.jsonl", *extra)
    err = assert_refused(capsys, argv, tmp_path, f"{plain} is a file, not a folder")
    assert how.startswith("option") or "the default logit cache, $DISTILL_CACHE/teacher-logits" in err


# --- --resume with nothing to resume ----------------------------------------------------------------------------

def resume_args(command: str, output: Path, teacher: str, encoder: str) -> list:
    if command == "teacher":
        return ["teacher", "--task", "classification", "--encoder", encoder, "--train", TRAIN, "--dev", DEV, "--quiet",
                "--output", output]
    if command == "student":
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", output]
    if command == "kd":
        return kd_args(teacher, output)
    return pseudo_label_args(teacher, output)


@pytest.mark.parametrize("command", ["teacher", "student", "kd", "pseudo-label"])
def test_resume_of_an_output_that_does_not_exist_is_refused(command, tiny_classifier_teacher, tiny_encoder_dir,
                                                            tmp_path, capsys):
    """A mistyped --output with --resume trained (labelled) from scratch with exit 0 and no word."""
    output = tmp_path / ("typo.jsonl" if command == "pseudo-label" else "typo")
    argv = [*resume_args(command, output, tiny_classifier_teacher, tiny_encoder_dir), "--resume"]
    assert_refused(capsys, argv, tmp_path, f"{output}: nothing to resume", "check the path",
                   "without --resume")


def test_resume_of_an_empty_folder_or_a_finished_output_is_refused(tiny_classifier_teacher, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert_refused(capsys, ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "empty",
                            "--resume"], tmp_path, "empty: nothing to resume (the folder is empty")
    output = tmp_path / "done.jsonl"
    cli(*pseudo_label_args(tiny_classifier_teacher, output))
    assert_refused(capsys, [*pseudo_label_args(tiny_classifier_teacher, output), "--resume"], tmp_path,
                   f"{output}: nothing to resume (this run finished")


# --- numbers that add up ------------------------------------------------------------------------------------------

def test_a_resumed_pseudo_label_run_counts_the_whole_output(tiny_classifier_teacher, tmp_path, capsys):
    """After --resume the report counted only this run's lines ('170 of 170 examples written' for a
    300-line input): it counts the whole output, and says how many the interrupted run had labelled."""
    output, rows = interrupted_pseudo_label(tiny_classifier_teacher, tmp_path)
    status, out, err = run_main_printed(capsys, *pseudo_label_args(tiny_classifier_teacher, output, "--resume"))
    assert status == 0, err
    # (130 records: a kill cut the third chunk short, which is labelled again from its start, line 129)
    assert "300 of 300 examples written" in out and "128 of them labelled before the resume" in out, out
    assert output.read_text() == "".join(rows)


def test_resumed_counts_add_up_with_a_confidence_filter(tiny_classifier_teacher, tmp_path):
    probe = tmp_path / "probe.jsonl"
    pseudo_label(tiny_classifier_teacher, str(MOVIES), str(probe), chunk_size=64, progress=False)
    confidences = sorted(json.loads(row)["confidence"] for row in probe.read_text().splitlines())
    probe.unlink()
    threshold = confidences[len(confidences) // 2]
    output, rows = interrupted_pseudo_label(tiny_classifier_teacher, tmp_path, min_confidence=threshold)
    stats = pseudo_label(tiny_classifier_teacher, str(MOVIES), str(output), chunk_size=64, resume=True,
                         min_confidence=threshold, progress=False)
    done = stats["resumed_after_line"]
    assert stats["read"] == 300 and stats["written"] == len(rows) == len(output.read_text().splitlines())
    assert stats["written"] + stats["skipped_low_confidence"] == stats["read"]
    assert stats["resumed"] == done and 0 < done <= 130


def model_bytes(directory: Path) -> int:
    card = read_model_card(directory)
    return sum((directory / name).stat().st_size for name in [MODEL_CARD, *card["sha256"]])


def test_a_models_size_is_its_files_alone(tmp_path, capsys):
    """The size counted resume.pt, deleted at the run's end (53.5 MB reported for a 13.8 MB model)."""
    out = tmp_path / "student"
    status, printed, err = run_main_printed(capsys, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "1",
                                    "--output", out)
    assert status == 0, err
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["size_bytes"] == model_bytes(out)
    assert f"{size_text(model_bytes(out))};" in printed


def test_a_teachers_summary_records_what_chose_its_best_epoch_and_its_size(tiny_classifier_teacher):
    summary = json.loads((Path(tiny_classifier_teacher) / "train_summary.json").read_text())
    assert summary["training"]["select_metric"] == "accuracy"
    assert summary["size_bytes"] == model_bytes(Path(tiny_classifier_teacher))  # encoder/ included


def test_a_multitask_teachers_summary_records_each_heads_metric_and_the_selection(tiny_encoder_dir, tmp_path):
    out = tmp_path / "teacher"
    cli("teacher", "--encoder", tiny_encoder_dir, "--epochs", "1", "--max-length", "32", "--quiet", "--output", out,
        "--task-spec", f"sentiment:classification:{TRAIN}:{DEV}",
        "--task-spec", f"ner:tagging:{SAMPLES / 'ner_train.conll'}:{SAMPLES / 'ner_dev.conll'}",
        "--select-task", "ner")
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["training"]["sentiment"]["select_metric"] == "accuracy"
    assert summary["training"]["ner"]["select_metric"] == "f1"
    assert summary["sampling"]["select"] == "ner"
    assert summary["size_bytes"] == model_bytes(out)


# --- a file written in place is no other name's ---------------------------------------------------------------

def test_a_file_appended_to_or_continued_with_another_hard_link_is_refused(tiny_classifier_teacher, tmp_path,
                                                                             capsys):
    """A hard-linked OUT.part was continued on --resume: the file under the other name grew from 130 records
    to 300, as through a symbolic link. A file replaced by a rename may have other links: they keep the old."""
    output, _ = interrupted_pseudo_label(tiny_classifier_teacher, tmp_path)
    part = tmp_path / "pseudo.jsonl.part"
    os.link(part, tmp_path / "other.txt")
    assert_refused(capsys, pseudo_label_args(tiny_classifier_teacher, output, "--resume"), tmp_path,
                   f"{part}: has 1 other hard link (the same file under another name)", "cp ")
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    os.link(log, tmp_path / "log-copy.jsonl")
    with pytest.raises(DistillError, match="has 1 other hard link"):
        FILE_WRITERS["appending"](log)
    io.write_text(log, "new\n")  # replaced, not written through: the other name keeps its content
    assert (tmp_path / "log-copy.jsonl").read_text() == "{}\n" and log.read_text() == "new\n"


def test_a_refused_pseudo_label_run_leaves_no_part_and_no_signature(tiny_classifier_teacher, tmp_path, monkeypatch):
    """A run refused while labelling its first chunk (then: a line of U+200B alone, refused by the teacher)
    left an empty OUT.part and OUT.part.json, a resumable run of nothing."""
    import distill.pseudo_label

    def refusing(*args):
        def label(examples):
            raise DistillError("refused by the teacher")
        return label
    monkeypatch.setattr(distill.pseudo_label, "chunk_labeller", refusing)
    with pytest.raises(DistillError, match="refused by the teacher"):
        pseudo_label(tiny_classifier_teacher, str(MOVIES), str(tmp_path / "out.jsonl"), use_cache=False,
                     progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == []


# --- the cache folder named as what it is ---------------------------------------------------------------------

def test_a_blank_distill_cache_counts_as_unset(tmp_path, monkeypatch):
    """DISTILL_CACHE=' ' made a folder named ' ' in the working directory; an empty value was unset already."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for blank in ("", " ", "\t "):
        monkeypatch.setenv("DISTILL_CACHE", blank)
        assert io.cache_root() == Path.home() / ".cache" / "distill"


@pytest.mark.parametrize("make, kind", [(os.mkfifo, "a named pipe (FIFO)"),
                                        (lambda path: path.symlink_to(path.parent / "nowhere"),
                                         "a symbolic link (to")])
def test_a_cache_under_a_pipe_or_a_broken_link_says_what_is_there(make, kind, tmp_path, monkeypatch):
    """$DISTILL_CACHE as a FIFO or a dangling link was 'a file (or a broken link)'."""
    from distill.cache import check_cache_dir
    make(tmp_path / "cache")
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DistillError, match=re.escape(f": {tmp_path / 'cache'} is {kind}")):
        check_cache_dir(None)
    if make is os.mkfifo:
        with pytest.raises(DistillError, match=r"cache: is a named pipe \(FIFO\); the logit cache is a folder"):
            check_cache_dir(tmp_path / "cache")


@pytest.mark.parametrize("command", ["kd", "pseudo-label"])
def test_a_cache_folder_this_user_may_not_write_is_refused_before_the_teachers_pass(command, tiny_classifier_teacher,
                                                                                    tmp_path, capsys, monkeypatch):
    """A read-only --cache-dir failed at the first shard, after the teacher's pass, naming a shard's path. Judged
    by os.access, faked here: as root every folder is writable."""
    (tmp_path / "locked").mkdir()
    real_access = os.access
    monkeypatch.setattr("distill.cache.os.access", lambda path, mode: Path(path) != tmp_path / "locked"
                        and real_access(path, mode))
    extra = ["--cache-dir", tmp_path / "locked" / "cache"]
    argv = kd_args(tiny_classifier_teacher, tmp_path / "kd", *extra) if command == "kd" else \
        pseudo_label_args(tiny_classifier_teacher, tmp_path / "p.jsonl", *extra)
    assert_refused(capsys, argv, tmp_path, f"cache: {tmp_path / 'locked'} is not writable by this user, and the "
                   "logit cache writes there; give a cache folder you may write (--cache-dir")


@pytest.mark.parametrize("command", ["kd", "pseudo-label"])
def test_a_teachers_cache_folder_this_user_may_not_write_is_refused_before_the_teachers_pass(
        command, tiny_classifier_teacher, tmp_path, capsys, monkeypatch):
    """A shared cache that this user may write, whose folder of this teacher another user made (umask 022), was
    found only at the first shard, after the teacher's pass (kd's over the whole transfer set): the check looked
    at the cache folder alone. Judged by os.access, faked here: as root every folder is writable."""
    cache = tmp_path / "cache"
    cli(*pseudo_label_args(tiny_classifier_teacher, tmp_path / "first.jsonl", "--cache-dir", cache))
    [teachers] = cache.iterdir()
    real_access = os.access
    monkeypatch.setattr("distill.cache.os.access", lambda path, mode: Path(path) != teachers
                        and real_access(path, mode))
    argv = kd_args(tiny_classifier_teacher, tmp_path / "kd", "--cache-dir", cache) if command == "kd" else \
        pseudo_label_args(tiny_classifier_teacher, tmp_path / "p.jsonl", "--cache-dir", cache)
    assert_refused(capsys, argv, tmp_path, f"cache: {teachers} is not writable by this user, and the logit cache "
                   "writes there; give a cache folder you may write (--cache-dir")


@pytest.mark.parametrize("inner", ["config.json", "sub"])
def test_a_resumed_run_refuses_a_link_inside_its_encoder_folder(inner, tmp_path):
    """A resumed teacher checked its own files but not encoder/: a finished model kept encoder/config.json as a
    link to a file outside it (not rewritten, as the best epoch stayed)."""
    from distill.outputs import model_output
    run = tmp_path / "teacher"
    (run / "encoder").mkdir(parents=True)
    (run / "resume.pt").write_bytes(b"state")
    (run / "metrics.jsonl").write_text("{}\n")
    outside = tmp_path / "outside"
    if inner == "sub":
        outside.mkdir()
    else:
        outside.write_text("{}")
    (run / "encoder" / inner).symlink_to(outside)
    with pytest.raises(DistillError, match=re.escape(f"{run / 'encoder' / inner}: is a symbolic link (to {outside})")):
        with model_output(run, resume=True):
            pass
    (run / "encoder" / inner).unlink()
    with model_output(run, resume=True):  # a real encoder folder resumes
        pass


def test_a_logging_dir_is_under_the_output_rule(tiny_classifier_teacher, tmp_path, capsys):
    """--logging-dir (TensorBoard's events) never goes into the run's teacher (an input) nor into another model's
    folder, as --output and --cache-dir do not: refused before anything is written."""
    pytest.importorskip("tensorboard", reason="--report-to tensorboard needs the tracking extra")
    import shutil
    teacher = Path(shutil.copytree(tiny_classifier_teacher, tmp_path / "teacher"))
    other = Path(shutil.copytree(tiny_classifier_teacher, tmp_path / "other"))
    run, notes = tmp_path / "run", tmp_path / "notes.txt"
    notes.write_text("mine")
    for logs, message in ((teacher, f"{teacher}: lies in {teacher}, an input of this command"),
                          (teacher / "runs", f"{teacher / 'runs'}: lies in {teacher}, an input of this command"),
                          (other, f"{other}: lies in the model directory {other} (a file there changes the model)"),
                          (other / "runs", f"{other / 'runs'}: lies in the model directory {other}"),
                          (run, f"{run}: is the output {run} itself; choose a folder inside it"),
                          # --overwrite would take it for the user's folder, and refuse to replace the run
                          (run / "tb", f"{run / 'tb'}: lies in the output {run}, where a run's logs go in "
                                       f"{run / 'runs'}"),
                          # under a file: 'Not a directory', once the run had begun
                          (notes / "logs", f"{notes / 'logs'}: {notes} is a file, not a folder")):
        assert_refused(capsys, kd_args(teacher, run, "--report-to", "tensorboard", "--logging-dir", logs), tmp_path,
                       message)
    from distill.callbacks import TensorBoardCallback
    from distill.distiller import Distiller
    from distill.trainers import TrainSettings
    with pytest.raises(DistillError, match="lies in the model directory"):  # the Python API's callback, in memory
        Distiller(str(teacher), "lstm", settings=TrainSettings(epochs=1)).fit(
            str(TRAIN), str(DEV), callbacks=[TensorBoardCallback(other)])
    cli(*kd_args(teacher, run, "--epochs", "1", "--report-to", "tensorboard", "--cache-dir", tmp_path / "cache"))
    assert any((run / "runs").iterdir())  # the default, inside the run's own output
    cli(*kd_args(teacher, tmp_path / "beside", "--epochs", "1", "--report-to", "tensorboard", "--logging-dir",
                 tmp_path, "--cache-dir", tmp_path / "cache"))  # a folder that holds the inputs: nothing is removed
