"""Readers for labelled and unlabelled text; every reader returns a `datasets.Dataset`.

Classification rows have ``text`` and ``label``; tagging rows have ``tokens`` and ``tags``;
unlabelled rows have ``text`` (classification) or ``tokens`` (tagging). Errors name the file
and line so a user can fix the input.

`labelled_examples` and `unlabelled_examples` are what the Python API takes: a file path, a
`datasets.Dataset`, or examples in memory, checked the same way. (`datasets` is imported
where a reader needs it, so importing the package stays light.)
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import re
import shlex
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator, Sequence

from distill.errors import DataError, DistillError, option
from distill.labels import check_levels, shows_nothing as _invisible, split_tag

logger = logging.getLogger("distill")

if TYPE_CHECKING:
    import datasets

HUB_PREFIX = "hub:"
TASKS = ("classification", "tagging")
# Longer than any real sentence or review: such a "line" is a missing line break or a wrong file.
MAX_EXAMPLE_CHARS = 100_000


def _check_length(path: str, text: str, line: int | None) -> None:
    if len(text) > MAX_EXAMPLE_CHARS:
        raise DataError(path, f"example is {len(text):,} characters long, over the {MAX_EXAMPLE_CHARS:,} limit "
                              "(a missing line break?)", line)


def _characters(value: str) -> str:
    """The distinct characters of `value` by code point and name, for a message: 'U+00A0 NO-BREAK SPACE'."""
    chars = list(dict.fromkeys(value))
    named = ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'CONTROL CHARACTER')}" for char in chars[:3])
    return named + (", ..." if len(chars) > 3 else "")


def _check_visible(path: str, value: str, what: str, line: int | None) -> None:
    """The one rule for a text, a label or a tag: one that is not empty but shows nothing (a no-break space
    or a zero-width space alone) is refused, naming its characters, which no editor shows; plain blanks
    (ASCII spaces) keep their own messages. A word may show nothing: it is a word no sub-token reads
    (`distill.features`), which gets a tag and no loss; a Unicode space alone, which separates CoNLL
    fields as a space does, is named where it leaves a line a field short (`_unusual_space_note`)."""
    if value and not value.isascii() and _invisible(value):
        raise DataError(path, f"{what} is only {_characters(value)}, which shows nothing (pasted from a web page or "
                              "a word processor?): give it visible text, or remove it", line)


def _split_lines(text: str) -> list[str]:
    """Lines split at \\n, \\r\\n or \\r only, as a file read line by line and the csv module split them:
    `str.splitlines` also splits at U+2028, U+0085, \\x0c..., which are text within a line (json.dumps(...,
    ensure_ascii=False) writes U+2028 raw)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _surrogate_free(path: str, text: str, what: str, line: int | None) -> str:
    """A JSON escape can hold half of a UTF-16 pair (an emoji cut in two); no UTF-8 writer, tokenizer or
    Arrow table takes it, so it is refused here, where the file and line are known."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DataError(path, f"a lone UTF-16 surrogate (\\u{ord(text[err.start]):04x}) in {what}: a truncated emoji? "
                              "fix or drop that example", line) from None
    return text


def _json_words(path: str, tokens: list, line: int | None) -> list[str]:
    """The tokens of a JSON list as words: strings, or numbers read as their text; null, true, a list or an
    object is no word (str() would make it 'None', 'True' or "['x']"), nor is an empty or blank token."""
    words = []
    for position, token in enumerate(tokens, 1):
        if isinstance(token, bool) or not isinstance(token, (str, int, float)):
            kind = "null" if token is None else str(token).lower() if isinstance(token, bool) else \
                "a list" if isinstance(token, list) else "an object"
            raise DataError(path, f"token {position} is {kind}, not a word", line)
        word = str(token)
        if not word.strip():
            raise DataError(path, f"token {position} is empty" if not word else
                            f"token {position} is only whitespace ({word!r})", line)
        words.append(_surrogate_free(path, word, f"token {position}", line))
    return words


def _read_text(path: str | Path) -> str:
    """Read UTF-8 text; undecodable bytes become an error naming the line."""
    path = Path(path)
    if not path.exists():
        raise DataError(str(path), "file not found")
    if path.is_dir():
        raise DataError(str(path), "is a directory, expected a file")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(str(path), "file is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(str(path), f"not UTF-8 text (byte {raw[err.start]:#04x})", line) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise DataError(str(path), "binary data (NUL byte) in a text file", line)
    return text


def _json_kind(value: Any) -> str:
    """A JSON value's kind as the file's writer knows it ('a JSON object', not the reader's own `_Record`)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # null, true, false
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", _Record: "a JSON object", dict: "a JSON object"}.get(
        type(value), type(value).__name__)


class _Record(dict):
    """A JSON object as read, with the first field it names twice (`json` keeps the last value silently)."""

    twice: str | None = None


def _record(pairs: list[tuple[str, Any]]) -> _Record:
    record = _Record(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        record.twice = next(key for key, _ in pairs if key in seen or seen.add(key))
    return record


JSON = json.JSONDecoder(object_pairs_hook=_record)  # data files' JSON: a record's field named twice is an error


def _refuse_twice(path: str | Path, record: Any, number: int | None) -> Any:
    """A record (a top-level object: nested ones are not read) that names a field twice is refused."""
    if isinstance(record, _Record) and record.twice is not None:
        raise DataError(str(path), f"the record names the field {record.twice!r} twice (JSON would keep the last "
                                   "silently); keep one", number)
    return record


def _parsed(path: str | Path, line: str, number: int | None) -> Any:
    """One JSONL line (or JSON text), each error naming the file and line."""
    try:
        return _refuse_twice(path, JSON.decode(line), number)
    except json.JSONDecodeError as err:
        raise DataError(str(path), f"invalid JSON ({err.msg})", number) from None


def _json_lines(path: str | Path, text: str | None = None) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(_split_lines(_read_text(path) if text is None else text), 1):
        if not line.strip():
            continue
        record = _parsed(path, line, number)
        if not isinstance(record, dict):
            raise DataError(str(path), "each JSONL line must be an object", number)
        yield number, record


def _format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".conll": "conll",
            ".txt": "text"}.get(suffix, "")


TAGGING_FIELDS = ("tokens", "tags")


def _wrong_task(path: str, columns: list, task: str, line: int | None) -> None:
    """A JSONL record of the other task's shape: say so, rather than 'missing column'."""
    if task == "classification" and "text" not in columns and set(TAGGING_FIELDS) <= set(columns):
        raise DataError(path, "holds tagging data (tokens and tags), but this command or model classifies "
                              "texts: give it texts (a text field, and a label where the command needs one)", line)
    if task == "tagging" and "tokens" not in columns and "text" in columns and "label" in columns:
        raise DataError(path, "holds classification data (text and label), but this command or model tags "
                              "words: give it token lists (CoNLL or JSONL with tokens, and tags where the command "
                              "needs them)", line)


