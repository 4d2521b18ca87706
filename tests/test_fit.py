"""Fitting the user's data: tag schemes and their metrics, the selection metric, and small frictions
(global options after the command, progress in log files, another format's file given to a reader)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from distill.data import read_classification, read_tagging
from distill.errors import DataError
from distill.labels import LabelHierarchy, build_hierarchy, detect_tag_scheme, scheme_of_labels
from distill.metrics import METRICS, headline, select_metric, tagging_metrics
from distill.models import load_model
from tests.conftest import DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, interrupted_in_epoch_2, run_main, write

NER_TRAIN, NER_DEV = SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll"
SMALL_TAGGER = ["--model", "lstm-tagger", "--embedding-dim", "16", "--hidden-dim", "16", "--char-embedding-dim", "8",
                "--quiet"]


# --- tag schemes --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sequences, scheme", [
    ([["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "B-LOC"]], "IOB2"),
    ([["I-PER", "I-PER", "O", "I-LOC"], ["I-LOC", "B-LOC"]], "IOB1"),  # CoNLL-2003's original files
    ([["B-PER", "E-PER", "O", "S-LOC"]], "IOBES"),
    ([["B-PER", "L-PER", "O", "U-LOC"]], "BILOU"),
    ([["b-per", "i-per", "o", "b-loc"]], "IOB2"),
    ([["s-per", "O", "b-loc", "e-loc"]], "IOBES"),
    ([["NNP", "VBZ", "IN", "NN", "."]], "plain"),  # POS: 'IN' is not an inside tag, 'NN' not type N
])
def test_scheme_detection(sequences, scheme):
    assert detect_tag_scheme(sequences) == scheme
    hierarchy = build_hierarchy("tagging", sequences, None, "train")
    assert hierarchy.scheme == scheme
    assert LabelHierarchy.from_dict(hierarchy.to_dict()).scheme == scheme


def test_the_outside_tag_comes_first_in_either_case():
    """Tag 0 is what a word the model reads no sub-token of gets (zero logits): a lower-case set put `o`
    after `b-loc`, and such a word became an entity."""
    assert build_hierarchy("tagging", [["b-loc", "o", "i-per"]], None, "train").labels[0] == "o"
    assert build_hierarchy("tagging", [["B-LOC", "O", "I-PER"]], None, "train").labels[0] == "O"
    assert build_hierarchy("tagging", [["NN", "DT"]], None, "train").labels == ["DT", "NN"]


def test_models_saved_without_a_scheme_get_it_from_their_labels():
    assert scheme_of_labels(["O", "B-PER", "I-PER", "B-LOC"]) == "IOB2"
    assert scheme_of_labels(["O", "I-PER", "I-LOC", "B-LOC"]) == "IOB1"
    assert scheme_of_labels(["O", "b-per", "e-per", "s-per"]) == "IOBES"
    assert scheme_of_labels(["NN", "IN", "DT"]) == "plain"
    old = {"labels": ["NN", "IN", "DT"], "separator": None, "depth": 1, "counts": {}}
    assert LabelHierarchy.from_dict(old).tag_scheme == "plain"


def test_plain_tags_get_token_scores_and_no_entity_scores():
    gold = [["NNP", "VBZ", "IN", "NN"], ["DT", "NN"]]
    pred = [["NNP", "VBZ", "IN", "NNS"], ["DT", "NN"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # seqeval's "seems not to be NE tag" would fail here
        scores = tagging_metrics(gold, pred, "plain")
    assert set(METRICS["plain"]) <= set(scores) and "f1" not in scores and "precision" not in scores
    assert scores["token_accuracy"] == pytest.approx(5 / 6) == scores["micro_f1"]
    assert scores["per_tag_f1"]["NN"] == pytest.approx(2 / 3) and scores["per_tag_f1"]["IN"] == 1.0
    assert scores["macro_f1"] == pytest.approx(sum(scores["per_tag_f1"].values()) / 6)  # NNS too
    assert tagging_metrics(gold, pred) == scores  # the scheme the gold tags show
    assert headline("tagging", scores) == scores["token_accuracy"]


def test_entity_schemes_score_alike_in_any_case_and_spelling():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["O", "B-ORG"]]
    iobes = ([["B-PER", "E-PER", "O", "S-LOC"], ["O", "S-ORG"]], [["B-PER", "E-PER", "O", "O"], ["O", "S-ORG"]])
    bilou = [[[t.replace("E-", "L-").replace("S-", "U-") for t in s] for s in side] for side in iobes]
    lower = [[[t.lower() for t in s] for s in side] for side in (gold, pred)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = [tagging_metrics(gold, pred, "IOB2"), tagging_metrics(*lower, "IOB2"),
                  tagging_metrics(*iobes, "IOBES"), tagging_metrics(*bilou, "BILOU")]
    assert scores[0]["f1"] == pytest.approx(0.8) and set(scores[0]) == set(METRICS["entities"])
    assert all(s == scores[0] for s in scores)
    assert headline("tagging", scores[0]) == scores[0]["f1"]


def test_pos_tagger_reports_token_accuracy_and_per_tag_f1(tmp_path, recwarn):
    """CoNLL-2003's POS column (--tag-column 1) is plain tags: no entity F1, token accuracy picks the epoch."""
    out = tmp_path / "pos"
    cli("student", *SMALL_TAGGER, "--tag-column", "1", "--train", NER_TRAIN, "--dev", NER_DEV, "--output", out,
        "--epochs", "2")
    summary = json.loads((out / "train_summary.json").read_text())
    assert "f1" not in summary["best"]["dev"] and "token_accuracy" in summary["best"]["dev"]
    assert load_model(out).hierarchy.scheme == "plain"
    cli("evaluate", out, SAMPLES / "ner_test.conll", "--tag-column", "1", "--quiet")
    scores = json.loads((out / "eval_metrics.json").read_text())
    assert {"token_accuracy", "macro_f1", "micro_f1", "per_tag_f1"} <= set(scores) and "f1" not in scores
    assert {"NNP", "IN", "NN"} <= set(scores["per_tag_f1"])
    assert not [w for w in recwarn if "NE tag" in str(w.message)]


