"""A model knows the data it learnt from: scoring it on that data (any copy of it) is flagged, by an export too,
whatever became of the source folder since."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from tests.conftest import DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, write


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
        result = evaluate_model(str(tmp_path / "slim"), str(data), output=str(tmp_path / f"e-{role}.json"),
                                progress=False)
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


@pytest.mark.parametrize("edit, fragment", [
    (lambda summary: [summary], "is damaged (it is no JSON object"),
    (lambda summary: {**summary, "inputs": [1]}, "is damaged (its field 'inputs' is [1]"),
    (lambda summary: {**summary, "best": {"dev": [0.5]}}, "is damaged (its field 'best.dev' is [0.5]"),
    (lambda summary: {**summary, "teachers": [{"x": 1}]}, "its field 'teachers' holds no teacher and weight"),
    (lambda summary: {**summary, "parameters": "many"}, "is damaged (its field 'parameters' is \"many\""),
], ids=["list", "inputs", "best-dev", "teachers", "parameters"])
@pytest.mark.parametrize("command", ["export", "evaluate"])
def test_a_damaged_run_summary_is_refused_in_one_line(edit, fragment, command, tiny_student, tmp_path, capsys):
    """train_summary.json, which the card does not cover, edited into another shape: export's README card read it
    as it was (an AttributeError, TypeError, KeyError or ValueError traceback), and evaluate's check of the data
    the model learnt from said nothing of it. Both now refuse it, one line, nothing written."""
    from tests.conftest import run_main
    model = tmp_path / "model"
    shutil.copytree(tiny_student, model)
    summary = model / "train_summary.json"
    summary.write_text(json.dumps(edit(json.loads(summary.read_text()))))
    args = {"export": ["export", model, "--output", tmp_path / "out"],
            "evaluate": ["evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "out"]}[command]
    status, err = run_main(capsys, *args)
    assert status == 2 and err.startswith(f"error: {summary}: ") and fragment in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
