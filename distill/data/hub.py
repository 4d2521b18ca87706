"""Datasets on the Hugging Face hub, named ``hub:NAME[:CONFIG]:SPLIT``, read through `datasets`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from distill.data.checks import HUB_PREFIX, _check_labels, _require_columns, checked_examples
from distill.errors import DataError, DistillError

if TYPE_CHECKING:
    import datasets


def _parse_hub(spec: str) -> tuple[str, str | None, str]:
    """``hub:NAME[:CONFIG]:SPLIT`` -> (name, config, split)."""
    parts = spec[len(HUB_PREFIX):].split(":")
    if len(parts) == 2:
        return parts[0], None, parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise DistillError(f"{spec}: hub datasets are written hub:NAME[:CONFIG]:SPLIT, e.g. hub:conll2003:train")


def hub_dataset(spec: str) -> str:
    """The Hub's id of the dataset that ``hub:NAME[:CONFIG]:SPLIT`` reads (a model card's ``datasets``)."""
    return _parse_hub(spec)[0]


def load_hub(spec: str) -> datasets.Dataset:
    import datasets
    name, config, split = _parse_hub(spec)
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as err:  # the hub raises many types; the user needs one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DistillError(f"{spec}: cannot load hub dataset ({first}); offline, use a local file") from None


def _hub_examples(spec: str, task: str, example_column: str, label_column: str | None,
                  separator: str | None = None) -> tuple[list, list]:
    """A hub split's examples and labels (none if `label_column` is None), checked as a `datasets.Dataset` given
    in memory is: a hub column may hold nulls, empty or blank strings, which no file reader lets through."""
    data = load_hub(spec)
    if task == "tagging" and label_column is not None and label_column not in data.column_names:
        found = [column for column in data.column_names if column.endswith("tags")]
        raise DataError(spec, f"hub tagging data is read from the columns {example_column!r} and {label_column!r}; "
                              f"this split has no {label_column!r} column ({', '.join(found) or 'no tag columns'}"
                              f"): rename the one to train on to {label_column!r} with the datasets library, or "
                              "export the split as CoNLL")
    _require_columns(spec, data.column_names, [example_column] + ([label_column] if label_column else []))
    inputs = checked_examples(spec, task, list(data[example_column]))
    if label_column is None:
        return inputs, []
    feature = data.features[label_column]
    names = getattr(getattr(feature, "feature", feature), "names", None)  # a ClassLabel, or a sequence of them
    return inputs, _check_labels(spec, task, inputs, list(data[label_column]), names, separator, label_column)