def _json_records(path: str | Path) -> Iterator[tuple[int, dict]]:
    """JSONL records, or the objects of a JSON array file (pandas' to_json(orient='records'))."""
    text = _read_text(path)
    if Path(path).suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            items = list(_json_array_items(text))
        except json.JSONDecodeError as err:
            raise DataError(str(path), f"invalid JSON ({err.msg})", err.lineno) from None
        own_lines = all(a[0] < b[0] for a, b in zip(items, items[1:]))  # else a line would name several items
        for index, (line, record) in enumerate(items, 1):
            line = line if own_lines else None
            if not isinstance(record, dict):
                raise DataError(str(path), f"item {index} of the JSON array is not an object", line)
            yield line, _refuse_twice(path, record, line)
        return
    yield from _json_lines(path, text)


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_array_items(text: str) -> Iterator[tuple[int, Any]]:
    """The items of the JSON array `text` is, each with the line it starts on, so an error names it as a
    JSONL file's would; raises `json.JSONDecodeError` as `json.loads` does."""
    position = _JSON_SPACE.match(text).end()
    if not text.startswith("[", position):
        raise json.JSONDecodeError("Expecting value", text, position)
    position = _JSON_SPACE.match(text, position + 1).end()
    if text.startswith("]", position):
        position += 1
    else:
        line, counted = 1, 0  # lines are counted on from the last item: linear in the file's size
        while True:
            item, end = JSON.raw_decode(text, position)
            line, counted = line + text.count("\n", counted, position), position
            yield line, item
            position = _JSON_SPACE.match(text, end).end()
            if text.startswith("]", position):
                position += 1
                break
            if not text.startswith(",", position):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
            position = _JSON_SPACE.match(text, position + 1).end()
    if _JSON_SPACE.match(text, position).end() != len(text):
        raise json.JSONDecodeError("Extra data", text, _JSON_SPACE.match(text, position).end())


def _parse_hub(spec: str) -> tuple[str, str | None, str]:
    """``hub:NAME[:CONFIG]:SPLIT`` -> (name, config, split)."""
    parts = spec[len(HUB_PREFIX):].split(":")
    if len(parts) == 2:
        return parts[0], None, parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise DistillError(f"{spec}: hub datasets are written hub:NAME[:CONFIG]:SPLIT, e.g. hub:conll2003:train")


def load_hub(spec: str) -> datasets.Dataset:
    import datasets
    name, config, split = _parse_hub(spec)
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as err:  # the hub raises many types; the user needs one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DistillError(f"{spec}: cannot load hub dataset ({first}); offline, use a local file") from None


def _hub_examples(spec: str, task: str, example_column: str, label_column: str | None,
                  separator: str | None = None) -> tuple[list, list]:
    """A hub split's examples and labels (none if `label_column` is None), checked as a `datasets.Dataset` given
    in memory is: a hub column may hold nulls, empty or blank strings, which no file reader lets through."""
    data = load_hub(spec)
    if task == "tagging" and label_column is not None and label_column not in data.column_names:
        found = [column for column in data.column_names if column.endswith("tags")]
        raise DataError(spec, f"hub tagging data is read from the columns {example_column!r} and {label_column!r}; "
                              f"this split has no {label_column!r} column ({', '.join(found) or 'no tag columns'}"
                              f"): rename the one to train on to {label_column!r} with the datasets library, or "
                              "export the split as CoNLL")
    _require_columns(spec, data.column_names, [example_column] + ([label_column] if label_column else []))
    inputs = checked_examples(spec, task, list(data[example_column]))
    if label_column is None:
        return inputs, []
    feature = data.features[label_column]
    names = getattr(getattr(feature, "feature", feature), "names", None)  # a ClassLabel, or a sequence of them
    return inputs, _check_labels(spec, task, inputs, list(data[label_column]), names, separator, label_column)


def _require_columns(path: str, columns: list[str], wanted: list[str], line: int | None = None) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise DataError(path, f"missing column {missing[0]!r} (columns: {', '.join(map(str, columns))})", line)


def _delimited_rows(path: str, fmt: str, wanted: list[str]) -> list[tuple[int, dict]]:
    """CSV or TSV rows as (line, record). TSV is read without quote handling (a quote is text there,
    as in GLUE-style files), so quotes inside a text never swallow tabs or lines. Rows whose fields
    are all empty (a spreadsheet's padding) are skipped; duplicate column names are an error."""
    delimiter = "," if fmt == "csv" else "\t"
    quoting = csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE
    text = _read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
    rows = []
    try:
        header = [name.strip() for name in reader.fieldnames or []]  # " text" from a spreadsheet is "text"
        reader.fieldnames = header
        named = [name for name in header if name.strip()]
        duplicate = next((name for name in named if named.count(name) > 1), None)
        if duplicate is not None:
            raise DataError(path, f"column {duplicate!r} appears twice in the header; rename one", 1)
        if len(header) == 1 and any(sep in header[0] for sep in ";\t,|"):
            used = next(sep for sep in ";\t,|" if sep in header[0])
            if used == delimiter:  # "text,label" quoted whole: the csv module reads one field
                raise DataError(path, f"the header is one quoted field, {header[0]!r}: each line seems to be quoted "
                                      "whole; remove the quotes around each line", 1)
            raise DataError(path, f"the header has one column, {header[0]!r}: the file seems to be separated by "
                                  f"{used!r}, not {delimiter!r}; save it as {'TSV' if used == chr(9) else 'CSV'} "
                                  "with the right extension", 1)
        _wrong_task(path, header, "classification", 1)
        _require_columns(path, header, wanted, 1)
        previous = reader.line_num
        for record in reader:
            first, previous = previous + 1, reader.line_num
            fields = [v for key, value in record.items() for v in (value if key is None else [value])]
            if all(not (field or "").strip() for field in fields):
                continue
            if [(field or "").strip().lstrip("\ufeff") for field in fields] == header:
                raise DataError(path, "repeats the header row (files joined with cat?): remove it, or it would be "
                                      "read as an example", first)
            if None in record or any(record.get(c) is None for c in wanted):
                opened = _unclosed_quote(text, first, reader.line_num) if fmt == "csv" else None
                if opened is not None:
                    raise DataError(path, f"a quote opened on this line runs to the end of the file (line "
                                          f"{reader.line_num}), leaving the row with the wrong number of fields: close "
                                          'it, or write a quote that is part of the text twice ("")', opened)
                raise DataError(path, f"wrong number of fields (header has {len(header)})", reader.line_num)
            rows.append((reader.line_num, record))
    except csv.Error as err:
        raise DataError(path, f"malformed {fmt.upper()} ({err})", reader.line_num + 1) from None
    return rows


def _unclosed_quote(text: str, first: int, last: int) -> int | None:
    """Where a CSV row from line `first` to `last` opened the quote that swallowed every later line, when the
    row spans lines and ends the file (the csv module names only its last line); else None."""
    lines = _split_lines(text)
    if last == first or any(line.strip() for line in lines[last:]):
        return None
    return next((number for number in range(first, last + 1) if lines[number - 1].count('"') % 2), None)


def _label_text(path: str, value, column: str | None, line: int | None, separator: str | None = None,
                kind: str = "label") -> str:
    """A label (or with `kind` a tag) as text: strings and finite numbers (1 and "1" are the same label); never
    a list or object, nor one that shows nothing; with the `separator` of the hierarchy it will build, a path
    of named levels. `column`: where a file or dataset holds it; None for labels given in a list, which has
    no columns."""
    named = f"{kind} in column {column!r}" if column is not None else kind
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or \
            (isinstance(value, float) and not math.isfinite(value)):
        raise DataError(path, f"{named} must be a string or a finite number, got {value!r}", line)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 from a spreadsheet export is the label 1
    if isinstance(value, str):
        _check_visible(path, value, f"the {named}", line)
    text = _surrogate_free(path, str(value).strip(), "the label", line)
    check_levels(path, text, separator, line)
    return text


def _class_name(where: str, names: Sequence[str], index: int, row: int, position: int | None = None) -> str:
    """The name of a `datasets` ClassLabel index. -1 is Hugging Face's "no label" (the labels of a test split
    withheld): ``names[-1]`` would read it, or any index below 0, as the last class and score against made-up gold
    labels; an index past the names is no class either."""
    if 0 <= index < len(names):
        return names[index]
    what, at = ("label", "") if position is None else ("tag", f" at position {position}")
    if index < 0:
        raise DataError(where, f"example {row} has {what} {index}{at} (no label: a test split without gold labels?)")
    raise DataError(where, f"example {row} has {what} {index}{at}, but its ClassLabel has only {len(names)} names "
                           f"(0 to {len(names) - 1})")


