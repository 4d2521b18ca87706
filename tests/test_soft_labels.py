"""kd --soft-labels: a file of the teacher's distributions stands for the teacher (`distill.soft_labels`)."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from safetensors.torch import load_file

from conftest import SAMPLES, cli
from procedures.cli import main

STUDENT = ["--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--epochs", "2", "--quiet"]


def run_cli(*args) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return str(path)


def test_soft_labels_match_the_teacher_they_came_from(tiny_classifier_teacher, tmp_path):
    """kd from a file of the teacher's distributions trains the very student kd from the teacher does."""
    from distill import load_model
    from distill.data import read_split, read_unlabeled
    from distill.inference import predict_logits
    train, _ = read_split(str(SAMPLES / "sentiment_train.csv"), "classification")
    unlabeled = list(read_unlabeled(str(SAMPLES / "unlabeled_movies.txt"), "classification")["text"])[:60]
    assert not set(unlabeled) & set(train)
    (tmp_path / "unlabeled.txt").write_text("\n".join(unlabeled) + "\n", encoding="utf-8")
    teacher = load_model(tiny_classifier_teacher)
    texts = list(train) + unlabeled
    probabilities = predict_logits(teacher, texts).logits.softmax(-1).tolist()
    labels = teacher.hierarchy.labels
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": text, "probs": dict(zip(labels, row))}
                                                  for text, row in zip(texts, probabilities)])
    common = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", *STUDENT,
              "--seed", "3"]
    cli("kd", "--teacher", tiny_classifier_teacher, "--unlabeled", tmp_path / "unlabeled.txt", "--random-embeddings",
        "--cache-dir", tmp_path / "cache", "--output", tmp_path / "from-teacher", *common)
    cli("kd", "--soft-labels", soft, "--output", tmp_path / "from-file", *common)
    summaries = [json.loads((tmp_path / name / "train_summary.json").read_text()) for name in ("from-teacher",
                                                                                               "from-file")]
    assert summaries[0]["train_examples"] == summaries[1]["train_examples"] == len(texts)
    assert summaries[1]["soft_labelled_examples"] == len(texts)
    for first, second in zip(summaries[0]["history"], summaries[1]["history"]):
        assert math.isclose(first["train_loss"], second["train_loss"], rel_tol=1e-4)
        assert first["dev"] == second["dev"]
    weights = [load_file(str(tmp_path / name / "model.safetensors")) for name in ("from-teacher", "from-file")]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert torch.allclose(weights[0][name], weights[1][name], atol=1e-4), name


def test_a_record_that_does_not_sum_to_one_is_refused_with_file_and_line(tmp_path, capsys):
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "probs": {"negative": 0.2, "positive": 0.8}},
                                                 {"text": "a dull film", "probs": {"negative": 0.7, "positive": 0.2}}])
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--train", SAMPLES / "sentiment_train.csv", "--dev",
                   SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student", *STUDENT) == 2
    err = capsys.readouterr().err
    assert f"{soft}:2: the probabilities sum to 0.9, not 1" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("record, message", [
    ({"text": "x", "probs": {"negative": 0.5, "neutral": 0.5}}, "label 'neutral' is not one of the data's labels"),
    ({"text": "x", "probs": {"negative": float("nan"), "positive": 1.0}}, "must be a number from 0 to 1, got nan"),
    ({"text": "x", "probs": {"negative": -0.1, "positive": 1.1}}, "must be a number from 0 to 1, got -0.1"),
    ({"text": "x", "probs": {"negative": True, "positive": 0.0}}, "must be a number from 0 to 1, got True"),
    ({"text": "x", "probs": ["negative"]}, '"probs" must be a JSON object'),
    ({"text": "x", "probs": {}}, '"probs" names no label'),
    ({"text": "x", "label": "positive"}, 'needs its "confidence"'),
    ({"text": "x", "label": "positive", "confidence": 0.3}, "below an even split"),
    ({"text": "x", "label": "positive", "confidence": 0.9, "probs": {"positive": 1}}, "not both"),
    ({"text": "x"}, "found neither"),
    ({"text": "", "label": "positive", "confidence": 1}, "empty or non-text value in 'text'"),
    ({"sentence": "x", "label": "positive", "confidence": 1}, "no 'text' field"),
])
def test_bad_records(tmp_path, record, message):
    from distill import DataError
    from distill.data import read_soft_labels
    path = write_jsonl(tmp_path / "soft.jsonl", [{"text": "fine", "label": "negative", "confidence": 0.9}, record])
    with pytest.raises(DataError) as error:
        read_soft_labels(path, ["negative", "positive"])
    assert str(error.value).startswith(f"{path}:2: ") and message in str(error.value)


