"""What every reader checks of a value it reads: its length, visible characters, no lone surrogates; JSON
records parsed strictly (a field named twice is an error), with their line numbers."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from pathlib import Path
from typing import Any, Iterator, Sequence

from distill.errors import DataError, OtherTaskData
from distill.labels import check_levels, shows_nothing as _invisible


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


def require_file(path: str | Path) -> None:
    """A data file is there and is a regular file: a folder, a pipe or a device is said to be one, alike for every
    reader (labelled, unlabeled)."""
    from distill.io import what_is
    found = Path(path)
    if not found.exists():
        raise DataError(str(path), "file not found")
    if not found.is_file():
        raise DataError(str(path), f"is {'a directory' if found.is_dir() else what_is(found)}, expected a file")


def _read_text(path: str | Path) -> str:
    """Read UTF-8 text; undecodable bytes become an error naming the line."""
    require_file(path)
    path = Path(path)
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
    first = True
    for number, line in enumerate(_split_lines(_read_text(path) if text is None else text), 1):
        if not line.strip():
            continue
        if first and line.lstrip().startswith("["):  # json.dumps(records, indent=2) of a whole list, in a .jsonl
            raise DataError(str(path), "holds a JSON array, not JSON lines: write one JSON object per line (or name "
                                       "the file .json)", number)
        first = False
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
        raise OtherTaskData(path, "holds tagging data (tokens and tags), but this command or model classifies "
                                  "texts: give it texts (a text field, and a label where the command needs one)", line)
    if task == "tagging" and "tokens" not in columns and "text" in columns and "label" in columns:
        raise OtherTaskData(path, "holds classification data (text and label), but this command or model tags "
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


def _require_columns(path: str, columns: list[str], wanted: list[str], line: int | None = None) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise DataError(path, f"missing column {missing[0]!r} (columns: {', '.join(map(str, columns))})", line)


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


def same_text(text: str) -> str:
    """A text as compared across files: without its surrounding blanks. A plain-text line is read stripped, a CSV
    field is not, and every model reads the two alike."""
    return text.strip()


def _record_text(path: str, text: Any, where: str, line: int | None) -> str:
    """The text of a record (in column or field `where`): a string that shows something, within the length limit,
    with no lone surrogate; else an error naming the file and line."""
    if isinstance(text, str):
        _check_visible(path, text, f"the text in {where}", line)
    if not isinstance(text, str) or not text.strip():
        raise DataError(path, f"empty or non-text value in {where}", line)
    _check_length(path, text, line)
    return _surrogate_free(path, text, "the text", line)
