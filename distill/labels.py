"""Label vocabularies, stored with every model; hierarchical labels such as ``Science/Physics``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from distill.errors import DistillError


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