# --- the selection metric -----------------------------------------------------------------------------------------

def scripted_dev(monkeypatch, scores: list[dict]) -> None:
    """Make epoch N's dev metrics scores[N-1]: accuracy and macro F1 peak where the test says."""
    import distill.training
    epochs = iter(scores)
    monkeypatch.setattr(distill.training, "evaluate", lambda *a, **k: dict(next(epochs)))


ACCURACY_FIRST = [{"accuracy": a, "macro_f1": f} for a, f in [(0.70, 0.50), (0.80, 0.55), (0.75, 0.60),
                                                                (0.74, 0.65), (0.73, 0.62)]]


@pytest.mark.parametrize("metric, patience, best, epochs", [
    (None, 5, 2, 5), ("accuracy", 5, 2, 5), ("macro_f1", 5, 4, 5),
    ("accuracy", 1, 2, 3), ("macro_f1", 1, 4, 5),  # patience counts on the same metric
])
def test_select_metric_picks_the_epoch_and_stops_early(monkeypatch, metric, patience, best, epochs):
    from distill import Runtime, TrainSettings, train_student
    scripted_dev(monkeypatch, ACCURACY_FIRST)
    settings = TrainSettings(epochs=5, patience=patience, select_metric=metric)
    result = train_student("lstm", (["good film", "bad film"] * 4, ["pos", "neg"] * 4), (["good"], ["pos"]),
                           settings, env=Runtime(progress=False))
    assert result.best["epoch"] == best and len(result.history) == epochs


def test_select_metric_is_checked_against_the_task(tmp_path, capsys):
    assert select_metric(None, "classification", None) == "accuracy"
    assert select_metric(None, "tagging", "IOB2") == "f1"
    assert select_metric(None, "tagging", "plain") == "token_accuracy"
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output",
                           tmp_path / "a", "--select-metric", "f1")
    assert status == 2 and err.count("\n") == 1
    assert "select metric 'f1' is not scored for classification: choose one of accuracy, macro_precision" in err
    status, err = run_main(capsys, "student", *SMALL_TAGGER, "--train", NER_TRAIN, "--dev", NER_DEV, "--output",
                           tmp_path / "b", "--select-metric", "macro_f1")
    assert status == 2 and "select metric 'macro_f1' is not scored for IOB2 tags: choose one of f1," in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_teacher_and_kd_take_select_metric(tiny_encoder_dir, tiny_classifier_teacher, tmp_path):
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1", "--max-length", "32",
        "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "t", "--quiet", "--select-metric", "macro_f1")
    assert load_model(tmp_path / "t").training_settings.select_metric == "macro_f1"
    cli("kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "1",
        "--output", tmp_path / "kd", "--cache-dir", tmp_path / "cache", "--select-metric", "macro_recall")
    summary = json.loads((tmp_path / "kd" / "train_summary.json").read_text())
    assert summary["best"]["epoch"] == 1


def test_resume_refuses_another_select_metric(tmp_path, capsys, monkeypatch):
    args = interrupted_in_epoch_2(capsys, monkeypatch, "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV,
                                  "--output", tmp_path / "run", "--epochs", "3")
    status, err = run_main(capsys, *args, "--resume", "--select-metric", "macro_f1")
    assert status == 2 and "(settings.select_metric)" in err
    cli(*args, "--resume", "--select-metric", "accuracy")  # the default, named: the same run


