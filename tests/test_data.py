"""Readers: formats, columns, hierarchy, and one-line errors naming file and line."""

import json
import re
from pathlib import Path

import pytest

from distill.data import (Examples, check_held_out, checked_examples, iter_unlabeled, labelled_examples,
                          read_classification, read_tagging, read_unlabeled, sniff_unlabeled, unlabeled_text)
from distill.errors import DataError, DistillError
from distill.labels import LabelHierarchy
from tests.conftest import (DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, kd_with, run_main, student_on, tagger_on,
                            write)


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


def test_unlabeled_lines_and_jsonl(tmp_path):
    (tmp_path / "u.txt").write_text("first line\n\n  second line  \n")
    assert read_unlabeled(str(tmp_path / "u.txt"), "classification")["text"] == ["first line", "second line"]
    assert read_unlabeled(str(tmp_path / "u.txt"), "tagging")["tokens"] == [["first", "line"], ["second", "line"]]
    (tmp_path / "u.jsonl").write_text(json.dumps({"text": "a b", "label": "x"}) + "\n")
    assert [n for n, _ in iter_unlabeled(str(tmp_path / "u.jsonl"), "tagging")] == [1]



CONLL_LINES = "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\ncall NN I-NP O\n. . O O\n"
# `pseudo-label` output, one record a line
PSEUDO_LABELS = [json.dumps({"line": n, "text": f"film {n}", "label": "positive", "confidence": 0.9}) + "\n"
                 for n in range(1, 5)]


