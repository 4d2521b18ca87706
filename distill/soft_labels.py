"""Soft labels from a file as the teacher: ``kd --soft-labels FILE.jsonl``, ``Distiller(SoftLabels(FILE), ...)``.

What an annotation tool or a language model's labelling job exports (a distribution over the labels per
text, or a label with its confidence; `distill.data.read_soft_labels` reads and checks it) stands where a
teacher's logits do: each distribution's log-probabilities are the "teacher logits" of its text, so the
distillation losses apply unchanged (KL at a temperature compares the distributions; MSE compares the
log-probabilities). No teacher model runs, and none is cached.

With labelled training data, its texts are distilled towards their soft labels where the file has them and
towards their gold label (all its probability on it) where it has none; the file's other texts join the
transfer set as unlabeled text does, their hard target the label of highest probability. Without, the file
alone is the transfer set.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import torch

from distill.data import SoftLabelRecords, read_soft_labels
from distill.data.checks import same_text
from distill.errors import DataError, DistillError, option
from distill.inference import ExampleLogits
from distill.label_names import LabelNames, parse_labels
from distill.labels import LabelHierarchy

# The probability a log-probability "logit" is floored at: 0 in a record (or a label a text is sure not to
# have) would be -inf, which the losses cannot take; e^-27.6 is nothing next to any probability a file states.
PROBABILITY_FLOOR = 1e-12


class SoftLabels:
    """A soft-label file (JSONL) standing for the teacher; `labels`: the label set when no training data gives
    it (``"negative,positive"``, the ``--labels`` spelling; a list of names, each read as written, ``<=50K`` too;
    or `LabelNames`; None: the labels the file names, or the training data's). Read when a run starts (`read`),
    against the label set of its data."""

    kind = "soft-labels"
    task = "classification"

    def __init__(self, path: str | Path, labels: str | Sequence[str] | LabelNames | None = None):
        if not isinstance(path, (str, Path)):
            raise DistillError(f"SoftLabels: give the path of a JSONL file, not {type(path).__name__}")
        self.path = str(path)
        names = labels if labels is None or isinstance(labels, LabelNames) else \
            parse_labels(labels) if isinstance(labels, str) else LabelNames.named(labels)
        if names is not None and any(described != (name,) for name, described in zip(names.names, names.descriptions)):
            raise DistillError(f"{option('--labels', 'SoftLabels(labels=...)')}: soft labels take label names alone "
                               f"({','.join(names.names)}); words for a label are for a teacher that reads them")
        self.labels = None if names is None else list(names.names)
        self.records: SoftLabelRecords | None = None
        self.hierarchy: LabelHierarchy | None = None
        self._rows: dict[str, int] = {}

    def read(self, labels: Sequence[str] | None, text_column: str = "text") -> "SoftLabels":
        """Read and check the file against the label set `labels` (the training data's; None: `self.labels`, else
        the file's own); the label order of the logits is that set's."""
        if labels is not None and self.labels is not None and set(labels) != set(self.labels):
            raise DistillError(f"{self.path}: the labels given, {self.labels}, are not the training data's, "
                               f"{list(labels)}")
        self.records = read_soft_labels(self.path, labels if labels is not None else self.labels, text_column)
        self.hierarchy = LabelHierarchy(list(self.records.labels), None)
        self._rows = {same_text(text): row for row, text in enumerate(self.records.texts)}
        return self

    def require_labels(self, where: str, labels: Sequence[str]) -> None:
        """Every label of the labelled data `where` (`labels`, gold labels to score against) is one of the label
        set read, else one line naming the first other: without training data the soft labels' set is the label
        set, so no such label was "seen in training" or not."""
        assert self.hierarchy is not None, "read() first"
        unknown = next((label for label in labels if label not in self.hierarchy.index), None)
        if unknown is not None:
            raise DistillError(f"{where}: label {unknown!r} is outside the teacher's label set, that of the soft "
                               f"labels of {self.path} ({', '.join(self.hierarchy.labels)}): name every label "
                               f"with {option('--labels', 'SoftLabels(labels=...)')}")

    def holds(self, text: str) -> bool:
        """Whether the file gives `text` a distribution (blanks around either aside: `same_text`)."""
        return same_text(text) in self._rows

    def other_texts(self, texts: Sequence[str]) -> list[str]:
        """The file's texts that are none of `texts` (the training data's): the transfer set's unlabeled part."""
        given = set(map(same_text, texts))
        return [text for text in self.records.texts if same_text(text) not in given]

    def logits(self, examples: Sequence[str], gold: Sequence[str | None] | None = None,
               where: Sequence[str] | None = None) -> ExampleLogits:
        """The "teacher logits" of `examples`: the log of each one's distribution (floored at
        `PROBABILITY_FLOOR`), or for one the file lacks, of all the probability on its `gold` label. An example
        with neither is an error naming where it came from (`where`)."""
        assert self.records is not None, "read() first"
        labels, rows = self.hierarchy.labels, []
        floor = math.log(PROBABILITY_FLOOR)
        for number, text in enumerate(examples):
            row = self._rows.get(same_text(text))
            if row is not None:
                rows.append(self.records.probabilities[row])
            elif gold is not None and gold[number] is not None:
                rows.append([1.0 if label == gold[number] else 0.0 for label in labels])
            else:
                source = where[number] if where is not None else "the data"
                raise DataError(self.path, f"has no soft label for example {number} of {source}: {text!r:.60}")
        return ExampleLogits(torch.tensor(rows, dtype=torch.float64).log().clamp_min(floor).float())

    def teacher_dev_logits(self, examples: Sequence[str]) -> ExampleLogits | None:
        """The file's distributions for the dev texts, to score them as a teacher's are; None unless it has
        every one of them."""
        if not examples or not all(self.holds(text) for text in examples):
            return None
        return self.logits(examples)