@pytest.mark.parametrize("labels", [None, ["negative", "positive"]])
@pytest.mark.parametrize("record, message", [
    ({"text": "x", "probs": {"": 0.5, "positive": 0.5}}, "an empty label in 'probs': name each label"),
    ({"text": "x", "label": "  ", "confidence": 0.9}, "an empty label in 'label': name each label"),
    ({"text": "x", "probs": {"negative": 0.5, "positive": 0.5, " positive": 0.5}},
     "\"probs\" names the label 'positive' twice"),
])
def test_a_label_without_a_name_or_named_twice_is_refused(tmp_path, labels, record, message):
    """Was: without a label set, "" became a label of the file's (a student with a class named ""); " positive"
    beside "positive" replaced its probability in silence (the record above summed to 1 so)."""
    from distill import DataError
    from distill.data import read_soft_labels
    path = write_jsonl(tmp_path / "soft.jsonl", [{"text": "fine", "label": "negative", "confidence": 0.9}, record])
    with pytest.raises(DataError) as error:
        read_soft_labels(path, labels)
    assert str(error.value).startswith(f"{path}:2: {message}")


@pytest.mark.parametrize("line", ['{"text": "x", "probs": {"negative": 0.3, "positive": 0.5, "positive": 0.7}}',
                                  '{"text": "x", "probs": {"negative": 0.5, "positive": 0.5, "positive": 0.2}}'])
def test_a_label_key_written_twice_is_refused_for_the_repetition(tmp_path, line):
    """Was: JSON kept the last value in silence, so the first record was read as 0.3/0.7 and the second refused
    only because the kept values summed to 0.7."""
    from distill import DataError
    from distill.data import read_soft_labels
    path = tmp_path / "soft.jsonl"
    path.write_text('{"text": "fine", "label": "negative", "confidence": 0.9}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        read_soft_labels(path)
    assert str(error.value) == f"{path}:2: \"probs\" names the label 'positive' twice: give each label one probability"


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_in_a_jsonl_file_is_said_so(tmp_path, capsys, indent):
    """Was: 'each JSONL line must be an object' (on one line) or 'invalid JSON (Expecting value)' (indented)."""
    records = [{"text": "a fine film", "probs": {"negative": 0.2, "positive": 0.8}}]
    (tmp_path / "soft.jsonl").write_text(json.dumps(records, indent=indent))
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", tmp_path / "soft.jsonl", "--train", SAMPLES / "sentiment_train.csv",
                   "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student", *STUDENT) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'soft.jsonl'}:1: holds a JSON array, not JSON " \
                                              "lines: write one JSON object per line (or name the file .json)"
    assert not (tmp_path / "student").exists()
    (tmp_path / "soft.json").write_text(json.dumps(records, indent=indent))  # as the message says
    from distill.data import read_soft_labels
    assert read_soft_labels(tmp_path / "soft.json", ["negative", "positive"]).probabilities == [[0.2, 0.8]]


def test_label_and_confidence_spread_the_rest_and_conflicts_are_refused(tmp_path):
    from distill import DataError, SoftLabels
    path = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a", "label": "b", "confidence": 0.6},
                                                 {"text": "z", "probs": {"a": 0.25, "c": 0.75}},
                                                 {"text": "a", "label": "b", "confidence": 0.6}])
    soft = SoftLabels(path).read(None)  # the labels the file names: a, b, c
    assert soft.hierarchy.labels == ["a", "b", "c"]
    assert torch.allclose(soft.logits(["a", "z"]).logits.exp(), torch.tensor([[0.2, 0.6, 0.2], [0.25, 0.0, 0.75]]),
                          atol=1e-6)
    with pytest.raises(DataError, match="has no soft label for example 0 of dev"):
        soft.logits(["unseen"], where=["dev"])
    assert soft.logits(["unseen"], gold=["c"]).logits.argmax(-1).tolist() == [2]  # a training text: its gold label
    write_jsonl(tmp_path / "soft.jsonl", [{"text": "a", "label": "b", "confidence": 0.6},
                                          {"text": "a", "label": "c", "confidence": 0.6}])
    with pytest.raises(DataError, match=r"soft.jsonl:2: the text of line 1 again, with another distribution"):
        SoftLabels(path, "a,b,c").read(None)


