"""--overwrite replaces a model, and only a model (beside its evaluate results and a repository's hidden files);
the old model comes back whole when the new run fails, is interrupted or is killed."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import (DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, copy_of, interrupt_evaluation, run_main, snapshot,
                            write)


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


def test_overwrite_replaces_a_model_beside_its_evaluate_results_only(tiny_classifier_teacher, tmp_path, capsys):
    """The model's evaluate results, under any name evaluate was given, are no reason to refuse --overwrite (under
    evaluate's default name also once the folder was renamed); anything else may be the user's work and is
    refused, pseudo-label output too (it may have been corrected by hand, or be a part to resume), and a JSON that
    merely looks like a result."""
    model = tmp_path / "student"
    args = ["student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", model]
    cli(*args)
    run_files = sorted(p.name for p in model.iterdir())
    cli("evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet")
    cli("evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", model / "dev_metrics.json", "--quiet")
    cli("evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", model / "dev_metrics.txt", "--quiet")  # any name
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
        assert status == 2 and f"holds {name}, which is none of the model's files" in err, err
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


def test_overwrite_replaces_a_model_and_puts_it_back_if_the_run_fails(tiny_student, tmp_path, capsys):
    student = copy_of(tiny_student, tmp_path, "student")
    before = snapshot(student)
    bad_dev = write(tmp_path / "dev.csv", "text,label\nfine,neutral\n")  # a label the training data lacks
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev, "--output", student,
                           "--overwrite")
    assert status == 2 and "label 'neutral' is not one of the model's labels" in err
    assert snapshot(student) == before, "a failed --overwrite run lost the model it was replacing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.csv", "student"], "backup left behind"
    cli("student", "--model", "cnn", "--quiet", "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", student,
        "--overwrite")
    assert json.loads((student / "distill.json").read_text())["model"] == "cnn"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.csv", "student"]


@pytest.mark.parametrize("given", ["student", "student/../student"])
def test_an_interrupted_overwrite_run_puts_the_model_back_by_any_path_to_it(given, tiny_student, tmp_path, capsys,
                                                                            monkeypatch):
    """An output path through itself (student/../student) named nothing once the model was moved aside: putting it
    back failed ('.student.replaced: No such file or directory', the run's own error lost) and the model was left
    hidden in .student.replaced, which the next run given that path did not put back either."""
    student = copy_of(tiny_student, tmp_path, "student")
    before = snapshot(student)
    interrupt_evaluation(monkeypatch, call=1)
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / given, "--overwrite")
    assert status == 130, err
    assert snapshot(student) == before, "an interrupted --overwrite run lost the model it was replacing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["student"], "backup left behind"


@pytest.mark.parametrize("given", [".", "absolute"])
def test_overwrite_of_the_folder_that_holds_the_working_folder_is_refused(given, tiny_student, tmp_path, capsys,
                                                                          monkeypatch):
    """--overwrite moves the old model aside while the run writes the new one, and the working folder went with it:
    `--output .` failed as 'cannot write (Device or resource busy)', and a relative path that still named the
    folder once moved would have the new model written into the copy removed when the run ends."""
    student = copy_of(tiny_student, tmp_path, "student")
    before = snapshot(student)
    monkeypatch.chdir(student)
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV,
                           "--output", "." if given == "." else student, "--overwrite")
    assert status == 2 and "holds the working folder, which --overwrite would move aside" in err, err
    assert len(err.strip().splitlines()) == 1 and snapshot(student) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["student"]
