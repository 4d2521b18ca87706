"""What the Python API takes as data: a file path, a `datasets.Dataset`, a pandas DataFrame, a list of records
or (examples, labels) lists, each checked as a file is; and the held-out check of a dev set."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from distill.data.checks import TASKS, _check_labels, checked_examples, same_text
from distill.data.classification import read_classification
from distill.data.conll import check_tag_scheme, read_tagging
from distill.data.unlabeled import read_unlabeled
from distill.errors import DataError, DistillError
from distill.settings import named, setting

logger = logging.getLogger("distill")

if TYPE_CHECKING:
    import datasets


def read_labelled(path: str, task: str, text_column: str = "text", label_column: str = "label",
                  tag_column: int = -1, separator: str | None = None) -> datasets.Dataset:
    """Dispatch on the task: the one place procedures read labelled data (`separator`: of the hierarchy
    that class labels will build, see `read_classification`)."""
    if task == "classification":
        return read_classification(path, text_column, label_column, separator=separator)
    if task == "tagging":
        return read_tagging(path, tag_column)
    raise DistillError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")


@dataclass
class DataOptions:
    """Where examples and labels live in the user's files (and `datasets.Dataset` columns)."""

    text_column: str = setting("text", help="CSV/TSV/JSONL column with the text.")
    label_column: str = setting("label", help="Column with the class label.")
    tag_column: int = setting(-1, help="CoNLL field holding the tag (-1 = last, e.g. NER in CoNLL-2003; 1 = POS).")
    separator: str | None = setting("/", option="--label-separator", help="Separator of hierarchical labels such as "
                                    "Science/Physics; '' for flat labels.")


def check_columns_read(task: str, options: DataOptions) -> None:
    """For a command that reads one task's labelled data (evaluate): refuse the column options that task's
    reader never reads, which would be accepted and do nothing. (A multi-task teacher's training shares one
    DataOptions between heads of both tasks, so its readers cannot refuse them.)"""
    tag = named(DataOptions, "tag_column", "DataOptions(tag_column=...)")
    if task == "classification" and options.tag_column != -1:
        raise DistillError(f"{tag} picks the CoNLL field of a tagging model's tags, and this model classifies texts "
                           f"(read from the columns that {named(DataOptions, 'text_column', 'text_column')} and "
                           f"{named(DataOptions, 'label_column', 'label_column')} name): drop {tag}")
    given = [named(DataOptions, name, name) for name, default in
             (("text_column", "text"), ("label_column", "label")) if getattr(options, name) != default]
    if task == "tagging" and given:
        raise DistillError(f"{' and '.join(given)} name{'s' if len(given) == 1 else ''} a classification model's "
                           "columns, and this model tags words (read from CoNLL, its tag field picked by "
                           f"{tag}, or from JSONL 'tokens' and 'tags'): drop {'it' if len(given) == 1 else 'them'}")


def read_split(path: str, task: str, options: DataOptions = DataOptions(),
               hierarchy: bool = False) -> tuple[list, list]:
    """Examples (texts or token lists) and their labels (strings or tag lists) from a labelled file; with
    `hierarchy` (data to train on), class labels are read as paths of levels at `options.separator`."""
    data = read_labelled(path, task, options.text_column, options.label_column, options.tag_column,
                         options.separator if hierarchy else None)
    if task == "classification":
        return data["text"], data["label"]
    return data["tokens"], data["tags"]


@dataclass
class Examples:
    """One split of examples (texts or token lists), their labels (None: unlabeled), and where they
    came from: a file path, or ``memory:SHA`` (a digest of the content) for data given in memory, so a
    run's resume signature covers it either way."""

    inputs: list
    labels: list | None
    source: str
    role: str = "data"  # what the caller gave it as (train, dev, unlabeled): its name where it has no file

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def where(self) -> str:
        """The split as messages name it: its file (or hub spec), or, for data given in memory, whose `source`
        is a digest no user knows, its role: ``dev: label 'x' is not one of the model's labels``."""
        return self.role if self.source.startswith("memory:") else self.source


def memory_source(*parts: Sequence) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(list(part), ensure_ascii=False).encode())
    return f"memory:{digest.hexdigest()[:40]}"


def _is_dataset(data: Any) -> bool:
    """A `datasets.Dataset` (or anything with its columns and features), checked without importing it."""
    return hasattr(data, "column_names") and hasattr(data, "features")


def _is_dataframe(data: Any) -> bool:
    """A pandas DataFrame, checked without importing pandas."""
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns") and hasattr(data, "iloc")


def _is_records(data: Any) -> bool:
    """Rows given as a list of dicts (column -> value), as `csv.DictReader` or `DataFrame.to_dict("records")`
    give them."""
    return isinstance(data, (list, tuple)) and bool(data) and isinstance(data[0], dict)


def is_table(data: Any) -> bool:
    """Examples given as a table: a `datasets.Dataset`, a pandas DataFrame or a list of dicts."""
    return _is_dataset(data) or _is_dataframe(data) or _is_records(data)


def _cell(value: Any) -> Any:
    """A DataFrame cell as plain Python: a token array (as parquet gives them) as a list."""
    return value.tolist() if hasattr(value, "tolist") else value