def _is_index(value: Any) -> bool:
    """An integer class index (a bool is no index: True would be class 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse_unnamed_format(path: str) -> None:
    """A classification file whose name gives no format: if its content shows one, say which fits."""
    found = sniff_format(_read_text(path))
    if found == "CoNLL":
        raise DataError(path, "looks like CoNLL (tagging data: a word and its tag per line), but this command or "
                              "model classifies texts: use .csv, .tsv or .jsonl with text and label")
    if found is not None:
        extension = ".jsonl" if found == "JSON" else f".{found.lower()}"
        raise DataError(path, f"looks like {found}, but its name does not say so: name it {extension} (the "
                              "extension decides how a file is read)")


def _record_text(path: str, text: Any, where: str, line: int | None) -> str:
    """The text of a record (in column or field `where`): a string that shows something, within the length limit,
    with no lone surrogate; else an error naming the file and line."""
    if isinstance(text, str):
        _check_visible(path, text, f"the text in {where}", line)
    if not isinstance(text, str) or not text.strip():
        raise DataError(path, f"empty or non-text value in {where}", line)
    _check_length(path, text, line)
    return _surrogate_free(path, text, "the text", line)


def _classification_file(path: str, text_column: str, label_column: str, labelled: bool,
                         separator: str | None = None) -> tuple[list[str], list[str]]:
    """The texts and labels (none unless `labelled`) of a CSV, TSV or JSONL file, each error naming its line;
    labels are paths of named levels at `separator` (`distill.labels.check_levels`) where it is given."""
    wanted = [text_column, label_column] if labelled else [text_column]
    fmt = _format(path)
    if fmt in ("csv", "tsv"):
        rows = _delimited_rows(path, fmt, wanted)
    elif fmt == "jsonl":
        rows = list(_json_records(path))
        for number, record in rows:
            _wrong_task(path, list(record), "classification", number)
            _require_columns(path, list(record), wanted, number)
    elif fmt == "conll":
        raise DataError(path, "is CoNLL (tagging data), but this command or model classifies texts: "
                              "use .csv, .tsv or .jsonl with text and label")
    else:
        _refuse_unnamed_format(path)
        raise DataError(path, "unknown format: use .csv, .tsv or .jsonl for classification")
    texts, labels = [], []
    for number, record in rows:
        texts.append(_record_text(path, record[text_column], f"column {text_column!r}", number))
        if labelled:
            label = record[label_column]
            if isinstance(label, str):
                _check_visible(path, label, f"the label in column {label_column!r}", number)
            if label is None or str(label).strip() == "":
                raise DataError(path, f"empty label in column {label_column!r}", number)
            labels.append(_label_text(path, label, label_column, number, separator))
    return texts, labels


def read_classification(path: str, text_column: str = "text", label_column: str = "label",
                        labelled: bool = True, separator: str | None = None) -> datasets.Dataset:
    """Read CSV, TSV or JSONL (or a hub dataset) into rows of ``text`` and ``label``; given the `separator`
    of the label hierarchy they will build, labels with an empty level are refused."""
    import datasets
    if path.startswith(HUB_PREFIX):
        texts, labels = _hub_examples(path, "classification", text_column, label_column if labelled else None,
                                      separator)
    else:
        texts, labels = _classification_file(path, text_column, label_column, labelled, separator)
    if not texts:
        raise DataError(path, "no examples")
    columns = {"text": texts, "label": labels} if labelled else {"text": texts}
    return datasets.Dataset.from_dict(columns)


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), (dict, list))
    except json.JSONDecodeError:
        return False


def sniff_format(text: str) -> str | None:
    """What a file's content looks like, whatever its name: ``JSON``, ``CoNLL`` (the same number of
    space-separated fields on every line), ``CSV`` or ``TSV`` (a header, then rows of as many
    fields), or None. Only used to say which format fits when a file fails to read as another."""
    lines = [line for line in _split_lines(text)[:50] if line.strip()]
    if not lines:
        return None
    if lines[0].strip() in ("[", "{") or lines[0].lstrip()[:1] in ("{", "[") and _is_json(lines[0]):
        return "JSON"
    if len({len(line.split()) for line in lines}) == 1 and len(lines[0].split()) > 1:
        return "CoNLL"
    for name, delimiter in (("TSV", "\t"), ("CSV", ",")):
        if delimiter in lines[0]:
            quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL  # as `_delimited_rows` reads
            rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter, quoting=quoting))[:-1] or [[]]
            if len(rows[0]) > 1 and all(len(row) == len(rows[0]) for row in rows):  # the last row may be cut
                return name
    return None


def _refuse_table_as_conll(path: str, text: str) -> None:
    """A file read as CoNLL (by its name) that is CSV, TSV or JSON: say so, rather than fail on its field
    counts or, for JSON lines of equal width, read garbage tags."""
    found = sniff_format(text)
    if found == "JSON":
        raise DataError(path, "looks like JSON, but its name does not end in .jsonl or .json: name it so "
                              "(tagging data: JSONL with tokens and tags)")
    if found in ("CSV", "TSV"):
        raise DataError(path, f"looks like {found} (a header, then a text and a label per row: classification "
                              "data), but this command or model tags words: give it CoNLL columns (a word and its "
                              "tag per line) or JSONL with tokens and tags")


_CONLLU_SKIPPED_ID = re.compile(r"\d+[-.]\d+")  # a multiword token's range (1-2) or an empty node (8.1)


def _is_conllu(lines: Iterable[str], separator: str | None = None) -> bool:
    """Whether lines are CoNLL-U (Universal Dependencies): after '#' comment lines, each sentence numbers
    its words 1, 2, 3... in the first of three or more fields (split at `separator`, by default at any
    space), until a sentence of two or more words shows it. No CoNLL sentence starts so; `cat -n` text has
    one tab, where CoNLL-U separates by tabs. One-word sentences ("1", then the word) say it only in
    numbers: two of them with CoNLL-U's ten fields do too."""
    count = one_word = 0
    for line in lines:
        if not line.strip():
            if count >= 2:
                return True
            one_word += count
            count = 0
            continue
        fields = line.strip().split(separator)
        if (count == 0 and fields[0].startswith("#")) or _CONLLU_SKIPPED_ID.fullmatch(fields[0]):
            continue
        if len(fields) < 3 or fields[0] != str(count + 1) or (count == 0 and one_word and len(fields) != 10):
            return False
        count += 1
    return count >= 2 or one_word + count >= 2


def _refuse_conllu(path: str, lines: list[str]) -> None:
    """CoNLL-U read as CoNLL would take each word's number for the word (and fail on its comment lines)."""
    if Path(path).suffix.lower() == ".conllu" or _is_conllu(lines):
        converted = shlex.quote(str(Path(path).with_suffix(".tags.conll")))
        raise DataError(path, "looks like CoNLL-U (a word's number, the word, then its annotations per line; '#' "
                              "comment lines), which distill does not read: as CoNLL, the numbers would be taken for "
                              "the words. Keep the word and a tag column, e.g. awk -F'\\t' -v OFS='\\t' '!/^#/ && $1 "
                              f"!~ /[.-]/ {{print $2, $4}}' {shlex.quote(path)} > {converted} (field 4 is the UPOS "
                              "tag, 5 XPOS)")