@pytest.mark.parametrize("name, content, message", [
    ("train.txt", "-DOCSTART- -X- -X- O\n\n" + CONLL_LINES, "looks like CoNLL (a word and its tag per line"),
    ("ner.txt", CONLL_LINES + "\n" + CONLL_LINES, "looks like CoNLL (a word and its tag per line"),
    ("ner", "Tolvania B-LOC\nvotes O\n\nMina B-PER\nspoke O\n", "looks like CoNLL"),
    ("reviews.txt", "text,label\ngood,positive\n\"bad, really\",negative\n", "looks like CSV (a header, 'text,label'"),
    ("reviews.txt", "Sentence\tLabel\ngood\t1\n", "looks like TSV (a header"),
    ("u.txt", '{"text": "good"}\n\n{"text": "bad", "id": 2}\n',
     "looks like JSON lines, but its name does not end in .jsonl"),
    ("pl.txt", "".join(PSEUDO_LABELS[:2]) + "# checked by hand up to here\n" + "".join(PSEUDO_LABELS[2:] * 4),
     "looks like JSON lines, but its name does not end in .jsonl, and its line 3 is no JSON object (a note, or a "
     "line cut short?): remove or fix that line"),
    ("cut.txt", "".join(PSEUDO_LABELS[:3]) + PSEUDO_LABELS[3][:30],
     "looks like JSON lines, but its name does not end in .jsonl, and its line 4 is no JSON object"),
    ("pretty.txt", '[\n  {\n    "text": "good"\n  },\n  {\n    "text": "bad"\n  }\n]\n',
     "looks like a JSON document (an object or an array written over several lines)"),
    ("pretty.txt", '{\n  "text": ["good", "bad"]\n}\n', "looks like a JSON document"),
    ("array.txt", '[{"text": "good"},\n {"text": "bad"}]\n', "looks like a JSON document"),
    ("object.txt", '{"text": "good",\n "label": "positive"}\n', "looks like a JSON document"),
    ("one-column.txt", 'text\n"A slow, careful film."\n"She said ""wow"", then left."\n',  # df[["text"]].to_csv()
     "looks like CSV (a header, 'text', then rows)"),
    ("one-column.txt", 'Text\n"A slow, careful film."\n', "looks like CSV (a header, 'Text', then rows)"),
])
def test_unlabeled_plain_text_that_is_another_format_is_refused(tmp_path, name, content, message):
    """A file read one example per line whose first lines are CoNLL, a CSV header or JSON objects would
    silently become examples like 'EU NNP B-NP B-ORG', 'text,label' or '{"text": "good"}'."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    for task in ("classification", "tagging"):
        with pytest.raises(DataError, match=re.escape(message)) as err:
            read_unlabeled(str(path), task)
        assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)
        with pytest.raises(DataError, match=re.escape(message)):
            next(iter_unlabeled(str(path), task))


def test_real_conll2003_file_named_txt_is_refused_as_unlabeled(tmp_path):
    conll = (SAMPLES / "ner_train.conll").read_text(encoding="utf-8")
    (tmp_path / "train.txt").write_text(conll, encoding="utf-8")
    (tmp_path / "no_docstart.txt").write_text(conll.replace("-DOCSTART- -X- -X- O\n", ""), encoding="utf-8")
    for name in ("train.txt", "no_docstart.txt"):
        with pytest.raises(DataError, match="looks like CoNLL .*JSONL with a tokens field"):
            read_unlabeled(str(tmp_path / name), "tagging")


@pytest.mark.parametrize("content, examples", [
    ("good, really good\nbad, and long\n", ["good, really good", "bad, and long"]),
    ("{braces} open this review\n{\"text\": \"half\"} and more\n", ["{braces} open this review",
                                                                  '{"text": "half"} and more']),
    ("Mina spoke .\nRain delayed play .\nOfficials said so .\n", ["Mina spoke .", "Rain delayed play .",
                                                                    "Officials said so ."]),
    ("good\tmovie\nbad\tfilm\nfine\tshow\n", ["good\tmovie", "bad\tfilm", "fine\tshow"]),
    ("O\nO\n\nO\n", ["O", "O", "O"]),
    ("text\n", ["text"]),
    ("Text\nA slow film.\n", ["Text", "A slow film."]),  # a first line that is a column's name, no CSV quoting
    ('text\nA slow film.\n"Wow," she said.\n', ["text", "A slow film.", '"Wow," she said.']),
    ("I love it, text me\n", ["I love it, text me"]),
    ("a b O\n", ["a b O"]),
    ('{"text": "good"}\nnot JSON\n', ['{"text": "good"}', "not JSON"]),
    ('{"text": "good"}\nnot JSON\n{"text": "bad"}\n', ['{"text": "good"}', "not JSON", '{"text": "bad"}']),
    ("[sic] a fine film\n{ braces } too\n", ["[sic] a fine film", "{ braces } too"]),
    ("1 great film\n2 bad film\n3 fine film\n", ["1 great film", "2 bad film", "3 fine film"]),  # not CoNLL-U
    ("1\tgreat film\n2\tbad film\n3\tfine film\n", ["1\tgreat film", "2\tbad film", "3\tfine film"]),  # cat -n
])
def test_ordinary_unlabeled_text_is_not_mistaken_for_another_format(tmp_path, content, examples):
    path = tmp_path / "u.txt"
    path.write_text(content, encoding="utf-8")
    assert read_unlabeled(str(path), "classification")["text"] == examples
    assert sniff_unlabeled(content.splitlines()) is None


def test_hub_dataset_as_unlabeled_input_is_refused_by_name():
    """predict (and pseudo-label, --unlabeled) read unlabeled files only: hub:NAME:SPLIT was 'file not found',
    though troubleshooting.md sends a test split without gold labels to predict."""
    for task in ("classification", "tagging"):
        with pytest.raises(DataError, match="hub:glue:sst2:test: a hub dataset is read as labelled data"):
            next(iter_unlabeled("hub:glue:sst2:test", task))


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"], ids=["cr", "crlf", "lf"])
def test_unlabeled_files_split_at_every_line_end(end, tmp_path):
    """A file with old Mac line ends (\\r) was one example (tagging: one sentence of every word), while the
    labelled readers and stdin split it; the numbers are the lines an editor shows."""
    path = tmp_path / "u.txt"
    path.write_bytes(end.join(["\ufeffgood film", "", "a dull one", "bad"]).encode() + end.encode())
    assert list(iter_unlabeled(str(path), "classification")) == [(1, "good film"), (3, "a dull one"), (4, "bad")]
    assert list(iter_unlabeled(str(path), "tagging")) == [(1, ["good", "film"]), (3, ["a", "dull", "one"]),
                                                          (4, ["bad"])]
    path.write_bytes(end.join(['{"text": "good"}', '{"text": "bad"}']).encode())
    assert list(iter_unlabeled(str(path.rename(tmp_path / "u.jsonl")), "classification")) == [(1, "good"), (2, "bad")]
    path = tmp_path / "conll.txt"  # sniffed as CoNLL in any line ends: refused, not read as text
    path.write_bytes(end.join(["EU B-ORG", "rejects O", "", "Peter B-PER"]).encode())
    with pytest.raises(DataError, match="CoNLL"):
        next(iter_unlabeled(str(path), "tagging"))


def test_pseudo_label_output_is_read_by_its_own_fields_whatever_the_column_options(tmp_path):
    """kd --text-column sentence (the labelled data's) read --unlabeled pseudo.jsonl by 'sentence', which
    pseudo-label never writes: the documented chain pseudo-label -> kd failed."""
    path = tmp_path / "pseudo.jsonl"
    path.write_text('{"line": 1, "text": "a fine film", "label": "pos", "confidence": 0.9}\n'
                    '{"line": 3, "text": "dull", "label": "neg", "confidence": 0.7}\n', encoding="utf-8")
    assert list(iter_unlabeled(str(path), "classification", text_column="sentence")) == [(1, "a fine film"),
                                                                                         (2, "dull")]
    path.write_text('{"line": 1, "tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"], "confidence": 0.9}\n')
    assert list(iter_unlabeled(str(path), "tagging", tokens_field="words")) == [(1, ["EU", "rejects"])]
    path.write_text('{"text": "a fine film"}\n', encoding="utf-8")  # not pseudo-label output: the option holds
    with pytest.raises(DataError, match="missing column 'sentence'"):
        list(iter_unlabeled(str(path), "classification", text_column="sentence"))


def test_a_field_named_twice_counts_only_in_the_record_itself(tmp_path):
    """A nested object distill never reads (metadata) may repeat a key; the record's own fields may not."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "good", "label": "pos", "meta": {"source": "a", "source": "b"}}\n'
                    '{"text": "bad", "label": "neg"}\n', encoding="utf-8")
    assert read_classification(str(path))["label"] == ["pos", "neg"]
    path.write_text('{"text": "good", "label": "pos", "text": "bad"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"d.jsonl:1: the record names the field 'text' twice"):
        read_classification(str(path))


def test_an_unlabeled_json_file_may_hold_one_array_of_objects(tmp_path):
    """As a labelled .json file may (pandas' to_json(orient="records")); each item numbered as a line."""
    path = tmp_path / "u.json"
    path.write_text('\ufeff[\n  {"text": "good film", "tokens": ["good", "film"]},\n  {"text": "dull"}\n]\n',
                    encoding="utf-8")
    assert list(iter_unlabeled(str(path), "classification")) == [(1, "good film"), (2, "dull")]
    assert read_unlabeled(str(path), "tagging")["tokens"] == [["good", "film"], ["dull"]]
    path.write_text('[{"text": "good"}, {"text": " "}]', encoding="utf-8")
    with pytest.raises(DataError, match=r"u.json:2: empty 'text'"):
        read_unlabeled(str(path), "classification")
    path.write_text('[{"text": "good"}, "bad"]', encoding="utf-8")
    with pytest.raises(DataError, match="item 2 of the JSON array is not an object"):
        read_unlabeled(str(path), "classification")


def test_a_labelled_json_arrays_errors_name_the_line_its_item_starts_on(tmp_path):
    """As a JSONL file's do: the second item of a pretty-printed array starts on line 6."""
    path = tmp_path / "c.json"
    items = [{"text": "good film", "label": "pos"}, {"text": None, "label": "neg"}]
    path.write_text(json.dumps(items, indent=2), encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:6: empty or non-text value in column 'text'")):
        read_classification(str(path))
    path.write_text(json.dumps([items[0], {"label": "neg"}], indent=2), encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:6: missing column 'text'")):
        read_classification(str(path))
    path.write_text('[{"text": "good", "label": "a"}\n {"text": "bad", "label": "b"}]', encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:2: invalid JSON (Expecting ',' delimiter)")):
        read_classification(str(path))
    path.write_text('[\n{"text": "good", "label": "a"},\n{"text": "bad", "label": "b"}\n] \n', encoding="utf-8")
    assert read_classification(str(path))["text"] == ["good", "bad"]
    path.write_text(json.dumps(items), encoding="utf-8")  # one line (pandas' default): a line names no item
    with pytest.raises(DataError, match=re.escape(f"{path}: empty or non-text value in column 'text'")):
        read_classification(str(path))


def test_real_unlabeled_files_are_accepted():
    for name in ("unlabeled_movies.txt", "unlabeled_news.txt"):
        assert len(read_unlabeled(str(SAMPLES / name), "tagging")) == 300


def test_unlabeled_text_from_stdin_reads_json_lines_and_refuses_tables():
    assert unlabeled_text('{"text": "good"}\n\n{"text": "bad"}\n', "classification") == ["good", "bad"]
    assert unlabeled_text('{"tokens": ["EU", "rejects"]}\n', "tagging") == [["EU", "rejects"]]
    assert unlabeled_text("good, really\n\n{not json\n", "classification") == ["good, really", "{not json"]
    assert unlabeled_text("Mina spoke .\n", "tagging") == [["Mina", "spoke", "."]]
    assert unlabeled_text("", "classification") == []
    with pytest.raises(DataError, match="^stdin: looks like CoNLL"):
        unlabeled_text("-DOCSTART- -X- O\n\nEU B-ORG\n", "tagging")
    with pytest.raises(DataError, match="^stdin: looks like CSV"):
        unlabeled_text("text,label\ngood,positive\n", "classification")
    with pytest.raises(DataError, match="^stdin:1: missing column 'text'"):
        unlabeled_text('{"review": "a"}\n', "classification")


def test_json_lines_with_a_note_or_a_cut_last_line_are_still_json_lines():
    """One line that is not JSON (a note, the end of a copy cut short) made the sniff call the whole input text,
    so every pseudo-label record became a text, braces and all; now the line is named."""
    noted = [*PSEUDO_LABELS[:2], "# checked by hand up to here\n", *PSEUDO_LABELS[2:] * 4]
    assert sniff_unlabeled("".join(noted).splitlines()) == ("JSON", "3")
    assert sniff_unlabeled(PSEUDO_LABELS[:3] + [PSEUDO_LABELS[3][:30]]) == ("JSON", "4")
    assert sniff_unlabeled(PSEUDO_LABELS) == ("JSON", "")
    with pytest.raises(DataError, match=re.escape("stdin:3: invalid JSON (Expecting value)")):
        unlabeled_text("".join(noted), "classification")
    with pytest.raises(DataError, match=re.escape("stdin:4: invalid JSON (")):
        unlabeled_text("".join(PSEUDO_LABELS[:3]) + PSEUDO_LABELS[3][:30], "classification")

@pytest.mark.parametrize("content, message", [(b"", "no examples (file is empty)"),
                                              (b"\n  \n\t\n", "no examples (every line is blank)")])
def test_unlabeled_text_without_examples_says_whether_it_is_empty(tmp_path, content, message):
    (tmp_path / "u.txt").write_bytes(content)
    with pytest.raises(DataError, match=re.escape(message)):
        list(iter_unlabeled(str(tmp_path / "u.txt"), "classification"))


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
    with pytest.raises(DistillError, match="'Arts/Film' is not one of the model's labels"):
        hierarchy.encode("Arts/Film", "dev.csv")


def test_inverse_class_weights_favour_rare_labels():
    hierarchy = LabelHierarchy.from_labels(["a", "a", "a", "b"])
    weights = hierarchy.class_weights("inverse")
    assert weights[1] == pytest.approx(3 * weights[0]) and sum(weights) == pytest.approx(2)
    with pytest.raises(DistillError, match="3 class weights given for 2 labels"):
        hierarchy.class_weights([1, 2, 3])


@pytest.mark.parametrize("weights, message", [
    ("13", "1 class weights given for 2 labels"),
    ("1,two", "class weights: use none, inverse, or comma-separated numbers in label order, not '1,two'"),
    ("1,nan", "class weights must be finite, >= 0 and not all 0"),
    (2, "not 2"), ([1, "2"], "not [1, '2']"), ([1, None], "not [1, None]"), ([True, 1], "not [True, 1]"),
    ([1, float("nan")], "class weights must be finite, >= 0 and not all 0"),
    ([1, float("inf")], "class weights must be finite, >= 0 and not all 0"),
    ([1, -0.5], "class weights must be finite, >= 0 and not all 0"),
    ([0, 0.0], "class weights must be finite, >= 0 and not all 0"),
])
def test_class_weights_are_one_number_per_label(weights, message):
    """A string was read character by character ("13": the weights 1 and 3; "1,2": a ValueError), and nan or all
    zeros passed; the API now reads and checks what the CLI's --class-weights does."""
    hierarchy = LabelHierarchy.from_labels(["a", "a", "b"])
    with pytest.raises(DistillError, match=re.escape(message)):
        hierarchy.class_weights(weights)
    assert hierarchy.class_weights((1, 2.5)) == hierarchy.class_weights("1,2.5") == [1.0, 2.5]  # the CLI's form too
    assert hierarchy.class_weights("none") is None


# Characters that str.splitlines() splits at, though they are no line break in a file, CSV or JSON
NOT_LINE_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_lines_are_split_at_line_breaks_only(tmp_path):
    """U+2028 and the like are text inside a line: distill's own pseudo-labels (json.dumps with
    ensure_ascii=False) write U+2028 raw, and a pasted line holding one is still one example."""
    texts = [f"great{char}film" for char in NOT_LINE_BREAKS]
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "label": "pos"}, ensure_ascii=False) + "\n" for t in texts)
                     + '{"text": "bad"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"l.jsonl:{len(texts) + 1}: missing column 'label'"):
        read_classification(str(jsonl))
    jsonl.write_text("".join(json.dumps({"text": t, "label": "pos"}, ensure_ascii=False) + "\n" for t in texts),
                     encoding="utf-8")
    assert read_classification(str(jsonl))["text"] == texts
    stdin = "\n".join(texts) + "\r\nbad film\rfine film\n"
    assert unlabeled_text(stdin, "classification") == [*texts, "bad film", "fine film"]
    assert len(unlabeled_text(stdin, "tagging")) == len(texts) + 2
    assert unlabeled_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                           "classification") == texts
    plain = tmp_path / "u.txt"
    plain.write_text("\n".join(texts) + "\n", encoding="utf-8", newline="")
    assert read_unlabeled(str(plain), "classification")["text"] == texts
    conll = tmp_path / "t.conll"
    conll.write_text("\x0cMina B-PER\nspoke O\n\nRain\u2028fell O\n", encoding="utf-8", newline="")
    with pytest.raises(DataError, match=r"t.conll:4: expected 2 fields like the first line, found 3: the line holds "
                                        r"U\+2028, a Unicode space"):
        read_tagging(str(conll))
    conll.write_text("-DOCSTART- O\n\nMina\u00a0Fox B-PER\nspoke O\n", encoding="utf-8", newline="")  # set the width
    with pytest.raises(DataError, match=r"t.conll:3: expected 3 fields like the first line, found 2: the first line "
                                        r"\(line 3\), not line 4, holds U\+00A0"):
        read_tagging(str(conll))
    for end in ("\u00a0", " \u00a0"):  # harmless at the end of the line (a StopIteration traceback after a space)
        conll.write_text(f"Mina B-PER{end}\nspoke O\n\nRain\nfell O\n", encoding="utf-8", newline="")
        with pytest.raises(DataError, match=r"t.conll:4: expected 2 fields like the first line \(line 1\), found 1$"):
            read_tagging(str(conll))
    conll.write_text("Mina\u2028 B-PER\nspoke O\n\nRain O\nfell O\n", encoding="utf-8", newline="")
    assert read_tagging(str(conll))["tokens"] == [["Mina", "spoke"], ["Rain", "fell"]]


