"""Readers: formats, columns, hierarchy, and one-line errors naming file and line."""

import json

import pytest

from distill.data import iter_unlabelled, read_classification, read_tagging, read_unlabelled
from distill.errors import DataError, DistillError
from distill.labels import LabelHierarchy
from tests.conftest import SAMPLES


def test_csv_tsv_jsonl_read_the_same(tmp_path):
    (tmp_path / "a.csv").write_text('review,y\n"good, really",pos\nbad,neg\n')
    (tmp_path / "a.tsv").write_text("review\ty\ngood, really\tpos\nbad\tneg\n")
    (tmp_path / "a.jsonl").write_text('{"review": "good, really", "y": "pos"}\n\n{"review": "bad", "y": "neg"}\n')
    for name in ("a.csv", "a.tsv", "a.jsonl"):
        data = read_classification(str(tmp_path / name), "review", "y")
        assert data["text"] == ["good, really", "bad"] and data["label"] == ["pos", "neg"]


def test_conll_skips_docstart_and_selects_columns():
    ner = read_tagging(str(SAMPLES / "ner_train.conll"))
    pos = read_tagging(str(SAMPLES / "ner_train.conll"), tag_column=1)
    assert len(ner) == len(pos) == 300
    assert "-DOCSTART-" not in ner[0]["tokens"]
    assert {t for tags in ner["tags"] for t in tags} >= {"O", "B-PER", "I-ORG", "B-LOC", "B-MISC"}
    assert not any(t.startswith("B-") for tags in pos["tags"] for t in tags)


def test_unlabelled_lines_and_jsonl(tmp_path):
    (tmp_path / "u.txt").write_text("first line\n\n  second line  \n")
    assert read_unlabelled(str(tmp_path / "u.txt"), "classification")["text"] == ["first line", "second line"]
    assert read_unlabelled(str(tmp_path / "u.txt"), "tagging")["tokens"] == [["first", "line"], ["second", "line"]]
    (tmp_path / "u.jsonl").write_text(json.dumps({"text": "a b", "label": "x"}) + "\n")
    assert [n for n, _ in iter_unlabelled(str(tmp_path / "u.jsonl"), "tagging")] == [1]


@pytest.mark.parametrize("content, message", [
    (b"", "file is empty"),
    (b"text,label\nok,pos\n\xff\xfe,neg\n", ":3: not UTF-8"),
    (b"text,label\nok,pos\nbad\x00,neg\n", ":3: binary data"),
    (b"words,label\nok,pos\n", "missing column 'text'"),
    (b"text,label\nok,pos,extra\n", ":2: wrong number of fields"),
    (b"text,label\nok,\n", ":2: empty label"),
])
def test_classification_errors_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as err:
        read_classification(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("content, message", [
    ("EU NNP B-ORG\nrejects VBZ\n", ":2: expected 3 fields"),
    ("EU NNP B-ORG\nrejects VBZ PER\n", "mixed tagging schemes"),
    ("-DOCSTART- -X- O\n\n", "no sentences"),
])
def test_conll_errors(tmp_path, content, message):
    path = tmp_path / "bad.conll"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_tagging(str(path))


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_classification(str(tmp_path / "nope.csv"))
    (tmp_path / "x.xml").write_text("<a/>")
    with pytest.raises(DataError, match="unknown format"):
        read_classification(str(tmp_path / "x.xml"))


def test_hierarchy_levels_and_unseen_labels():
    hierarchy = LabelHierarchy.from_labels(["Science/Physics", "Sports/Tennis", "Science/Biology"])
    assert hierarchy.depth == 2
    assert hierarchy.at_level("Science/Physics", 0) == "Science"
    assert LabelHierarchy.from_dict(hierarchy.to_dict()).labels == hierarchy.labels
    with pytest.raises(DistillError, match="'Arts/Film' was not seen in training"):
        hierarchy.encode("Arts/Film", "dev.csv")


def test_inverse_class_weights_favour_rare_labels():
    hierarchy = LabelHierarchy.from_labels(["a", "a", "a", "b"])
    weights = hierarchy.class_weights("inverse")
    assert weights[1] == pytest.approx(3 * weights[0]) and sum(weights) == pytest.approx(2)
    with pytest.raises(DistillError, match="3 class weights given for 2 labels"):
        hierarchy.class_weights([1, 2, 3])