def _conll_sentences(path: str, tag_column: int) -> Iterator[tuple[int, list[str], list[str]]]:
    tokens: list[str] = []
    tags: list[str] = []
    start = width = None
    text = _read_text(path)
    lines = _split_lines(text)
    _refuse_conllu(path, lines)
    _refuse_table_as_conll(path, text)
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if tokens:
                yield start, tokens, tags
            tokens, tags = [], []
            continue
        if width is None:
            width, first = len(fields), (number, line)
            if not -width <= tag_column < width:
                raise DataError(path, f"tag column {tag_column} does not exist: lines have {width} fields"
                                      f"{_unusual_space_note(line) or _invisible_line_note(line)}", number)
            if tag_column % width == 0:  # the word itself: its "tags" would be the words
                raise DataError(path, f"tag column {tag_column} is the word itself (lines have {width} field"
                                      f"{'s' if width > 1 else ''}); a labelled CoNLL line is the word, then "
                                      f"its tag(s){_unusual_space_note(line) or _invisible_line_note(line)}", number)
        if len(fields) != width:
            for culprit, text in ((number, line), first):  # this line, or the one that set the width
                note = _unusual_space_note(text, "the line" if culprit == number else
                                           f"the first line (line {culprit}), not line {number},",
                                           lacking=culprit == number and len(fields) < width)
                if note:
                    raise DataError(path, f"expected {width} fields like the first line, found {len(fields)}{note}",
                                    culprit)
            raise DataError(path, f"expected {width} fields like the first line (line {first[0]}), found "
                                  f"{len(fields)}{_invisible_line_note(line)}", number)
        if not tokens:
            start = number
        if not line.isascii():  # a tag of a zero-width space alone: a class no one sees
            _check_visible(path, fields[tag_column], "the tag", number)
        tokens.append(fields[0])
        tags.append(fields[tag_column])
    if tokens:
        yield start, tokens, tags


def _invisible_line_note(line: str) -> str:
    """Why a line that looks blank is not one, as ': the line is only ...' for a message, or '': it holds
    only characters that show nothing (U+200B ZERO WIDTH SPACE, U+FEFF...) but are not spaces, so it is
    read as a line of one word, not as the blank line that ends a sentence."""
    if not _invisible(line) or not line.split():
        return ""
    return (f": the line is only {_characters(''.join(line.split()))}, which shows nothing in an editor but is "
            "not a space, so it is not the blank line that ends a sentence: remove those characters")


def _unusual_space_note(line: str, where: str = "the line", lacking: bool = False) -> str:
    """Why `line` has other fields than its spaces and tabs show, as ': `where` holds ...' for a message, or
    '': a Unicode space (U+00A0, U+2028...) inside a field splits it in two, and a field that is only Unicode
    spaces (a no-break space written as a word) is no field at all. Such spaces at either end of a field
    change nothing, nor do they after the line's last field, unless the line is `lacking` a field: then any
    of them may be the field it lacks."""
    fields = [field for field in re.split(r"[ \t\r]+", line) if field]
    for field in fields:
        inner = next((char for char in field.strip() if char.isspace()), None)
        if inner is not None:
            return (f": {where} holds U+{ord(inner):04X}, a Unicode space that also separates fields and hardly "
                    "shows in an editor: remove it")
    visible = [position for position, field in enumerate(fields) if not field.isspace()]
    lone = next((field for field in fields[:visible[-1] if visible else 0] if field.isspace()), None)
    if lone is None and lacking:
        lone = next((char for char in line if char.isspace() and char not in " \t\r\n"), None)
    if lone is None:
        return ""
    return (f": {where} holds {_characters(lone)}, a Unicode space, read as a separator, not a field, that hardly "
            "shows in an editor: write the word or tag it stands for, or remove it")


def check_tag_scheme(path: str, tags_per_sentence: list[list[str]]) -> None:
    """IOB tags and plain tags must not be mixed in one file (a sign of a wrong column)."""
    tags = {t for sentence in tags_per_sentence for t in sentence} - {"O", "o"}
    prefixed = {t for t in tags if split_tag(t)[0] is not None}
    if prefixed and prefixed != tags:
        plain = sorted(tags - prefixed)[:3]
        raise DataError(path, f"mixed tagging schemes: IOB tags like {sorted(prefixed)[0]!r} beside plain "
                              f"tags like {plain}; choose one scheme or another "
                              f"{option('--tag-column', 'DataOptions(tag_column=...)')}")


def read_tagging(path: str, tag_column: int = -1, tokens_field: str = "tokens",
                 tags_field: str = "tags") -> datasets.Dataset:
    """Read CoNLL columns (blank lines between sentences, ``-DOCSTART-`` skipped) or JSONL."""
    import datasets
    if path.startswith(HUB_PREFIX):
        tokens, tags = _hub_examples(path, "tagging", tokens_field, tags_field)
        lines = [None] * len(tokens)
    elif _format(path) in ("csv", "tsv"):
        raise DataError(path, f"is {_format(path).upper()} (classification data), but this command or model tags "
                              "words: use CoNLL columns or JSONL with tokens and tags")
    elif _format(path) == "jsonl":
        tokens, tags, lines = [], [], []
        for number, record in _json_records(path):
            _wrong_task(path, list(record), "tagging", number)
            _require_columns(path, list(record), [tokens_field, tags_field], number)
            if not isinstance(record[tokens_field], list) or not isinstance(record[tags_field], list):
                raise DataError(path, f"{tokens_field!r} and {tags_field!r} must be lists, one tag per token", number)
            if len(record[tokens_field]) != len(record[tags_field]):
                raise DataError(path, "tokens and tags differ in length", number)
            if not record[tokens_field]:
                raise DataError(path, "empty token list", number)
            if not all(isinstance(t, (str, int)) and not isinstance(t, bool) for t in record[tags_field]):
                raise DataError(path, f"{tags_field!r} must hold strings (or integer ids), one per token", number)
            tokens.append(_json_words(path, record[tokens_field], number))
            for position, t in enumerate(record[tags_field], 1):
                _check_visible(path, str(t), f"tag {position}", number)
            tags.append([_surrogate_free(path, str(t).strip(), f"tag {position}", number)
                         for position, t in enumerate(record[tags_field], 1)])
            if not all(tags[-1]):  # "" would become a class of its own, as a CSV's empty label is refused
                raise DataError(path, f"tag {tags[-1].index('') + 1} is empty or blank", number)
            lines.append(number)
    else:
        tokens, tags, lines = [], [], []
        for start, words, labels in _conll_sentences(path, tag_column):
            tokens.append(words)
            tags.append(labels)
            lines.append(start)
    if not tokens:
        raise DataError(path, "no sentences")
    for line, words in zip(lines, tokens):  # students read whole sentences: bound their memory
        _check_length(path, " ".join(map(str, words)), line)
    check_tag_scheme(path, tags)
    return datasets.Dataset.from_dict({"tokens": tokens, "tags": tags})


# Unlabelled input named as plain text is read one example per line; its first lines are sniffed first,
# so a labelled file under a .txt name (CoNLL-2003's own files are train.txt) is refused, not read as texts.
UNLABELLED_SNIFF_LINES = 50
_SNIFF_LINE_BYTES = 4 * MAX_EXAMPLE_CHARS + 4  # a longer line is left to the reader's length check
_TAG = re.compile(r"O|[BIESLU]-\S+", re.IGNORECASE)
_HEADER_NAMES = ("text", "tokens", "label", "labels", "tags")
JSON_LINES_SHARE = 0.8  # the share of JSON objects among the first lines that makes them JSON lines


