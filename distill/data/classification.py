"""Classification files: CSV, TSV, JSON and JSON lines with a text and a label column."""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

from distill.data.checks import (HUB_PREFIX, _check_visible, _format, _json_records, _label_text, _read_text, _record_text,
                                 _require_columns, _split_lines, _wrong_task)
from distill.data.hub import _hub_examples
from distill.errors import DataError, OtherTaskData

if TYPE_CHECKING:
    import datasets


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
        raise OtherTaskData(path, "is CoNLL (tagging data), but this command or model classifies texts: "
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


