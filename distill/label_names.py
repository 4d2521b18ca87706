"""Label names given without training data: ``--labels "negative=a negative review,positive=a positive review"``.

Teachers that need no labelled data (a zero-shot encoder teacher, a causal language model, a served model)
learn the label set from here: each label's name, and the descriptions that stand for it in a prompt or
are embedded for it (several per label with ``|``: ``positive=a good film|a rave``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from distill.data.checks import _check_visible
from distill.errors import DistillError, option
from distill.labels import spelling_key


@dataclass(frozen=True)
class LabelNames:
    """The labels in the order given, and for each one or more descriptions (its name when none is given)."""

    names: tuple[str, ...]
    descriptions: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if len(self.names) < 2:
            raise DistillError(f"{option('--labels', 'labels')} needs at least two labels, got "
                               f"{list(self.names)}")
        if len(set(self.names)) != len(self.names):
            raise DistillError(f"{option('--labels', 'labels')} names a label twice: {list(self.names)}")
        if len(self.descriptions) != len(self.names):
            raise DistillError("each label needs its descriptions")
        owner: dict[str, str] = {}
        for name, described in zip(self.names, self.descriptions):
            for words in described:  # two labels asked or embedded alike would score alike for every text: the
                other = owner.setdefault(spelling_key(words), name)  # data's rule for two spellings of one label
                if other != name:
                    raise DistillError(f"{option('--labels', 'labels')} describes {other} and {name} alike "
                                       f"({words!r}): each label needs words of its own")

    @classmethod
    def of_data(cls, labels: list[str]) -> "LabelNames":
        """The labels a labelled file holds, each standing for itself: a label is read as it is written, never as
        ``NAME=WORDS`` (``<=50K`` is a label, not ``<`` described as ``50K``)."""
        names = tuple(sorted(set(labels)))
        return cls(names, tuple((name,) for name in names))

    @classmethod
    def named(cls, labels: Sequence[str]) -> "LabelNames":
        """Labels named in Python, in the order given, each standing for itself and read as it is written (its
        blanks trimmed), never as ``NAME=WORDS``: ``<=50K`` is a label, as it is in data (`of_data`)."""
        names = []
        for name in labels:
            if not isinstance(name, str) or not name.strip():
                raise DistillError(f"{option('--labels', 'labels')}: {name!r} is no label name (a text that is not "
                                   "blank)")
            _check_visible(option("--labels", "labels"), name, f"the label {name!r}", None)
            names.append(name.strip())
        return cls(tuple(names), tuple((name,) for name in names))

    def require_named(self, path: str, labels: list[str], labels_option: str) -> None:
        """Every label of the labelled file `path` (`labels`) is one of these, else one line naming the rest:
        the label set is this one, and nothing else can be scored or shown (`labels_option`: how the caller
        gives these names)."""
        unknown = sorted(set(labels) - set(self.names))
        if unknown:
            raise DistillError(f"{path}: has labels that {labels_option} does not name: {', '.join(unknown[:5])}")

    def description(self, name: str) -> str:
        """The first description of `name`: the words a prompt uses for it."""
        return self.descriptions[self.names.index(name)][0]

    def as_text(self) -> str:
        """The ``--labels`` spelling of these labels, which `parse_labels` reads back (a label standing for
        itself after one with descriptions written ``NAME=NAME``, as a name alone there is refused)."""
        items, described_before = [], False
        for name, described in zip(self.names, self.descriptions):
            alone = described == (name,) and not described_before
            items.append(name if alone else f"{name}={'|'.join(described)}")
            described_before = described_before or not alone
        return ",".join(items)


def parse_labels(text: str | list[str] | tuple[str, ...]) -> LabelNames:
    """``"negative,positive"`` or ``"negative=a negative review,positive=a positive review|a rave"`` (or a list of
    such items, one label each), into `LabelNames`; empty names or descriptions are refused in one line. In one
    text a comma separates labels, so a name alone after a label with descriptions is refused as ambiguous (a label
    of its own, or the rest of the words before it, "negative=bad, awful"?); a list's items may hold commas."""
    one_text = isinstance(text, str)
    items = [item.strip() for item in text.split(",")] if one_text else [str(i).strip() for i in text]
    names, descriptions, described_before = [], [], None
    for item in items:
        name, equals, described = item.partition("=")
        name = name.strip()
        texts = tuple(d.strip() for d in described.split("|")) if equals else (name,)
        if not name or not all(texts):
            raise DistillError(f"{option('--labels', 'labels')}: {item!r} is not NAME or NAME=DESCRIPTION "
                               "(several descriptions joined by '|')")
        if one_text and not equals and described_before is not None:
            raise DistillError(f"{option('--labels', 'labels')}: {item!r} after {described_before!r} is ambiguous, a "
                               f"label of its own or words of the one before: write {name}={name} for a label, or "
                               f"{option('give --labels once per label', 'give labels as a list')}, whose words "
                               "may hold commas")
        described_before = item if equals else described_before
        for words in (name, *texts):  # a zero-width space pasted alone: a label that shows nothing, as data's is refused
            _check_visible(option("--labels", "labels"), words, f"the label {item!r}", None)
        names.append(name)
        descriptions.append(texts)
    return LabelNames(tuple(names), tuple(descriptions))
