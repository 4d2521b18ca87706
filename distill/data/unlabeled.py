"""Unlabeled text: one example a line (tagging: space-separated tokens) or JSON lines, its format sniffed from
the first lines, streamed so a large file is never held whole."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator

from distill.data.checks import (HUB_PREFIX, MAX_EXAMPLE_CHARS, _check_length, _check_visible, _format, _json_kind,
                                 _json_records, _json_words, _parsed, _require_columns, _split_lines, _surrogate_free,
                                 _wrong_task, require_file)
from distill.data.conll import _is_conllu
from distill.errors import DataError
from distill.labels import shows_nothing as _invisible

if TYPE_CHECKING:
    import datasets


UNLABELED_SNIFF_LINES = 50
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


def sniff_unlabeled(lines: Iterable[str], text_column: str = "text",
                     tokens_field: str = "tokens") -> tuple[str, str] | None:
    """What the first lines of unlabeled text (a file named as plain text, or stdin) look like, when not
    one example per line: ``("CoNLL", "")``, ``("JSON", "")`` (JSON lines; the second item is the number of
    the first line that is no JSON object, if one is), ``("JSON document", "")`` or ``("CSV"/"TSV",
    header)``, ``("CoNLL-U", "")``; None for text.

    Only the first `UNLABELED_SNIFF_LINES` non-blank lines are read. CoNLL: the first word is
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
        if len(found) >= UNLABELED_SNIFF_LINES:
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


def _refuse_unlabeled_format(path: str, sniffed: tuple[str, str] | None, task: str,
                              tokens_field: str = "tokens", text_column: str = "text") -> None:
    """Refuse labelled (or JSON) content read as unlabeled lines: each line would become one example."""
    if sniffed is None:
        return
    kind, detail = sniffed  # CSV/TSV: the header; JSON: the number of a line not JSON
    field = text_column if task == "classification" else tokens_field
    if kind == "CoNLL":
        raise DataError(path, "looks like CoNLL (a word and its tag per line: labelled tagging data), so read as "
                              "plain text each line would be one example: unlabeled text is one example per line "
                              f"(tagging: space-separated tokens) or JSONL with a {field} field")
    if kind == "CoNLL-U":
        raise DataError(path, "looks like CoNLL-U (a word's number, the word, then its annotations per line: "
                              "labelled data), so read as plain text each line would be one example: unlabeled "
                              f"text is one example per line (tagging: space-separated tokens) or JSONL with a {field} "
                              "field")
    if kind in ("CSV", "TSV"):
        raise DataError(path, f"looks like {kind} (a header, {detail[:60]!r}, then rows), so read as plain text its "
                              "header and labels would be examples: unlabeled text is one example per line "
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


def _unlabeled_values(path: str, lines: Iterable[tuple[int, str]], task: str, is_jsonl: bool,
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


def iter_unlabeled(path: str, task: str, text_column: str = "text",
                    tokens_field: str = "tokens") -> Iterator[tuple[int, object]]:
    """Stream (line number, example) from one-example-per-line text or JSONL, in constant memory.

    Tagging examples are token lists (plain lines are split on spaces). Blank lines are skipped. A file
    not named .jsonl whose first lines look like CoNLL, CoNLL-U, CSV, TSV or JSON lines is refused
    (`sniff_unlabeled`): read line by line, its tags, header or braces would become examples. A hub dataset
    (``hub:NAME:SPLIT``), which only the labelled readers load, is refused by name, not as a missing file.
    """
    if str(path).startswith(HUB_PREFIX):
        raise DataError(path, "a hub dataset is read as labelled data (evaluate, compare, training); unlabeled input "
                              "(predict, pseudo-label, kd's unlabeled data) is a file: one example per line or JSONL, "
                              "e.g. written with datasets' Dataset.to_json")
    require_file(path)
    fmt = _format(path)
    if fmt in ("csv", "tsv", "conll"):
        raise DataError(path, f"is {'CoNLL' if fmt == 'conll' else fmt.upper()}, a labelled format: unlabeled text is "
                              "one example per line (.txt; tagging: space-separated tokens) or JSONL with a "
                              f"{'text' if task == 'classification' else 'tokens'} field")
    is_jsonl = fmt == "jsonl"
    if not is_jsonl:
        with open(path, "rb") as handle:
            sniffed = sniff_unlabeled(_head_lines(handle), text_column, tokens_field)
        if Path(path).suffix.lower() == ".conllu":  # whatever its first sentence shows
            sniffed = "CoNLL-U", ""
        _refuse_unlabeled_format(path, sniffed, task, tokens_field, text_column)
    seen = False
    with open(path, "rb") as handle:
        lines = _decoded_lines(path, handle)
        if is_jsonl and _holds_json_array(path, handle):  # read whole, as a labelled .json file is; N: item N
            lines = ((number, json.dumps(record, ensure_ascii=False))
                     for number, (_, record) in enumerate(_json_records(path), 1))
        for number, value in _unlabeled_values(path, lines, task, is_jsonl, text_column, tokens_field):
            seen = True
            yield number, value
    if not seen:
        raise DataError(path, "no examples (file is empty)" if _is_empty(path) else
                        "no examples (every line is blank)")


def _is_empty(path: str) -> bool:
    """Whether `path` holds no bytes (what is no regular file counts as empty)."""
    try:
        return Path(path).stat().st_size == 0 if Path(path).is_file() else True
    except OSError:
        return True


def _holds_json_array(path: str, handle: BinaryIO) -> bool:
    """Whether a .json file is one array (of objects, one per example) rather than JSON lines."""
    start = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    handle.seek(0)
    return Path(path).suffix.lower() == ".json" and start == b"["


def unlabeled_text(text: str, task: str, source: str = "stdin", text_column: str = "text",
                    tokens_field: str = "tokens") -> list:
    """Unlabeled examples from text without a file name (stdin): one per line, or JSON lines, told apart
    by their content (`sniff_unlabeled`); CoNLL or CSV content is refused, as in a file. Empty: []."""
    lines = _split_lines(text)
    sniffed = sniff_unlabeled(lines, text_column, tokens_field)
    is_jsonl = sniffed is not None and sniffed[0] == "JSON"
    if not is_jsonl:
        _refuse_unlabeled_format(source, sniffed, task, tokens_field, text_column)
    return [value for _, value in _unlabeled_values(source, enumerate(lines, 1), task, is_jsonl, text_column,
                                                     tokens_field)]


def read_unlabeled(path: str, task: str, text_column: str = "text",
                    tokens_field: str = "tokens") -> datasets.Dataset:
    """Unlabeled text: one example per line (tagging: space-separated tokens) or JSONL."""
    import datasets
    values = [value for _, value in iter_unlabeled(path, task, text_column, tokens_field)]
    return datasets.Dataset.from_dict({"text" if task == "classification" else "tokens": values})