def _table_columns(data: Any, task: str, options: DataOptions, labelled: bool, name: str
                   ) -> tuple[list, list | None, Any]:
    """The example column, the label column (or None) and the label feature (a `datasets` ClassLabel's) of a
    table in memory: a `datasets.Dataset`, a pandas DataFrame or a list of dicts. Classification reads the
    columns `options` names, tagging ``tokens`` and ``tags``."""
    example_column = options.text_column if task == "classification" else "tokens"
    label_column = options.label_column if task == "classification" else "tags"
    wanted = [example_column, label_column] if labelled else [example_column]
    naming = "name them with DataOptions(text_column=..., label_column=...)" if task == "classification" else \
        "a tagging table has a 'tokens' and a 'tags' column"
    if _is_records(data):
        for row, record in enumerate(data):
            if not isinstance(record, dict):
                raise DataError(name, f"example {row} is a {type(record).__name__}, not a dict as the first one is: "
                                      "give every row as a dict of columns")
            missing = [column for column in wanted if column not in record]
            if missing:
                raise DataError(name, f"example {row} has no key {missing[0]!r} (keys: "
                                      f"{', '.join(map(str, record))}); {naming}")
        return [record[example_column] for record in data], \
            [record[label_column] for record in data] if labelled else None, None
    columns = list(data.column_names) if _is_dataset(data) else [str(column) for column in data.columns]
    missing = [column for column in wanted if column not in columns]
    if missing:
        raise DataError(name, f"no column {missing[0]!r} (columns: {', '.join(columns)}); {naming}")
    if _is_dataframe(data):
        return [_cell(value) for value in data[example_column].tolist()], \
            [_cell(value) for value in data[label_column].tolist()] if labelled else None, None
    feature = data.features[label_column] if labelled else None
    feature = getattr(feature, "feature", feature)  # a sequence of ClassLabel for tags
    return list(data[example_column]), list(data[label_column]) if labelled else None, feature


def labelled_examples(data: Any, task: str, options: DataOptions = DataOptions(), name: str = "data") -> Examples:
    """Labelled examples from a file path, a table (`datasets.Dataset`, pandas DataFrame or list of dicts, with
    text/label or tokens/tags columns; a ClassLabel feature gives label names) or an (examples, labels) pair
    of sequences."""
    if isinstance(data, (str, Path)):
        inputs, labels = read_split(str(data), task, options, hierarchy=True)
        return Examples(list(inputs), list(labels), str(data), name)
    names = column = None  # a list of labels has no column
    if is_table(data):
        inputs, labels, feature = _table_columns(data, task, options, True, name)
        names = getattr(feature, "names", None)
        column = options.label_column if task == "classification" else "tags"
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        inputs, labels = list(data[0]), list(data[1])
    else:
        raise DistillError(f"{name}: give a file path, a datasets.Dataset, a pandas DataFrame, a list of dicts or "
                           f"an (examples, labels) pair, not {type(data).__name__}")
    inputs = checked_examples(name, task, inputs)
    labels = _check_labels(name, task, inputs, labels, names, options.separator, column)
    if task == "tagging":
        check_tag_scheme(name, labels)
    return Examples(inputs, labels, memory_source(inputs, labels), name)


def unlabeled_examples(data: Any, task: str, options: DataOptions = DataOptions(), name: str = "unlabeled"
                        ) -> Examples:
    """Unlabeled examples from a file path (one per line, or JSONL), a table (`datasets.Dataset`, pandas
    DataFrame or list of dicts: its text or tokens column) or a sequence of examples."""
    if isinstance(data, (str, Path)):
        read = read_unlabeled(str(data), task, options.text_column)
        return Examples(list(read["text" if task == "classification" else "tokens"]), None, str(data), name)
    if is_table(data):
        inputs = _table_columns(data, task, options, False, name)[0]
    elif isinstance(data, (list, tuple)):
        inputs = list(data)
    else:
        raise DistillError(f"{name}: give a file path, a datasets.Dataset, a pandas DataFrame, a list of dicts or "
                           f"a list of examples, not {type(data).__name__}")
    inputs = checked_examples(name, task, inputs)
    return Examples(inputs, None, memory_source(inputs), name)


HELD_OUT_REFUSED = 0.5  # a dev set this much made of training examples picks epochs on what the model learns
HELD_OUT_WARNED = 0.2  # natural splits share a few short examples (CoNLL-2003: 6% of valid's sentences)


def _example_key(example: Any) -> str:
    """An example as compared across sets: a text as `same_text` compares it, or a token list."""
    return json.dumps(same_text(example) if isinstance(example, str) else example, ensure_ascii=False)


def check_held_out(train: Examples, dev: Examples, other: str = "the training data") -> None:
    """Refuse a dev set that is (mostly) data the model learns from: `train` is the training data, or the
    unlabeled data a student learns its teacher's outputs on, named by `other` in the messages. Its score
    would pick the epoch that fits that data best and early stopping would never stop, with nothing to tell
    the user. Exact copies of an example (its text, or its token list) count; a smaller share gets a warning."""
    seen = {_example_key(example) for example in train.inputs}
    shared = sum(_example_key(example) in seen for example in dev.inputs) / max(len(dev.inputs), 1)
    where = dev.where  # its file, or for data given in memory its role (dev, head NAME's dev)
    if shared >= HELD_OUT_REFUSED:
        raise DataError(where, f"{shared:.0%} of its examples are also in {other}, so the best epoch would be "
                               "picked on examples the model learns from: give a held-out dev set")
    if shared >= HELD_OUT_WARNED:
        logger.warning(f"warning: {where}: {shared:.0%} of its examples are also in {other}; its scores will read high")


