"""Soft labels from a file (``kd --soft-labels``): a distribution over the labels per text, or a label and its
confidence, each record checked (labels the data's, probabilities finite and summing to 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from distill.data.checks import _Record, _format, _json_kind, _json_records, _label_text, _record_text, same_text
from distill.errors import DataError, option
from distill.labels import check_one_spelling


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
        return [_named_label(path, record["label"], "label", line)]
    if "confidence" in record:
        raise DataError(path, '"confidence" goes with "label"; a record with "probs" gives every probability', line)
    probs = record["probs"]
    if not isinstance(probs, dict):
        raise DataError(path, f'"probs" must be a JSON object of label: probability, got {_json_kind(probs)}', line)
    if not probs:
        raise DataError(path, '"probs" names no label: give each label\'s probability ({"positive": 0.9, ...})', line)
    names = [_named_label(path, name, "probs", line) for name in probs]
    # a key written twice (JSON keeps its last value), or " positive" beside "positive": one probability would
    # replace the other in silence
    twice = probs.twice if isinstance(probs, _Record) and probs.twice is not None else \
        next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise DataError(path, f'"probs" names the label {twice!r} twice: give each label one probability', line)
    return names


def _named_label(path: str, value: Any, field: str, line: int) -> str:
    """A label a record names (`_label_text`), never an empty one: "" would become a label of its own."""
    name = _label_text(path, value, field, line)
    if not name:
        raise DataError(path, f"an empty label in {field!r}: name each label", line)
    return name


def read_soft_labels(path: str | Path, labels: Sequence[str] | None = None,
                     text_column: str = "text") -> SoftLabelRecords:
    """Read a JSONL file of soft labels: ``{"text": ..., "probs": {"negative": 0.2, "positive": 0.8}}`` or
    ``{"text": ..., "label": "positive", "confidence": 0.8}`` (the rest of the probability spread evenly over the other
    labels). `labels`: the label set (the training data's, or ``--labels``), which every label a record names must
    belong to; None: the labels the file names, sorted (each spelt one way, as in a data file). A label a ``probs``
    object leaves out has probability 0. Each bad record is refused with its file and line: probabilities that are
    not finite numbers in [0, 1] or do not sum to 1 within `SOFT_LABEL_TOLERANCE`, a confidence below an even split,
    a text given twice with two distributions (`same_text`: blanks around it aside). Kept probabilities are rescaled
    to sum exactly 1."""
    path = str(path)
    if _format(path) != "jsonl":
        raise DataError(path, "soft labels are JSON lines: name the file .jsonl, one record per line")
    records = []
    for line, record in _json_records(path):
        if text_column not in record:
            raise DataError(path, f"no {text_column!r} field (fields: {', '.join(map(str, record))})", line)
        records.append((line, _record_text(path, record[text_column], repr(text_column), line), record,
                        _soft_record_labels(path, record, line)))
    if labels is None:  # the labels the file names: one label spelt two ways would be two classes
        check_one_spelling(dict.fromkeys(name for *_, named in records for name in named), path)
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
        seen = first.setdefault(same_text(text), (line, row))
        if seen[1] != row:
            raise DataError(path, f"the text of line {seen[0]} again, with another distribution: give each text "
                                  "one", line)
        texts.append(text)
        distributions.append(row)
        lines.append(line)
    if not texts:
        raise DataError(path, "no examples")
    return SoftLabelRecords(path, names, texts, distributions, lines)