@pytest.mark.parametrize("name, content, message", [
    ("c.jsonl", '{"text": "great film \\ud83d", "label": "positive"}',
     ":2: a lone UTF-16 surrogate (\\ud83d) in the text"),
    ("c.jsonl", '{"text": "great film", "label": "pos\\udc00"}', ":2: a lone UTF-16 surrogate (\\udc00) in the label"),
    ("c.json", '[{"text": "good", "label": "a"},\n {"text": "\\ud83d", "label": "b"}]',
     ":2: a lone UTF-16 surrogate (\\ud83d) in the text"),  # the line the array's item starts on
    ("t.jsonl", '{"tokens": ["Mina", "\\udc00x"], "tags": ["B-PER", "O"]}',
     ":2: a lone UTF-16 surrogate (\\udc00) in token 2"),
    ("t.jsonl", '{"tokens": ["Mina", "x"], "tags": ["B-PER", "O\\ud800"]}',
     ":2: a lone UTF-16 surrogate (\\ud800) in tag 2"),
    ("u.jsonl", '{"text": "great film \\ud83d"}', ":2: a lone UTF-16 surrogate (\\ud83d) in the text"),
    ("v.jsonl", '{"tokens": ["great", "\\ud83d"]}', ":2: a lone UTF-16 surrogate (\\ud83d) in token 2"),
    ("v.jsonl", '{"text": "great \\ud83d"}', ":2: a lone UTF-16 surrogate (\\ud83d) in token 2"),
])
def test_a_lone_surrogate_from_a_json_escape_is_refused_naming_file_and_line(tmp_path, name, content, message):
    """Half of a UTF-16 pair (an emoji cut in two) reads as JSON, then fails deep in Arrow or a tokenizer."""
    path = tmp_path / name
    path.write_text('{"text": "fine", "label": "a", "tokens": ["fine"], "tags": ["O"]}\n' * (name != "c.json")
                    + content + "\n", encoding="utf-8")
    read = {"c": read_classification, "t": read_tagging,
            "u": lambda p: read_unlabeled(p, "classification"), "v": lambda p: read_unlabeled(p, "tagging")}
    with pytest.raises(DataError, match=re.escape(f"{name}{message}: a truncated emoji? fix or drop that example")
                       + "$") as err:
        read[name[0]](str(path))
    assert "\n" not in str(err.value)
    if name[0] in "uv":
        with pytest.raises(DataError, match=re.escape(f"stdin{message}")):
            unlabeled_text(path.read_text(encoding="utf-8"), "classification" if name[0] == "u" else "tagging")
    with pytest.raises(DataError, match=re.escape("examples: a lone UTF-16 surrogate (\\ud83d) in example 1")):
        checked_examples("examples", "tagging" if name[0] in "tv" else "classification",
                         [["good"], ["x\ud83d"]] if name[0] in "tv" else ["good", "x\ud83d"])


