"""What every procedure shares: reading a task's data and building label sets."""

from __future__ import annotations

from dataclasses import dataclass

from distill.data import read_labelled
from distill.labels import LabelHierarchy


@dataclass
class DataOptions:
    """Where examples and labels live in the user's files."""

    text_column: str = "text"
    label_column: str = "label"
    tag_column: int = -1
    separator: str | None = "/"


def read_split(path: str, task: str, options: DataOptions) -> tuple[list, list]:
    """Examples (texts or token lists) and their labels (strings or tag lists)."""
    data = read_labelled(path, task, options.text_column, options.label_column, options.tag_column)
    if task == "classification":
        return data["text"], data["label"]
    return data["tokens"], data["tags"]


def build_hierarchy(task: str, labels: list, options: DataOptions) -> LabelHierarchy:
    """Leaf labels from training data; tags are flat with ``O`` first."""
    if task == "classification":
        return LabelHierarchy.from_labels(labels, options.separator)
    return LabelHierarchy.from_labels((t for tags in labels for t in tags), None, first="O")


def check_labels_known(path: str, hierarchy: LabelHierarchy, task: str, labels: list) -> None:
    """Fail before training if dev/test holds a label the model cannot output."""
    flat = labels if task == "classification" else [t for tags in labels for t in tags]
    for label in dict.fromkeys(flat):
        hierarchy.encode(label, path)
