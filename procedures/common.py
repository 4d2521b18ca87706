"""What every procedure shares: reading a task's data and building label sets."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

from distill.data import read_labelled
from distill.errors import DistillError
from distill.labels import LabelHierarchy
from distill.training import RunState

SUMMARY_FILE = "train_summary.json"


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


def check_writable(output: str | os.PathLike) -> None:
    """Fail before any work if `output` cannot be created or written (its nearest existing folder decides)."""
    path = Path(output).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise DistillError(f"{output}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DistillError(f"{output}: not writable ({existing} is read-only for this user)")


def training_run(output: str, resume: bool, **signature) -> RunState:
    """The run's resume bookkeeping: what identifies it, and whether to continue it.

    `--resume` on a finished run (no resume state, a summary present) is refused rather than
    silently retraining; on a run killed before its first epoch ended it simply starts afresh.
    """
    check_writable(output)
    run = RunState(Path(output), {k: asdict(v) if is_dataclass(v) else v for k, v in signature.items()}, resume)
    if resume and not run.path.exists() and (run.directory / SUMMARY_FILE).exists():
        raise DistillError(f"{output}: this run already finished; nothing to resume (drop --resume to retrain)")
    return run
