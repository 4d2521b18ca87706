"""Readers for labelled and unlabeled text; every reader returns a `datasets.Dataset`.

Classification rows have ``text`` and ``label``; tagging rows have ``tokens`` and ``tags``;
unlabeled rows have ``text`` (classification) or ``tokens`` (tagging). Errors name the file
and line so a user can fix the input. One module a format:

- `distill.data.checks`: what every reader checks of a value (length, visible characters, JSON records);
- `distill.data.hub`: ``hub:NAME`` datasets;
- `distill.data.classification`: CSV, TSV, JSON and JSON-lines classification files;
- `distill.data.conll`: CoNLL tagging files (and JSON lines of tokens and tags);
- `distill.data.unlabeled`: unlabeled text, sniffed line by line, streamed;
- `distill.data.examples`: what the Python API takes (files, `datasets.Dataset`, DataFrames, records), checked alike;
- `distill.data.soft_labels`: files of label distributions (``kd --soft-labels``).

(`datasets` is imported where a reader needs it, so importing the package stays light.)
"""

from distill.deprecation import renamed_module_names
from distill.data.checks import HUB_PREFIX, MAX_EXAMPLE_CHARS, TASKS, checked_examples
from distill.data.hub import load_hub
from distill.data.classification import read_classification, sniff_format
from distill.data.conll import read_tagging
from distill.data.unlabeled import iter_unlabeled, read_unlabeled, sniff_unlabeled, unlabeled_text
from distill.data.examples import (DataOptions, Examples, check_columns_read, check_held_out, is_table, labelled_examples,
                                   memory_source, read_labelled, read_split, unlabeled_examples)
from distill.data.soft_labels import SoftLabelRecords, read_soft_labels

__all__ = ["DataOptions", "Examples", "HUB_PREFIX", "MAX_EXAMPLE_CHARS", "SoftLabelRecords", "TASKS", "check_columns_read",
           "check_held_out", "checked_examples", "is_table", "iter_unlabeled", "labelled_examples", "load_hub",
           "memory_source", "read_classification", "read_labelled", "read_soft_labels", "read_split", "read_tagging",
           "read_unlabeled", "sniff_format", "sniff_unlabeled", "unlabeled_examples", "unlabeled_text"]

# The API says "unlabeled" (as --unlabeled does); the British spellings of the last release still resolve.
__getattr__ = renamed_module_names(__name__, {old.replace("unlabeled", "unlabelled"): old for old in (
    "iter_unlabeled", "read_unlabeled", "sniff_unlabeled", "unlabeled_examples", "unlabeled_text")})