# The first line of a JSON document written over several lines: an array of objects, or an object's first key
_JSON_DOCUMENT_START = re.compile(r'\[\s*\{|\{\s*"[^"]*"\s*:')


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _header(line: str, delimiter: str, names: set[str]) -> list[str] | None:
    """The fields of a CSV (or TSV) header line: two or more one-word fields, one of them a column name
    a data file uses (``text``, ``tokens``, ``label``...); None for a line of text."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL  # as `_delimited_rows` reads
    try:
        fields = [field.strip() for field in next(csv.reader([line], delimiter=delimiter, quoting=quoting))]
    except (csv.Error, StopIteration):
        return None
    if len(fields) < 2 or any(len(field.split()) > 1 for field in fields) or \
            not any(field.lower() in names for field in fields):
        return None
    return fields


def _mostly_json(objects: list[bool]) -> bool:
    """Whether lines, each a JSON object or not, are JSON lines: every one is, or at least two are and so is
    every line but the last or `JSON_LINES_SHARE` of them. A note line or a copy cut short mid-line must not
    turn JSON records into texts; one JSON-looking line beside a line of text is text."""
    count = sum(objects)
    return all(objects) or count >= 2 and (count >= JSON_LINES_SHARE * len(objects) or all(objects[:-1]))


def sniff_unlabelled(lines: Iterable[str], text_column: str = "text",
                     tokens_field: str = "tokens") -> tuple[str, str] | None:
    """What the first lines of unlabelled text (a file named as plain text, or stdin) look like, when not
    one example per line: ``("CoNLL", "")``, ``("JSON", "")`` (JSON lines; the second item is the number of
    the first line that is no JSON object, if one is), ``("JSON document", "")`` or ``("CSV"/"TSV",
    header)``, ``("CoNLL-U", "")``; None for text.

    Only the first `UNLABELLED_SNIFF_LINES` non-blank lines are read. CoNLL: the first word is
    ``-DOCSTART-``, or at least 80% of the lines have the same number (two or more) of fields, the last a
    tag (``O``, ``B-X``, ``I-X``...), with a blank line between sentences or at least three such lines.
    JSON: the lines are JSON objects, bar a few (`_mostly_json`); a JSON document: the first line is "{" or
    "[", or opens an array of objects or an object's first key without closing it. CSV/TSV: the first line
    is a header of one-word fields, one of them ``text``, ``tokens``, ``label`` or ``tags``. CoNLL-U:
    `_is_conllu`, its fields separated by tabs. Sentences with commas, a sentence starting with "{",
    tokenised text ("Mina spoke ."), numbered lines and a text that is the word "O" are text."""
    found: list[str] = []
    numbers: list[int] = []  # the line number of each found line
    read: list[str] = []  # blank lines included: they end a CoNLL-U sentence
    separated = blank = False
    for line in lines:
        read.append(line)
        if not line.strip():
            blank = bool(found)
            continue
        separated = separated or blank
        blank = False
        found.append(line.strip())
        numbers.append(len(read))
        if len(found) >= UNLABELLED_SNIFF_LINES:
            break
    if not found:
        return None
    if found[0].split()[0] == "-DOCSTART-":
        return "CoNLL", ""
    if _is_conllu(read, "\t"):
        return "CoNLL-U", ""
    widths = Counter(len(fields) for fields in map(str.split, found)
                     if len(fields) >= 2 and _TAG.fullmatch(fields[-1]))
    if widths:
        tagged = widths.most_common(1)[0][1]
        if tagged >= 0.8 * len(found) and (tagged >= 3 or separated and tagged >= 2):
            return "CoNLL", ""
    objects = [line[0] == "{" and _is_json_object(line) for line in found]
    if _mostly_json(objects):
        return "JSON", next((str(number) for number, is_object in zip(numbers, objects) if not is_object), "")
    if found[0] in ("{", "[") or _JSON_DOCUMENT_START.match(found[0]) and not _is_json_object(found[0]):
        return "JSON document", ""
    names = {*_HEADER_NAMES, text_column.lower(), tokens_field.lower()}
    for kind, delimiter in (("TSV", "\t"), ("CSV", ",")):
        if delimiter in found[0] and _header(found[0], delimiter, names):
            return kind, found[0]
    quoted = any(len(line) > 1 and line[0] == line[-1] == '"' for line in found[1:])
    if quoted and found[0].lower() in {"text", "tokens", text_column.lower(), tokens_field.lower()}:
        return "CSV", found[0]  # a one-column CSV (df[["text"]].to_csv()): its header, then rows in CSV quotes
    return None


def _refuse_unlabelled_format(path: str, sniffed: tuple[str, str] | None, task: str,
                              tokens_field: str = "tokens", text_column: str = "text") -> None:
    """Refuse labelled (or JSON) content read as unlabelled lines: each line would become one example."""
    if sniffed is None:
        return
    kind, detail = sniffed  # CSV/TSV: the header; JSON: the number of a line not JSON
    field = text_column if task == "classification" else tokens_field
    if kind == "CoNLL":
        raise DataError(path, "looks like CoNLL (a word and its tag per line: labelled tagging data), so read as "
                              "plain text each line would be one example: unlabelled text is one example per line "
                              f"(tagging: space-separated tokens) or JSONL with a {field} field")
    if kind == "CoNLL-U":
        raise DataError(path, "looks like CoNLL-U (a word's number, the word, then its annotations per line: "
                              "labelled data), so read as plain text each line would be one example: unlabelled "
                              f"text is one example per line (tagging: space-separated tokens) or JSONL with a {field} "
                              "field")
    if kind in ("CSV", "TSV"):
        raise DataError(path, f"looks like {kind} (a header, {detail[:60]!r}, then rows), so read as plain text its "
                              "header and labels would be examples: unlabelled text is one example per line "
                              f"(tagging: space-separated tokens) or JSONL with a {field} field; export the "
                              "text column")
    if kind == "JSON document":
        raise DataError(path, "looks like a JSON document (an object or an array written over several lines), so "
                              "read as plain text each line would be one example: an array of objects (one per "
                              f"example, each with a {field} field) is read from a .json file, JSON lines from a "
                              ".jsonl file")
    if detail:
        raise DataError(path, f"looks like JSON lines, but its name does not end in .jsonl, and its line {detail} is "
                              "no JSON object (a note, or a line cut short?): remove or fix that line and name the "
                              "file .jsonl (the extension decides how a file is read)")
    raise DataError(path, "looks like JSON lines, but its name does not end in .jsonl: name it .jsonl (the "
                          "extension decides how a file is read)")


def _raw_lines(raw: bytes) -> list[bytes]:
    """The lines in `raw`, a binary file's line as iterating the file gives it (up to \\n): cut at \\r too, and
    without their line ends, so old Mac (\\r) files split as `_split_lines` splits text."""
    body = raw[:-1] if raw.endswith(b"\n") else raw
    return (body[:-1] if raw.endswith(b"\r\n") else body).split(b"\r")


def _head_lines(handle: BinaryIO) -> Iterator[str]:
    """A binary file's lines, decoded leniently, for sniffing; stops at a line too long to be an example."""
    first = True
    while raw := handle.readline(_SNIFF_LINE_BYTES):
        cut = len(raw) >= _SNIFF_LINE_BYTES and not raw.endswith(b"\n")
        for line in _raw_lines(raw)[:-1] if cut else _raw_lines(raw):  # a cut one's last line goes on
            yield line.decode("utf-8-sig" if first else "utf-8", errors="replace")
            first = False
        if cut:
            return