# --- frictions ----------------------------------------------------------------------------------------------------

def test_global_options_after_the_command(tmp_path, monkeypatch):
    import procedures.cli
    precisions = []
    monkeypatch.setattr(procedures.cli, "set_precision", precisions.append)
    cli("student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "s", "--epochs", "1",
        "--threads", "2", "--precision=bf16")
    assert torch.get_num_threads() == 2 and precisions == ["bf16"]
    from procedures.cli import hoist_global_options
    commands = {"kd", "evaluate"}
    assert hoist_global_options(["kd", "--lr", "0.1", "--threads", "1"], commands) == \
        ["--threads", "1", "kd", "--lr", "0.1"]
    assert hoist_global_options(["--threads", "2", "evaluate", "m", "d", "--precision", "bf16"], commands) == \
        ["--threads", "2", "--precision", "bf16", "evaluate", "m", "d"]


def test_progress_is_plain_lines_in_a_log(tmp_path, capsys):
    cli("student", "--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--train", TRAIN, "--dev", DEV,
        "--output", tmp_path / "s", "--epochs", "2", "--batch-size", "4")
    err = capsys.readouterr().err
    assert "\r" not in err and "epoch 2/2: 100%" in err
    assert len(err.splitlines()) <= 6  # start and end of each epoch's bar, not one redraw per batch


def test_no_bar_is_drawn_inside_a_quiet_run(capsys):
    from distill.progress import bars_shown, progress_bar
    with bars_shown(False):
        bar = progress_bar(total=3, desc="deep inside")
        bar.update(3)
        bar.close()
    with bars_shown(True):
        shown = progress_bar(total=3, desc="outside")
        shown.update(3)
        shown.close()
    err = capsys.readouterr().err
    assert "deep inside" not in err and "outside" in err


def csv_text() -> str:
    return (SAMPLES / "sentiment_train.csv").read_text()


def tsv_text() -> str:
    import csv
    return "".join("\t".join(row) + "\n" for row in csv.reader(csv_text().splitlines()))


def jsonl_tags() -> str:
    return "".join(json.dumps({"tokens": ["EU", "rejects", "German", "call"], "tags": ["B-ORG", "O", "B-MISC", "O"]})
                   + "\n" for _ in range(3))


def conll_text() -> str:
    return NER_TRAIN.read_text()


@pytest.mark.parametrize("reader, name, content, message", [
    (read_tagging, "train.txt", csv_text, "looks like CSV (a header, then a text and a label per row: classification "
                                          "data), but this command or model tags words"),
    (read_tagging, "train.conll", csv_text, "looks like CSV"),
    (read_tagging, "train", tsv_text, "looks like TSV"),
    (read_tagging, "train.txt", jsonl_tags, "looks like JSON, but its name does not end in .jsonl or .json"),
    (read_classification, "train.txt", conll_text, "looks like CoNLL (tagging data: a word and its tag per line), "
                                                   "but this command or model classifies texts"),
    (read_classification, "train.txt", csv_text, "looks like CSV, but its name does not say so: name it .csv"),
    (read_classification, "train.data", tsv_text, "name it .tsv"),
])
def test_a_file_in_another_format_than_its_name_says_is_named(tmp_path, reader, name, content, message):
    """Each class of misnamed file: another task's table, or this task's JSON, under a name read as CoNLL;
    any format under a name that says none."""
    path = write(tmp_path / name, content())
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reader(str(path))


@pytest.mark.parametrize("content, line, word", [
    ("New York\tB-LOC\nis\tO\nbig\tO\n\nBerlin\tB-LOC\nrocks\tO\n", 1, "New York"),  # read as TSV
    ("Berlin\tB-LOC\nis\tO\nbig\tO\n\nNew York\tB-LOC\nrocks\tO\n", 5, "New York"),
    ("New\tB-LOC\nYork City\tI-LOC\n\nis\tO\n", 2, "York City"),
])
def test_a_tab_separated_conll_word_holding_a_space_is_named(tmp_path, content, line, word):
    """A tab-separated .conll whose word holds a space was refused as "looks like TSV (a header, then a text
    and a label per row: classification data)": the file is CoNLL, and the fault is that one word."""
    path = write(tmp_path / "train.conll", content)
    with pytest.raises(DataError) as refused:
        read_tagging(str(path))
    assert str(refused.value).startswith(f"{path}:{line}: the field {word!r} holds a space, but CoNLL fields are "
                                         "split at any space or tab")
    assert "TSV" not in str(refused.value)
