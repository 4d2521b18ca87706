"""Label vocabularies, stored with every model; hierarchical labels such as ``Science/Physics``."""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from distill.errors import DataError, DistillError


@dataclass
class LabelHierarchy:
    """The leaf labels a model predicts, and how they roll up to coarser levels.

    A leaf ``Science/Physics`` with separator ``/`` belongs to ``Science`` at level 0 and
    to ``Science/Physics`` at level 1. Flat labels are a one-level hierarchy.
    """

    labels: list[str]
    separator: str | None = "/"
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.labels:
            raise DistillError("the label set is empty: the training data has no labels")
        if len(set(self.labels)) != len(self.labels):
            raise DistillError(f"duplicate labels in {self.labels}")
        self.index = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def from_labels(cls, labels: Iterable[str], separator: str | None = "/",
                    first: str | None = None) -> "LabelHierarchy":
        """Build from observed labels, sorted for stability; `first` (e.g. ``O``) gets index 0."""
        counts = Counter(labels)
        ordered = sorted(counts)
        if first is not None and first in counts:
            ordered.remove(first)
            ordered.insert(0, first)
        return cls(ordered, separator, dict(counts))

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def depth(self) -> int:
        if not self.separator:
            return 1
        return max(len(label.split(self.separator)) for label in self.labels)

    def encode(self, label: str, where: str = "") -> int:
        try:
            return self.index[label]
        except KeyError:
            known = ", ".join(self.labels[:10]) + (" ..." if len(self.labels) > 10 else "")
            prefix = f"{where}: " if where else ""
            raise DistillError(f"{prefix}label {label!r} was not seen in training (known: {known})") from None

    def decode(self, index: int) -> str:
        return self.labels[index]

    def at_level(self, label: str, level: int) -> str:
        """The ancestor of `label` at `level` (0 = coarsest); shallower labels map to themselves."""
        if not self.separator:
            return label
        return self.separator.join(label.split(self.separator)[: level + 1])

    def class_weights(self, mode: str | Sequence[float] | None) -> list[float] | None:
        """Class weights for the NLL: None, 'inverse' frequency (mean 1), or explicit values."""
        if mode is None or mode == "none":
            return None
        if mode == "inverse":
            if not self.counts:
                raise DistillError("inverse-frequency class weights need label counts from training data")
            raw = [1.0 / max(self.counts.get(label, 0), 1) for label in self.labels]
            scale = len(raw) / sum(raw)
            return [w * scale for w in raw]
        weights = [float(w) for w in mode]
        if len(weights) != len(self.labels):
            raise DistillError(f"{len(weights)} class weights given for {len(self.labels)} labels {self.labels}")
        if any(w < 0 for w in weights):
            raise DistillError("class weights must be non-negative")
        return weights

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "separator": self.separator, "depth": self.depth,
                "counts": dict(self.counts)}

    @classmethod
    def from_dict(cls, data: dict) -> "LabelHierarchy":
        return cls(list(data["labels"]), data.get("separator"), dict(data.get("counts", {})))

    def check_same(self, other: "LabelHierarchy", what: str) -> None:
        """Distillation maps logits by index, so both sides need the same labels in the same order."""
        if self.labels != other.labels:
            raise DistillError(f"{what}: label sets differ: teacher {self.labels} vs {other.labels}")


def spelling_key(label: str) -> str:
    """What two spellings of one label share: Unicode form, case, spacing and number format aside
    (``1`` and ``1.0``, as spreadsheet exports write integers)."""
    key = " ".join(unicodedata.normalize("NFKC", label).casefold().split())
    try:
        number = float(key)
    except ValueError:
        return key
    return str(int(number)) if number.is_integer() else key


def build_hierarchy(task: str, labels: list, separator: str | None, path: str) -> LabelHierarchy:
    """Leaf labels from training data; tags are flat with ``O`` first.

    Refused, since training on them would give a silently wrong model: one label only (a
    classifier that cannot be wrong), tags that are all ``O``, and two spellings of one label
    (``Positive`` / ``positive``), which would become two classes.
    """
    if task == "classification":
        hierarchy = LabelHierarchy.from_labels(labels, separator)
    else:
        hierarchy = LabelHierarchy.from_labels((t for tags in labels for t in tags), None, first="O")
    seen: dict[str, str] = {}
    for label in hierarchy.labels:
        other = seen.setdefault(spelling_key(label), label)
        if other != label:
            raise DataError(path, f"labels {other!r} and {label!r} differ only in case, spacing, Unicode form or "
                                  "number format; spell each label one way")
    if task == "classification" and len(hierarchy) < 2:
        raise DataError(path, f"every example has the label {hierarchy.labels[0]!r}: a classifier needs at least "
                              "two labels to learn anything")
    if task == "tagging" and hierarchy.labels == ["O"]:
        raise DataError(path, "every tag is 'O': there is nothing to tag (wrong --tag-column?)")
    return hierarchy


def check_labels_known(path: str, hierarchy: LabelHierarchy, task: str, labels: list) -> None:
    """Fail before training if dev/test holds a label the model cannot output."""
    flat = labels if task == "classification" else [t for tags in labels for t in tags]
    known = {spelling_key(label): label for label in hierarchy.labels}
    for label in dict.fromkeys(flat):
        if label not in hierarchy.index and spelling_key(label) in known:
            raise DataError(path, f"label {label!r} is spelt {known[spelling_key(label)]!r} in the training data; "
                                  "spell each label one way")
        hierarchy.encode(label, path)
