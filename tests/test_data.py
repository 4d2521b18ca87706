"""Readers: formats, columns, hierarchy, and one-line errors naming file and line."""

import json
import re

import pytest

from distill.data import (iter_unlabelled, read_classification, read_tagging, read_unlabelled, sniff_unlabelled,
                          unlabelled_text)
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



CONLL_LINES = "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\ncall NN I-NP O\n. . O O\n"


@pytest.mark.parametrize("name, content, message", [
    ("train.txt", "-DOCSTART- -X- -X- O\n\n" + CONLL_LINES, "looks like CoNLL (a word and its tag per line"),
    ("ner.txt", CONLL_LINES + "\n" + CONLL_LINES, "looks like CoNLL (a word and its tag per line"),
    ("ner", "Tolvania B-LOC\nvotes O\n\nMina B-PER\nspoke O\n", "looks like CoNLL"),
    ("reviews.txt", "text,label\ngood,positive\n\"bad, really\",negative\n", "looks like CSV (a header, 'text,label'"),
    ("reviews.txt", "Sentence\tLabel\ngood\t1\n", "looks like TSV (a header"),
    ("u.txt", '{"text": "good"}\n\n{"text": "bad", "id": 2}\n',
     "looks like JSON lines, but its name does not end in .jsonl"),
    ("pretty.txt", '[\n  {\n    "text": "good"\n  },\n  {\n    "text": "bad"\n  }\n]\n',
     "looks like a JSON document (an object or an array written over several lines)"),
    ("pretty.txt", '{\n  "text": ["good", "bad"]\n}\n', "looks like a JSON document"),
    ("array.txt", '[{"text": "good"},\n {"text": "bad"}]\n', "looks like a JSON document"),
    ("object.txt", '{"text": "good",\n "label": "positive"}\n', "looks like a JSON document"),
])
def test_unlabelled_plain_text_that_is_another_format_is_refused(tmp_path, name, content, message):
    """A file read one example per line whose first lines are CoNLL, a CSV header or JSON objects would
    silently become examples like 'EU NNP B-NP B-ORG', 'text,label' or '{"text": "good"}'."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    for task in ("classification", "tagging"):
        with pytest.raises(DataError, match=re.escape(message)) as err:
            read_unlabelled(str(path), task)
        assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)
        with pytest.raises(DataError, match=re.escape(message)):
            next(iter_unlabelled(str(path), task))


def test_real_conll2003_file_named_txt_is_refused_as_unlabelled(tmp_path):
    conll = (SAMPLES / "ner_train.conll").read_text(encoding="utf-8")
    (tmp_path / "train.txt").write_text(conll, encoding="utf-8")
    (tmp_path / "no_docstart.txt").write_text(conll.replace("-DOCSTART- -X- -X- O\n", ""), encoding="utf-8")
    for name in ("train.txt", "no_docstart.txt"):
        with pytest.raises(DataError, match="looks like CoNLL .*JSONL with a tokens field"):
            read_unlabelled(str(tmp_path / name), "tagging")


@pytest.mark.parametrize("content, examples", [
    ("good, really good\nbad, and long\n", ["good, really good", "bad, and long"]),
    ("{braces} open this review\n{\"text\": \"half\"} and more\n", ["{braces} open this review",
                                                                  '{"text": "half"} and more']),
    ("Mina spoke .\nRain delayed play .\nOfficials said so .\n", ["Mina spoke .", "Rain delayed play .",
                                                                    "Officials said so ."]),
    ("good\tmovie\nbad\tfilm\nfine\tshow\n", ["good\tmovie", "bad\tfilm", "fine\tshow"]),
    ("O\nO\n\nO\n", ["O", "O", "O"]),
    ("text\n", ["text"]),
    ("I love it, text me\n", ["I love it, text me"]),
    ("a b O\n", ["a b O"]),
    ('{"text": "good"}\nnot JSON\n', ['{"text": "good"}', "not JSON"]),
    ("[sic] a fine film\n{ braces } too\n", ["[sic] a fine film", "{ braces } too"]),
])
def test_ordinary_unlabelled_text_is_not_mistaken_for_another_format(tmp_path, content, examples):
    path = tmp_path / "u.txt"
    path.write_text(content, encoding="utf-8")
    assert read_unlabelled(str(path), "classification")["text"] == examples
    assert sniff_unlabelled(content.splitlines()) is None


def test_an_unlabelled_json_file_may_hold_one_array_of_objects(tmp_path):
    """As a labelled .json file may (pandas' to_json(orient="records")); each item numbered as a line."""
    path = tmp_path / "u.json"
    path.write_text('\ufeff[\n  {"text": "good film", "tokens": ["good", "film"]},\n  {"text": "dull"}\n]\n',
                    encoding="utf-8")
    assert list(iter_unlabelled(str(path), "classification")) == [(1, "good film"), (2, "dull")]
    assert read_unlabelled(str(path), "tagging")["tokens"] == [["good", "film"], ["dull"]]
    path.write_text('[{"text": "good"}, {"text": " "}]', encoding="utf-8")
    with pytest.raises(DataError, match=r"u.json:2: empty 'text'"):
        read_unlabelled(str(path), "classification")
    path.write_text('[{"text": "good"}, "bad"]', encoding="utf-8")
    with pytest.raises(DataError, match="item 2 of the JSON array is not an object"):
        read_unlabelled(str(path), "classification")


def test_real_unlabelled_files_are_accepted():
    for name in ("unlabeled_movies.txt", "unlabeled_news.txt"):
        assert len(read_unlabelled(str(SAMPLES / name), "tagging")) == 300


def test_unlabelled_text_from_stdin_reads_json_lines_and_refuses_tables():
    assert unlabelled_text('{"text": "good"}\n\n{"text": "bad"}\n', "classification") == ["good", "bad"]
    assert unlabelled_text('{"tokens": ["EU", "rejects"]}\n', "tagging") == [["EU", "rejects"]]
    assert unlabelled_text("good, really\n\n{not json\n", "classification") == ["good, really", "{not json"]
    assert unlabelled_text("Mina spoke .\n", "tagging") == [["Mina", "spoke", "."]]
    assert unlabelled_text("", "classification") == []
    with pytest.raises(DataError, match="^stdin: looks like CoNLL"):
        unlabelled_text("-DOCSTART- -X- O\n\nEU B-ORG\n", "tagging")
    with pytest.raises(DataError, match="^stdin: looks like CSV"):
        unlabelled_text("text,label\ngood,positive\n", "classification")
    with pytest.raises(DataError, match="^stdin:1: missing column 'text'"):
        unlabelled_text('{"review": "a"}\n', "classification")

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