def _unlabelled_values(path: str, lines: Iterable[tuple[int, str]], task: str, is_jsonl: bool,
                       text_column: str, tokens_field: str) -> Iterator[tuple[int, object]]:
    """(line number, example) from numbered lines of plain text or JSONL. Blank lines are skipped, by the one
    rule for what shows nothing (`_invisible`): a line of spaces, of U+00A0 or U+3000, and one of U+200B or
    U+FEFF alike, which no editor tells apart (line numbers stay those of the file). A JSONL text that shows
    nothing is refused with its line, as an empty one is. `pseudo-label` output is read by the fields it writes (``text``/``tokens``) whatever the column
    options, which name the labelled data's: it goes to `kd --unlabeled` as it is."""
    named = text_column if task == "classification" else tokens_field
    for number, line in lines:
        if "\x00" in line:
            raise DataError(path, "binary data (NUL byte) in a text file", number)
        if _invisible(line):
            continue
        if is_jsonl:
            record = _parsed(path, line, number)
            if not isinstance(record, dict):
                raise DataError(path, "each JSONL line must be an object", number)
            field = PSEUDO_LABEL_FIELDS[task] if named not in record and _is_pseudo_label(record) else named
            if field not in record and task == "tagging" and text_column in record:
                value = record[text_column]
                if not isinstance(value, str):
                    raise DataError(path, f"{text_column!r} must be a text (a string), got {_json_kind(value)}",
                                    number)
                value = value.split()
            else:
                _wrong_task(path, list(record), task, number)
                _require_columns(path, list(record), [field], number)
                value = record[field]
            if not value or (isinstance(value, str) and not value.strip()):
                raise DataError(path, f"empty {field!r}", number)
            if task == "tagging":
                if not isinstance(value, list):
                    raise DataError(path, f"{field!r} must be a list of tokens", number)
                value = _json_words(path, value, number)
            elif not isinstance(value, str):
                raise DataError(path, f"{field!r} must be a text (a string), got {_json_kind(value)}", number)
            else:
                _check_visible(path, value, f"the text in {field!r}", number)
                _surrogate_free(path, value, "the text", number)
        else:
            value = line.strip() if task == "classification" else line.split()
        _check_length(path, value if isinstance(value, str) else " ".join(map(str, value)), number)
        yield number, value


PSEUDO_LABEL_FIELDS = {"classification": "text", "tagging": "tokens"}  # what `pseudo-label` writes an example as


def _is_pseudo_label(record: dict) -> bool:
    return {"line", "confidence"} <= set(record) and any(field in record for field in PSEUDO_LABEL_FIELDS.values())


def _decoded_lines(path: str, handle: BinaryIO) -> Iterator[tuple[int, str]]:
    """(line number, text) of a binary file's lines, split at \\n, \\r\\n or \\r, streaming."""
    lines = (line for raw in handle for line in _raw_lines(raw))
    for number, line in enumerate(lines, 1):
        try:
            yield number, line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise DataError(path, "not UTF-8 text", number) from None


def iter_unlabelled(path: str, task: str, text_column: str = "text",
                    tokens_field: str = "tokens") -> Iterator[tuple[int, object]]:
    """Stream (line number, example) from one-example-per-line text or JSONL, in constant memory.

    Tagging examples are token lists (plain lines are split on spaces). Blank lines are skipped. A file
    not named .jsonl whose first lines look like CoNLL, CoNLL-U, CSV, TSV or JSON lines is refused
    (`sniff_unlabelled`): read line by line, its tags, header or braces would become examples.
    """
    path_ = Path(path)
    if not path_.is_file():
        raise DataError(path, "file not found" if not path_.exists() else "not a regular file")
    fmt = _format(path)
    if fmt in ("csv", "tsv", "conll"):
        raise DataError(path, f"is {'CoNLL' if fmt == 'conll' else fmt.upper()}, a labelled format: unlabelled text is "
                              "one example per line (.txt; tagging: space-separated tokens) or JSONL with a "
                              f"{'text' if task == 'classification' else 'tokens'} field")
    is_jsonl = fmt == "jsonl"
    if not is_jsonl:
        with open(path, "rb") as handle:
            sniffed = sniff_unlabelled(_head_lines(handle), text_column, tokens_field)
        if path_.suffix.lower() == ".conllu":  # whatever its first sentence shows
            sniffed = "CoNLL-U", ""
        _refuse_unlabelled_format(path, sniffed, task, tokens_field, text_column)
    seen = False
    with open(path, "rb") as handle:
        lines = _decoded_lines(path, handle)
        if is_jsonl and _holds_json_array(path, handle):  # read whole, as a labelled .json file is; N: item N
            lines = ((number, json.dumps(record, ensure_ascii=False))
                     for number, (_, record) in enumerate(_json_records(path), 1))
        for number, value in _unlabelled_values(path, lines, task, is_jsonl, text_column, tokens_field):
            seen = True
            yield number, value
    if not seen:
        raise DataError(path, "no examples (file is empty)")


def _holds_json_array(path: str, handle: BinaryIO) -> bool:
    """Whether a .json file is one array (of objects, one per example) rather than JSON lines."""
    start = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    handle.seek(0)
    return Path(path).suffix.lower() == ".json" and start == b"["


def unlabelled_text(text: str, task: str, source: str = "stdin", text_column: str = "text",
                    tokens_field: str = "tokens") -> list:
    """Unlabelled examples from text without a file name (stdin): one per line, or JSON lines, told apart
    by their content (`sniff_unlabelled`); CoNLL or CSV content is refused, as in a file. Empty: []."""
    lines = _split_lines(text)
    sniffed = sniff_unlabelled(lines, text_column, tokens_field)
    is_jsonl = sniffed is not None and sniffed[0] == "JSON"
    if not is_jsonl:
        _refuse_unlabelled_format(source, sniffed, task, tokens_field, text_column)
    return [value for _, value in _unlabelled_values(source, enumerate(lines, 1), task, is_jsonl, text_column,
                                                     tokens_field)]


def read_unlabelled(path: str, task: str, text_column: str = "text",
                    tokens_field: str = "tokens") -> datasets.Dataset:
    """Unlabelled text: one example per line (tagging: space-separated tokens) or JSONL."""
    import datasets
    values = [value for _, value in iter_unlabelled(path, task, text_column, tokens_field)]
    return datasets.Dataset.from_dict({"text" if task == "classification" else "tokens": values})


def read_labelled(path: str, task: str, text_column: str = "text", label_column: str = "label",
                  tag_column: int = -1, separator: str | None = None) -> datasets.Dataset:
    """Dispatch on the task: the one place procedures read labelled data (`separator`: of the hierarchy
    that class labels will build, see `read_classification`)."""
    if task == "classification":
        return read_classification(path, text_column, label_column, separator=separator)
    if task == "tagging":
        return read_tagging(path, tag_column)
    raise DistillError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")


@dataclass
class DataOptions:
    """Where examples and labels live in the user's files (and `datasets.Dataset` columns)."""

    text_column: str = "text"
    label_column: str = "label"
    tag_column: int = -1
    separator: str | None = "/"


def check_columns_read(task: str, options: DataOptions) -> None:
    """For a command that reads one task's labelled data (evaluate): refuse the column options that task's
    reader never reads, which would be accepted and do nothing. (A multi-task teacher's training shares one
    DataOptions between heads of both tasks, so its readers cannot refuse them.)"""
    tag = option("--tag-column", "DataOptions(tag_column=...)")
    if task == "classification" and options.tag_column != -1:
        raise DistillError(f"{tag} picks the CoNLL field of a tagging model's tags, and this model classifies texts "
                           f"(read from the columns that {option('--text-column', 'text_column')} and "
                           f"{option('--label-column', 'label_column')} name): drop {tag}")
    named = [option(f"--{name.replace('_', '-')}", name) for name, default in
             (("text_column", "text"), ("label_column", "label")) if getattr(options, name) != default]
    if task == "tagging" and named:
        raise DistillError(f"{' and '.join(named)} name{'s' if len(named) == 1 else ''} a classification model's "
                           "columns, and this model tags words (read from CoNLL, its tag field picked by "
                           f"{tag}, or from JSONL 'tokens' and 'tags'): drop {'it' if len(named) == 1 else 'them'}")