def test_a_whole_surrogate_pair_is_an_emoji(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "great film \\ud83d\\ude00", "label": "positive"}\n', encoding="utf-8")
    assert read_classification(str(path))["text"] == ["great film \U0001F600"]


@pytest.mark.parametrize("token, message", [
    (None, "token 2 is null, not a word"), (True, "token 2 is true, not a word"),
    (["x"], "token 2 is a list, not a word"), ({"a": 1}, "token 2 is an object, not a word"),
    ("", "token 2 is empty"), ("   ", "token 2 is only whitespace ('   ')"),
    ("\u2028", "token 2 is only whitespace ('\\u2028')"),
])
def test_tagging_jsonl_tokens_must_be_words(tmp_path, token, message):
    """str(token) made null, true and ['x'] the words 'None', 'True' and "['x']"; an empty token failed later,
    without a file name. Labelled and unlabeled JSONL check tokens the same way."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"tokens": ["Port", "Halden"], "tags": ["B-LOC", "I-LOC"]}\n'
                    + json.dumps({"tokens": ["Mina", token, "spoke"], "tags": ["B-PER", "O", "O"]}) + "\n")
    with pytest.raises(DataError, match=re.escape(f"t.jsonl:2: {message}") + "$"):
        read_tagging(str(path))
    with pytest.raises(DataError, match=re.escape(f"t.jsonl:2: {message}") + "$"):
        read_unlabeled(str(path), "tagging")
    if isinstance(token, str):
        with pytest.raises(DataError, match="example 0 is not a non-empty list of tokens"):
            checked_examples("examples", "tagging", [["Mina", token, "spoke"]])


def test_tagging_tokens_that_are_numbers_read_as_their_text(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"tokens": ["won", 3, "to", 1.5], "tags": ["O", "O", "O", "O"]}\n')
    assert read_tagging(str(path))["tokens"] == [["won", "3", "to", "1.5"]]
    assert read_unlabeled(str(path), "tagging")["tokens"] == [["won", "3", "to", "1.5"]]


def test_the_held_out_check_names_the_set_the_model_learns_from(caplog):
    """kd checks its unlabeled data against dev as training checks its training data."""
    learned = Examples(["a fine film", "dull", "long and dull"], None, "unlabeled.txt")
    dev = Examples(["  a fine film ", "dull", "new"], ["pos", "neg", "neg"], "dev.csv")
    with pytest.raises(DataError) as err:
        check_held_out(learned, dev, "the unlabeled data")
    assert str(err.value) == ("dev.csv: 67% of its examples are also in the unlabeled data, so the best epoch would "
                              "be picked on examples the model learns from: give a held-out dev set")
    with pytest.raises(DataError) as err:
        check_held_out(learned, dev)
    assert str(err.value) == ("dev.csv: 67% of its examples are also in the training data, so the best epoch would "
                              "be picked on examples the model learns from: give a held-out dev set")
    check_held_out(learned, Examples(["dull", "b", "c", "d"], None, "memory:x", "dev"), "the unlabeled data")
    assert "warning: dev: 25% of its examples are also in the unlabeled data; its scores will read high" \
        in caplog.text


UD = ("# sent_id = 1\n# text = Mina spoke .\n1\tMina\tMina\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n"
      "2\tspoke\tspeak\tVERB\tVBD\t_\t0\troot\t_\t_\n3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_\n\n")


@pytest.mark.parametrize("name, content", [
    ("ud.conllu", UD),
    ("ud.conll", "\n".join(line for line in UD.split("\n") if not line.startswith("#"))),  # read its IDs as words
    ("ud.txt", UD.replace("1\tMina", "1-2\tMinas\t_\t_\t_\t_\t_\t_\t_\t_\n1\tMina")),  # a multiword token
    ("one.conllu", "1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"),
    ("first-one-word.txt", "1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_\n\n" + UD),  # seen in the next sentence
    ("one-word-each.txt", "1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_\n\n" * 2),
])
def test_conllu_is_refused_with_a_way_to_convert_it(tmp_path, name, content):
    """CoNLL-U's first field numbers the words: read as CoNLL, the numbers were the words (or its comment
    lines failed on their field counts)."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}: looks like CoNLL-U (a word's number, the word")) as err:
        read_tagging(str(path), tag_column=3)
    assert "\n" not in str(err.value) and "{print $2, $4}" in str(err.value)
    if not name.endswith(".conll"):  # .conll is refused as unlabeled input by its name
        for task in ("tagging", "classification"):
            with pytest.raises(DataError, match=re.escape(f"{path}: looks like CoNLL-U")):
                read_unlabeled(str(path), task)