def test_label_names_given_as_a_list_are_read_as_written(tmp_path):
    """Was: SoftLabels(labels=["<=50K", ">50K"]) refused as words for a label ('<' described as '50K'): the
    NAME=WORDS spelling is --labels' (a text), and a list in Python names its labels as they are."""
    from distill import DistillError, SoftLabels
    path = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a", "label": ">50K", "confidence": 0.9}])
    soft = SoftLabels(path, ["<=50K", ">50K"]).read(None)
    assert soft.hierarchy.labels == ["<=50K", ">50K"] and soft.records.probabilities == [[pytest.approx(0.1), 0.9]]
    with pytest.raises(DistillError):
        SoftLabels(path, "<=50K,>50K")  # the --labels spelling: '<' described as '50K', and '>50K' after it
    with pytest.raises(DistillError, match=r"^labels: ' ' is no label name \(a text that is not blank\)$"):
        SoftLabels(path, ["<=50K", " "])


def test_soft_labels_alone(tmp_path):
    """No teacher and no training data: the file's texts and distributions are the whole transfer set."""
    from distill import Distiller, SoftLabels, TrainSettings
    from distill.data import read_split
    texts, labels = read_split(str(SAMPLES / "sentiment_train.csv"), "classification")
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": text, "label": label, "confidence": 0.8}
                                                 for text, label in zip(texts, labels)])
    cli("kd", "--soft-labels", soft, "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student",
        *STUDENT)
    summary = json.loads((tmp_path / "student" / "train_summary.json").read_text())
    assert summary["teacher"] == soft and summary["train_examples"] == len(texts)
    assert summary["unlabeled_examples"] == len(texts) and summary["teacher_dev"] is None
    assert summary["inputs"]["teacher"]  # the file's content is in the run's signature
    result = Distiller(SoftLabels(soft, "negative,positive"), "lstm", settings=TrainSettings(epochs=1)).fit(
        None, str(SAMPLES / "sentiment_dev.csv"))
    assert result.model.hierarchy.labels == ["negative", "positive"]


@pytest.mark.parametrize("labels", [[], ["--labels", "negative,positive"]])
def test_dev_labels_outside_the_soft_labels_set_are_said_so(tmp_path, capsys, labels):
    """Was: 'label 'neutral' was not seen in training', of a run with no training data: the soft labels' label set
    (the file's, or --labels) is the teacher's."""
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "label": "positive", "confidence": 0.9},
                                                 {"text": "a dull film", "label": "negative", "confidence": 0.9}])
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\na fine film,positive\nan odd film,neutral\n", encoding="utf-8")
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--dev", dev, "--output", tmp_path / "student", *labels, *STUDENT) == 2
    assert capsys.readouterr().err.strip() == f"error: {dev}: label 'neutral' is outside the teacher's label set, " \
        f"that of the soft labels of {soft} (negative, positive): name every label with --labels"
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("args, message", [
    (["--teacher", "TEACHER"], "give --teacher (a teacher model, repeated for an ensemble) or --soft-labels"),
    (["--cache-dir", "CACHE"], "no teacher model runs: drop --cache-dir"),
    (["--online-teacher"], "no teacher model runs: drop --online-teacher"),
    (["--unlabeled", SAMPLES / "unlabeled_movies.txt"], "drop --unlabeled"),
    (["--embeddings-from-teacher"], "drop --embeddings-from-teacher"),
    (["--teacher-weights", "1,2"], "no teacher model runs: drop --teacher-weights"),  # was: "one teacher was given"
    (["--labels", "good,bad"], "are not the training data's"),
    (["--labels", "negative=a bad film,positive=a good film"],
     "--labels: soft labels take label names alone (negative,positive)"),
])
def test_refusals(tiny_classifier_teacher, tmp_path, capsys, args, message):
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "label": "positive", "confidence": 0.9}])
    args = [tiny_classifier_teacher if a == "TEACHER" else tmp_path / "cache" if a == "CACHE" else a for a in args]
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--train", SAMPLES / "sentiment_train.csv", "--dev",
                   SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student", *STUDENT, *args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("spellings", [("positive", "Positive"), ("caf\u00e9", "cafe\u0301"), ("good", "good\u200b")])