def read_split(path: str, task: str, options: DataOptions = DataOptions(),
               hierarchy: bool = False) -> tuple[list, list]:
    """Examples (texts or token lists) and their labels (strings or tag lists) from a labelled file; with
    `hierarchy` (data to train on), class labels are read as paths of levels at `options.separator`."""
    data = read_labelled(path, task, options.text_column, options.label_column, options.tag_column,
                         options.separator if hierarchy else None)
    if task == "classification":
        return data["text"], data["label"]
    return data["tokens"], data["tags"]


@dataclass
class Examples:
    """One split of examples (texts or token lists), their labels (None: unlabelled), and where they
    came from: a file path, or ``memory:SHA`` (a digest of the content) for data given in memory, so a
    run's resume signature covers it either way."""

    inputs: list
    labels: list | None
    source: str
    role: str = "data"  # what the caller gave it as (train, dev, unlabelled): its name where it has no file

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def where(self) -> str:
        """The split as messages name it: its file (or hub spec), or, for data given in memory, whose `source`
        is a digest no user knows, its role: ``dev: label 'x' was not seen in training``."""
        return self.role if self.source.startswith("memory:") else self.source


def memory_source(*parts: Sequence) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(list(part), ensure_ascii=False).encode())
    return f"memory:{digest.hexdigest()[:40]}"


def _check_example(where: str, task: str, example: Any, row: int) -> Any:
    if task == "classification":
        if not isinstance(example, str) or _invisible(example):
            raise DataError(where, f"example {row} is not a non-empty text: {example!r:.60}")
        _check_length(where, example, None)
        return _surrogate_free(where, example, f"example {row}", None)
    if isinstance(example, tuple):
        example = list(example)
    if not isinstance(example, list) or not example or not all(isinstance(t, str) and t.strip() for t in example):
        raise DataError(where, f"example {row} is not a non-empty list of tokens (strings): {example!r:.60}")
    _surrogate_free(where, " ".join(example), f"example {row}", None)
    return example


def checked_examples(where: str, task: str, inputs: list) -> list:
    """In-memory examples as every reader takes them: non-empty texts (within the length limit) to
    classify, non-empty lists of non-empty tokens to tag; none at all is an error."""
    if not inputs:
        raise DataError(where, "no examples")
    return [_check_example(where, task, example, row) for row, example in enumerate(inputs)]


def _check_labels(where: str, task: str, inputs: list, labels: Sequence, names: list | None,
                  separator: str | None = None, column: str | None = None) -> list:
    """Labels (or tag lists) as text, one per example; an error names the example (and the tag's position),
    and the `column` of a dataset that holds them (none for a list of labels). Class labels are paths of named
    levels at `separator`, where it is given."""
    if len(labels) != len(inputs):
        raise DataError(where, f"{len(inputs)} examples but {len(labels)} labels")
    checked = []
    for row, (example, label) in enumerate(zip(inputs, labels)):
        if task == "classification":
            label = _class_name(where, names, label, row) if names is not None and _is_index(label) else label
            checked.append(_label_text(f"{where}: example {row}", label, column, None, separator))
            if not checked[-1]:
                raise DataError(where, f"example {row} has an empty label")
            continue
        tags = list(label) if isinstance(label, (list, tuple)) else None
        if tags is None or len(tags) != len(example):
            raise DataError(where, f"example {row}: expected one tag per token ({len(example)}), got {label!r:.60}")
        checked.append([_class_name(where, names, t, row, position) if names is not None and _is_index(t)
                        else _label_text(f"{where}: example {row} at position {position}", t, column, None, kind="tag")
                        for position, t in enumerate(tags)])
        if not all(checked[-1]):
            raise DataError(where, f"example {row} has an empty tag at position {checked[-1].index('')}")
    return checked


def _is_dataset(data: Any) -> bool:
    """A `datasets.Dataset` (or anything with its columns and features), checked without importing it."""
    return hasattr(data, "column_names") and hasattr(data, "features")


def _is_dataframe(data: Any) -> bool:
    """A pandas DataFrame, checked without importing pandas."""
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns") and hasattr(data, "iloc")


def _is_records(data: Any) -> bool:
    """Rows given as a list of dicts (column -> value), as `csv.DictReader` or `DataFrame.to_dict("records")`
    give them."""
    return isinstance(data, (list, tuple)) and bool(data) and isinstance(data[0], dict)


def is_table(data: Any) -> bool:
    """Examples given as a table: a `datasets.Dataset`, a pandas DataFrame or a list of dicts."""
    return _is_dataset(data) or _is_dataframe(data) or _is_records(data)


def _cell(value: Any) -> Any:
    """A DataFrame cell as plain Python: a token array (as parquet gives them) as a list."""
    return value.tolist() if hasattr(value, "tolist") else value


def _table_columns(data: Any, task: str, options: DataOptions, labelled: bool, name: str
                   ) -> tuple[list, list | None, Any]:
    """The example column, the label column (or None) and the label feature (a `datasets` ClassLabel's) of a
    table in memory: a `datasets.Dataset`, a pandas DataFrame or a list of dicts. Classification reads the
    columns `options` names, tagging ``tokens`` and ``tags``."""
    example_column = options.text_column if task == "classification" else "tokens"
    label_column = options.label_column if task == "classification" else "tags"
    wanted = [example_column, label_column] if labelled else [example_column]
    naming = "name them with DataOptions(text_column=..., label_column=...)" if task == "classification" else \
        "a tagging table has a 'tokens' and a 'tags' column"
    if _is_records(data):
        for row, record in enumerate(data):
            if not isinstance(record, dict):
                raise DataError(name, f"example {row} is a {type(record).__name__}, not a dict as the first one is: "
                                      "give every row as a dict of columns")
            missing = [column for column in wanted if column not in record]
            if missing:
                raise DataError(name, f"example {row} has no key {missing[0]!r} (keys: "
                                      f"{', '.join(map(str, record))}); {naming}")
        return [record[example_column] for record in data], \
            [record[label_column] for record in data] if labelled else None, None
    columns = list(data.column_names) if _is_dataset(data) else [str(column) for column in data.columns]
    missing = [column for column in wanted if column not in columns]
    if missing:
        raise DataError(name, f"no column {missing[0]!r} (columns: {', '.join(columns)}); {naming}")
    if _is_dataframe(data):
        return [_cell(value) for value in data[example_column].tolist()], \
            [_cell(value) for value in data[label_column].tolist()] if labelled else None, None
    feature = data.features[label_column] if labelled else None
    feature = getattr(feature, "feature", feature)  # a sequence of ClassLabel for tags
    return list(data[example_column]), list(data[label_column]) if labelled else None, feature


def labelled_examples(data: Any, task: str, options: DataOptions = DataOptions(), name: str = "data") -> Examples:
    """Labelled examples from a file path, a table (`datasets.Dataset`, pandas DataFrame or list of dicts, with
    text/label or tokens/tags columns; a ClassLabel feature gives label names) or an (examples, labels) pair
    of sequences."""
    if isinstance(data, (str, Path)):
        inputs, labels = read_split(str(data), task, options, hierarchy=True)
        return Examples(list(inputs), list(labels), str(data), name)
    names = column = None  # a list of labels has no column
    if is_table(data):
        inputs, labels, feature = _table_columns(data, task, options, True, name)
        names = getattr(feature, "names", None)
        column = options.label_column if task == "classification" else "tags"
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        inputs, labels = list(data[0]), list(data[1])
    else:
        raise DistillError(f"{name}: give a file path, a datasets.Dataset, a pandas DataFrame, a list of dicts or "
                           f"an (examples, labels) pair, not {type(data).__name__}")
    inputs = checked_examples(name, task, inputs)
    labels = _check_labels(name, task, inputs, labels, names, options.separator, column)
    if task == "tagging":
        check_tag_scheme(name, labels)
    return Examples(inputs, labels, memory_source(inputs, labels), name)