def test_conll_whose_words_are_numbers_is_still_conll(tmp_path):
    path = tmp_path / "n.conll"
    path.write_text("-DOCSTART- O\n\n1 CD O\n2 CD O\n\n", encoding="utf-8")
    assert read_tagging(str(path))["tokens"] == [["1", "2"]]
    path.write_text("Scores CD O\n1 CD O\n2 CD O\n", encoding="utf-8")
    assert read_tagging(str(path))["tokens"] == [["Scores", "1", "2"]]
    path.write_text("1 CD O\n\n1 CD O\n2 CD O\n", encoding="utf-8")  # a one-word sentence "1", then 1 2
    assert read_tagging(str(path))["tokens"] == [["1"], ["1", "2"]]


def test_an_unclosed_csv_quote_is_reported_where_it_opens(tmp_path):
    """The csv module reads an unclosed quote to the end of the file and names its last line."""
    path = tmp_path / "q.csv"
    path.write_text('text,label\nok,pos\n\n"Great film,pos\nbad film,neg\nok film,pos\nmeh film,neg\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:4: a quote opened on this line runs to the end of the file "
                                                  "(line 7), leaving the row with the wrong number of fields")):
        read_classification(str(path))
    path.write_text('text,label\n"Great film,\nreally",pos\nbad film,neg\n')
    assert read_classification(str(path))["text"] == ["Great film,\nreally", "bad film"]
    path.write_text('text,label\n"Great film,\nreally",pos,extra\nbad film,neg\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:3: wrong number of fields (header has 2)")):
        read_classification(str(path))


class ClassLabelColumns(dict):
    """Columns as `labelled_examples` reads a `datasets.Dataset`, with an index past its ClassLabel's names
    (which `Dataset` itself refuses to hold)."""

    column_names = ["text", "label"]


def test_a_classlabel_index_that_names_no_class_is_refused(monkeypatch):
    """-1 is Hugging Face's "no label" (GLUE-style test splits): names[-1] read it as the last class, so `evaluate`
    scored against made-up gold labels and a dev set without labels picked epochs."""
    from datasets import ClassLabel, Dataset, Features, Sequence, Value
    names = ["negative", "positive"]
    texts = Dataset.from_dict({"text": ["good film", "bad film", "no label yet"], "label": [1, 0, -1]},
                              features=Features({"text": Value("string"), "label": ClassLabel(names=names)}))
    tags = Dataset.from_dict({"tokens": [["Mina", "spoke"], ["Rain", "fell", "today"]], "tags": [[1, 0], [0, 0, -1]]},
                             features=Features({"tokens": Sequence(Value("string")),
                                                "tags": Sequence(ClassLabel(names=["O", "B-PER"]))}))
    no_label = "(no label: a test split without gold labels?)"
    with pytest.raises(DataError, match=re.escape(f"data: example 2 has label -1 {no_label}") + "$"):
        labelled_examples(texts, "classification")
    with pytest.raises(DataError, match=re.escape(f"data: example 1 has tag -1 at position 2 {no_label}") + "$"):
        labelled_examples(tags, "tagging")
    assert labelled_examples(texts.select([0, 1]), "classification").labels == ["positive", "negative"]
    past = ClassLabelColumns(text=["good film"], label=[2])
    past.features = {"label": ClassLabel(names=names)}
    with pytest.raises(DataError, match=re.escape("data: example 0 has label 2, but its ClassLabel has only 2 names "
                                                  "(0 to 1)")):
        labelled_examples(past, "classification")
    monkeypatch.setattr("distill.data.hub.load_hub", lambda spec: texts if "text" in spec else tags)
    with pytest.raises(DataError, match=re.escape(f"hub:text:test: example 2 has label -1 {no_label}")):
        read_classification("hub:text:test")
    with pytest.raises(DataError, match=re.escape(f"hub:tags:test: example 1 has tag -1 at position 2 {no_label}")):
        read_tagging("hub:tags:test")


def test_a_local_hub_folder_is_read_with_the_checks_of_in_memory_data(tmp_path, monkeypatch):
    """`hub:PATH:SPLIT` reads a folder through `datasets.load_dataset`, which lets nulls and empty tokens through:
    a null token was a TypeError traceback, an empty one trained silently, a null tag became a class 'None'."""
    import datasets
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    rows = [{"tokens": ["Mina", "spoke"], "tags": ["B-PER", "O"]}, {"tokens": [None, "fell"], "tags": ["O", "O"]}]
    (tmp_path / "ner").mkdir()
    (tmp_path / "ner" / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = f"hub:{tmp_path / 'ner'}:train"
    with pytest.raises(DataError, match=re.escape(f"{spec}: example 1 is not a non-empty list of tokens (strings)")):
        read_tagging(spec)
    (tmp_path / "ner" / "train.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert read_tagging(spec)["tags"] == [["B-PER", "O"]]


def test_a_hub_tagging_split_without_a_tags_column_names_its_tag_columns(monkeypatch):
    """Hugging Face's conll2003 layout (pos_tags, chunk_tags, ner_tags) got "missing column 'tags'" alone."""
    from datasets import Dataset
    data = Dataset.from_dict({"tokens": [["Mina"]], "pos_tags": [[1]], "chunk_tags": [[2]], "ner_tags": [[3]]})
    monkeypatch.setattr("distill.data.hub.load_hub", lambda spec: data)
    with pytest.raises(DataError, match=re.escape("hub:conll2003:train: hub tagging data is read from the columns "
                                                  "'tokens' and 'tags'; this split has no 'tags' column (pos_tags, "
                                                  "chunk_tags, ner_tags): rename the one to train on")):
        read_tagging("hub:conll2003:train")


@pytest.mark.parametrize("tokens, tags, message", [
    (["", "fell"], ["O", "O"], "example 1 is not a non-empty list of tokens (strings)"),
    (["  ", "fell"], ["O", "O"], "example 1 is not a non-empty list of tokens (strings)"),
    (["Rain", "fell"], [None, "O"], "example 1 at position 0: tag in column 'tags' must be a string or a finite "
                                    "number, got None"),
    (["Rain", "fell"], ["O"], "example 1: expected one tag per token (2), got ['O']"),
])
def test_hub_tagging_rows_are_refused_as_in_memory_rows_are(monkeypatch, tokens, tags, message):
    from datasets import Dataset
    data = Dataset.from_dict({"tokens": [["Mina", "spoke"], tokens], "tags": [["B-PER", "O"], tags]})
    monkeypatch.setattr("distill.data.hub.load_hub", lambda spec: data)
    with pytest.raises(DataError, match=re.escape(f"hub:ner:train: {message}")):
        read_tagging("hub:ner:train")


@pytest.mark.parametrize("text, label, message", [
    (None, "neg", "example 1 is not a non-empty text"),
    ("   ", "neg", "example 1 is not a non-empty text"),
    ("bad film", None, "example 1: label in column 'label' must be a string or a finite number, got None"),
    ("bad film", " ", "example 1 has an empty label"),
])
def test_hub_classification_rows_name_the_row(monkeypatch, text, label, message):
    from datasets import Dataset
    data = Dataset.from_dict({"text": ["good film", text], "label": ["pos", label]})
    monkeypatch.setattr("distill.data.hub.load_hub", lambda spec: data)
    with pytest.raises(DataError, match=re.escape(f"hub:films:train: {message}")):
        read_classification("hub:films:train")


@pytest.mark.parametrize("tag", ["", "  "])
def test_an_empty_tag_is_refused_not_made_a_class(tmp_path, tag):
    """A CSV's empty label is refused; an empty JSONL or in-memory tag would have been a class '' of its own."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"tokens": ["Mina", "spoke"], "tags": ["B-PER", "O"]}) + "\n"
                    + json.dumps({"tokens": ["Rain", "fell"], "tags": ["O", tag]}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:2: tag 2 is empty or blank")):
        read_tagging(str(path))
    with pytest.raises(DataError, match="example 1 has an empty tag at position 1"):
        labelled_examples(([["Mina", "spoke"], ["Rain", "fell"]], [["B-PER", "O"], ["O", tag]]), "tagging")


def test_tags_are_read_without_surrounding_spaces(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"tokens": ["Mina", "spoke"], "tags": [" B-PER", "O "]}) + "\n", encoding="utf-8")
    assert read_tagging(str(path))["tags"] == [["B-PER", "O"]]


def test_kd_refuses_the_dev_set_as_its_unlabeled_text(tiny_classifier_teacher, tmp_path, capsys):
    """Taught the dev texts with the teacher's labels, the student would be picked on what it learnt."""
    import csv
    texts = [row["text"] for row in csv.DictReader(open(DEV, encoding="utf-8"))]
    dev_texts = write(tmp_path / "dev.txt", "\n".join(texts) + "\n")
    status, err = run_main(capsys, *kd_with(tiny_classifier_teacher, tmp_path / "kd", "--unlabeled", dev_texts))
    assert status == 2 and "100% of its examples are also in the unlabeled data" in err, err
    assert not (tmp_path / "kd").exists()


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
