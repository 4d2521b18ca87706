"""What every procedure shares: reading a task's data and building label sets."""

from __future__ import annotations

import contextlib
import unicodedata
from dataclasses import asdict, dataclass, is_dataclass
from typing import Iterator

from distill.data import read_labelled
from distill.errors import DataError
from distill.labels import LabelHierarchy
from distill.outputs import model_output
from distill.training import RunState, input_fingerprints, runtime_settings

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


def spelling_key(label: str) -> str:
    """What two spellings of one label share: Unicode form, case, spacing and number format aside
    (``1`` and ``1.0``, as spreadsheet exports write integers)."""
    key = " ".join(unicodedata.normalize("NFKC", label).casefold().split())
    try:
        number = float(key)
    except ValueError:
        return key
    return str(int(number)) if number.is_integer() else key


def build_hierarchy(task: str, labels: list, options: DataOptions, path: str) -> LabelHierarchy:
    """Leaf labels from training data; tags are flat with ``O`` first.

    Refused, since training on them would give a silently wrong model: one label only (a
    classifier that cannot be wrong), tags that are all ``O``, and two spellings of one label
    (``Positive`` / ``positive``), which would become two classes.
    """
    if task == "classification":
        hierarchy = LabelHierarchy.from_labels(labels, options.separator)
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


@contextlib.contextmanager
def training_run(output: str, resume: bool, overwrite: bool, inputs: dict[str, str | None],
                 **settings) -> Iterator[RunState]:
    """The run's output directory (checked, locked, cleaned up on failure: `distill.outputs`) and its
    resume bookkeeping.

    The resume signature holds every setting that changes the result, the runtime (precision,
    threads, processes) and a content fingerprint of every input, so `--resume` after any of them
    changed is refused, never continued with a mix.
    """
    with model_output(output, inputs.values(), overwrite, resume) as directory:
        signature = {k: asdict(v) if is_dataclass(v) else v for k, v in settings.items()}
        signature.update(inputs=input_fingerprints(inputs), runtime=runtime_settings())
        yield RunState(directory, signature, resume)