def unlabelled_examples(data: Any, task: str, options: DataOptions = DataOptions(), name: str = "unlabelled"
                        ) -> Examples:
    """Unlabelled examples from a file path (one per line, or JSONL), a table (`datasets.Dataset`, pandas
    DataFrame or list of dicts: its text or tokens column) or a sequence of examples."""
    if isinstance(data, (str, Path)):
        read = read_unlabelled(str(data), task, options.text_column)
        return Examples(list(read["text" if task == "classification" else "tokens"]), None, str(data), name)
    if is_table(data):
        inputs = _table_columns(data, task, options, False, name)[0]
    elif isinstance(data, (list, tuple)):
        inputs = list(data)
    else:
        raise DistillError(f"{name}: give a file path, a datasets.Dataset, a pandas DataFrame, a list of dicts or "
                           f"a list of examples, not {type(data).__name__}")
    inputs = checked_examples(name, task, inputs)
    return Examples(inputs, None, memory_source(inputs), name)


HELD_OUT_REFUSED = 0.5  # a dev set this much made of training examples picks epochs on what the model learns
HELD_OUT_WARNED = 0.2  # natural splits share a few short examples (CoNLL-2003: 6% of valid's sentences)


def _example_key(example: Any) -> str:
    """An example as compared across sets: a text without its surrounding spaces (a plain-text line is read
    stripped, a CSV field is not), or a token list."""
    return json.dumps(example.strip() if isinstance(example, str) else example, ensure_ascii=False)


def check_held_out(train: Examples, dev: Examples, other: str = "the training data") -> None:
    """Refuse a dev set that is (mostly) data the model learns from: `train` is the training data, or the
    unlabelled data a student learns its teacher's outputs on, named by `other` in the messages. Its score
    would pick the epoch that fits that data best and early stopping would never stop, with nothing to tell
    the user. Exact copies of an example (its text, or its token list) count; a smaller share gets a warning."""
    seen = {_example_key(example) for example in train.inputs}
    shared = sum(_example_key(example) in seen for example in dev.inputs) / max(len(dev.inputs), 1)
    where = dev.where  # its file, or for data given in memory its role (dev, head NAME's dev)
    if shared >= HELD_OUT_REFUSED:
        raise DataError(where, f"{shared:.0%} of its examples are also in {other}, so the best epoch would be "
                               "picked on examples the model learns from: give a held-out dev set")
    if shared >= HELD_OUT_WARNED:
        logger.warning(f"warning: {where}: {shared:.0%} of its examples are also in {other}; its scores will read high")


SOFT_LABEL_TOLERANCE = 1e-3  # how far a record's probabilities may sum from 1 (rounding in an exported file)


@dataclass
class SoftLabelRecords:
    """A soft-label file as read (`read_soft_labels`): each record's text, its distribution over `labels` (in
    that order) and its line, and the file."""

    path: str
    labels: list[str]
    texts: list[str]
    probabilities: list[list[float]]
    lines: list[int]


def _probability(path: str, value: Any, what: str, line: int) -> float:
    """A probability as a record gives it: a finite number (not a bool) in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1:
        raise DataError(path, f"{what} must be a number from 0 to 1, got {value!r}", line)
    return float(value)


def _soft_record_labels(path: str, record: dict, line: int) -> list[str]:
    """The labels a soft-label record names: the keys of its ``probs``, or its ``label`` (checked as text)."""
    has_probs, has_label = "probs" in record, "label" in record
    if has_probs == has_label:
        found = "not both" if has_probs else "found neither"
        raise DataError(path, f'give each record "probs" (a distribution: {{"negative": 0.2, "positive": 0.8}}) or '
                              f'"label" with "confidence", {found}', line)
    if has_label:
        if "confidence" not in record:
            raise DataError(path, 'a record with "label" needs its "confidence" (the probability of that label)', line)
        return [_label_text(path, record["label"], "label", line)]
    if "confidence" in record:
        raise DataError(path, '"confidence" goes with "label"; a record with "probs" gives every probability', line)
    probs = record["probs"]
    if not isinstance(probs, dict) or not probs:
        raise DataError(path, f'"probs" must be a JSON object of label: probability, got {_json_kind(probs)}', line)
    return [_label_text(path, name, "probs", line) for name in probs]


def read_soft_labels(path: str | Path, labels: Sequence[str] | None = None,
                     text_column: str = "text") -> SoftLabelRecords:
    """Read a JSONL file of soft labels: ``{"text": ..., "probs": {"negative": 0.2, "positive": 0.8}}`` or
    ``{"text": ..., "label": "positive", "confidence": 0.8}`` (the rest of the probability spread evenly over the
    other labels). `labels`: the label set (the training data's, or ``--labels``), which every label a record
    names must belong to; None: the labels the file names, sorted. A label a ``probs`` object leaves out has
    probability 0. Each bad record is refused with its file and line: probabilities that are not finite numbers
    in [0, 1] or do not sum to 1 within `SOFT_LABEL_TOLERANCE`, a confidence below an even split, a text given
    twice with two distributions. Kept probabilities are rescaled to sum exactly 1."""
    path = str(path)
    if _format(path) != "jsonl":
        raise DataError(path, "soft labels are JSON lines: name the file .jsonl, one record per line")
    records = []
    for line, record in _json_records(path):
        if text_column not in record:
            raise DataError(path, f"no {text_column!r} field (fields: {', '.join(map(str, record))})", line)
        records.append((line, _record_text(path, record[text_column], repr(text_column), line), record,
                        _soft_record_labels(path, record, line)))
    names = list(labels) if labels is not None else sorted({name for *_, named in records for name in named})
    if len(names) < 2:
        raise DataError(path, f"names one label only, {names}: soft labels need a distribution over at least two "
                              f"(name them all with {option('--labels', 'SoftLabels(labels=...)')})")
    index = {name: position for position, name in enumerate(names)}
    texts, distributions, lines, first = [], [], [], {}
    for line, text, record, named in records:
        unknown = next((name for name in named if name not in index), None)
        if unknown is not None:
            raise DataError(path, f"label {unknown!r} is not one of the data's labels ({', '.join(names)})", line)
        if "label" in record:
            confidence = _probability(path, record["confidence"], '"confidence"', line)
            if confidence < 1 / len(names):
                raise DataError(path, f"confidence {confidence:g} of {named[0]!r} is below an even split over the "
                                      f"{len(names)} labels, so the rest spread evenly would outweigh it: give "
                                      '"probs" instead', line)
            row = [(1 - confidence) / (len(names) - 1)] * len(names)
            row[index[named[0]]] = confidence
        else:
            row = [0.0] * len(names)
            for name, value in record["probs"].items():
                row[index[str(name).strip()]] = _probability(path, value, f"the probability of {name!r}", line)
            total = sum(row)
            if abs(total - 1) > SOFT_LABEL_TOLERANCE:
                raise DataError(path, f"the probabilities sum to {total:.6g}, not 1 (within {SOFT_LABEL_TOLERANCE:g})",
                                line)
            row = [value / total for value in row]
        seen = first.setdefault(text, (line, row))
        if seen[1] != row:
            raise DataError(path, f"the text of line {seen[0]} again, with another distribution: give each text "
                                  "one", line)
        texts.append(text)
        distributions.append(row)
        lines.append(line)
    if not texts:
        raise DataError(path, "no examples")
    return SoftLabelRecords(path, names, texts, distributions, lines)