def test_one_label_spelt_two_ways_in_the_file_is_refused_as_in_data(tmp_path, capsys, spellings):
    """Was: with no training data, a file naming 'positive' on some lines and 'Positive' on others trained a student
    of both as two classes (dev accuracy 0.0 on the samples), in silence; a data file of the two is refused."""
    first, second = spellings
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "probs": {first: 0.9, "bad": 0.1}},
                                                 {"text": "a dull film", "probs": {"bad": 0.8, second: 0.2}},
                                                 {"text": "a good film", "label": first, "confidence": 0.7}])
    dev = tmp_path / "dev.csv"
    dev.write_text(f"text,label\na fine film,{first}\nan odd film,bad\n", encoding="utf-8")
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--dev", dev, "--output", tmp_path / "student", *STUDENT) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: {soft}: labels {first!r} and {second!r} differ only in case, spacing, Unicode " \
                          "form, invisible characters or number format; spell each label one way", err
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("padded", ["file", "train"])
def test_a_text_is_matched_to_its_soft_label_whatever_blanks_surround_it(tmp_path, padded):
    """Was: a text written ' text ' in the file (or in the training CSV) was not the training text 'text': the
    training example learnt its gold label alone and the file's copy joined the transfer set as one more text (240
    training texts became 480 examples, 240 'unlabeled'), in silence. A plain-text line is read stripped, a CSV field
    is not, and every model reads the two alike (as check_held_out compares them)."""
    from distill.data import read_split
    texts, labels = read_split(str(SAMPLES / "sentiment_train.csv"), "classification")
    pad = (lambda text: f"  {text} ") if padded == "file" else (lambda text: text)
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": pad(text), "label": label, "confidence": 0.9}
                                                 for text, label in zip(texts, labels)])
    train = tmp_path / "train.csv"
    with open(train, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows([(text if padded == "file" else f" {text}  ", label) for text, label in zip(texts, labels)])
    cli("kd", "--soft-labels", soft, "--train", train, "--dev", SAMPLES / "sentiment_dev.csv", "--output",
        tmp_path / "student", *STUDENT)
    summary = json.loads((tmp_path / "student" / "train_summary.json").read_text())
    assert summary["train_examples"] == len(texts) and summary["unlabeled_examples"] == 0
    assert summary["soft_labelled_examples"] == len(texts)


def test_a_text_given_twice_with_blanks_and_two_distributions_is_refused(tmp_path):
    from distill import DataError, SoftLabels
    path = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "label": "good", "confidence": 0.9},
                                                 {"text": " a fine film ", "label": "bad", "confidence": 0.9}])
    with pytest.raises(DataError, match=r"soft.jsonl:2: the text of line 1 again, with another distribution"):
        SoftLabels(path).read(None)


@pytest.mark.parametrize("option, value", [("--unlabeled-ratio", "0.5"), ("--min-confidence", "0.9")])
def test_unlabeled_settings_are_refused_where_the_file_adds_no_text(tmp_path, capsys, option, value):
    """Was: with every text of the file a training text, --unlabeled-ratio and --min-confidence were accepted and
    changed nothing (the student of a run without them), where beside a teacher without unlabeled text they are
    refused."""
    from distill.data import read_split
    texts, labels = read_split(str(SAMPLES / "sentiment_train.csv"), "classification")
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": text, "label": label, "confidence": 0.9}
                                                 for text, label in zip(texts, labels)])
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--train", SAMPLES / "sentiment_train.csv", "--dev",
                   SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student", *STUDENT, option, value) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: {option} applies to unlabeled text, and the soft labels of {soft} give none (each " \
                          f"of its texts is a training text): drop {option}", err
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("mistakes", ["shift", "drop"])
def test_teacher_mistakes_are_refused_where_no_text_has_a_gold_label(tmp_path, capsys, mistakes):
    """Was: without --train every text of the file is unlabeled, which --teacher-mistakes does not judge, so shift and
    drop were accepted and trained the student of a run without them."""
    from distill import Distiller, SoftLabels, TeacherStudentDistill
    from distill.errors import DistillError
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"text": "a fine film", "label": "positive", "confidence": 0.9},
                                                 {"text": "a dull film", "label": "negative", "confidence": 0.9}])
    capsys.readouterr()
    assert run_cli("kd", "--soft-labels", soft, "--dev", SAMPLES / "sentiment_dev.csv", "--output",
                   tmp_path / "student", *STUDENT, "--teacher-mistakes", mistakes) == 2
    assert capsys.readouterr().err.strip() == "error: --teacher-mistakes judges the teacher where a labelled " \
        f"example's gold label is not its top class, and without training data every text of {soft} is unlabeled: " \
        "drop --teacher-mistakes, or give --train"
    assert not (tmp_path / "student").exists()
    distiller = Distiller(SoftLabels(soft), "lstm", TeacherStudentDistill(teacher_mistakes=mistakes))
    with pytest.raises(DistillError, match=r"^TeacherStudentDistill\(teacher_mistakes=...\) judges the teacher"):
        distiller.fit(None, str(SAMPLES / "sentiment_dev.csv"))
