"""Label vocabularies, stored with every model; hierarchical labels such as ``Science/Physics``;
the scheme of a tag set (IOB1, IOB2, IOBES, BILOU or plain tags), which decides how it is scored."""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from distill.errors import DataError, DistillError, option


@dataclass
class LabelHierarchy:
    """The leaf labels a model predicts, and how they roll up to coarser levels.

    A leaf ``Science/Physics`` with separator ``/`` belongs to ``Science`` at level 0 and
    to ``Science/Physics`` at level 1. Flat labels are a one-level hierarchy.
    """

    labels: list[str]
    separator: str | None = "/"
    counts: dict[str, int] = field(default_factory=dict)
    scheme: str | None = None  # tagging only: one of TAG_SCHEMES (see `detect_tag_scheme`)

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
        """The index of `label`; one that is not in the set is refused in words that fit any model's labels: a trained
        model's come from its training data, a zero-shot teacher's from its label names, a transformers or ONNX
        classifier's from its config."""
        try:
            return self.index[label]
        except KeyError:
            known = ", ".join(self.labels[:10]) + (" ..." if len(self.labels) > 10 else "")
            prefix = f"{where}: " if where else ""
            raise DistillError(f"{prefix}label {label!r} is not one of the model's labels (known: {known})") from None

    def decode(self, index: int) -> str:
        return self.labels[index]

    def at_level(self, label: str, level: int) -> str:
        """The ancestor of `label` at `level` (0 = coarsest); shallower labels map to themselves."""
        if not self.separator:
            return label
        return self.separator.join(label.split(self.separator)[: level + 1])

    def class_weights(self, mode: str | Sequence[float] | None) -> list[float] | None:
        """Class weights for the NLL: None, 'inverse' frequency (mean 1), or one number per label (a list, or
        the CLI's comma-separated text, `parse_class_weights`): never a string read character by character."""
        if isinstance(mode, str):
            mode = parse_class_weights(mode)
        if mode is None:
            return None
        if mode == "inverse":
            if not self.counts:
                raise DistillError("inverse-frequency class weights need label counts from training data")
            raw = [1.0 / max(self.counts.get(label, 0), 1) for label in self.labels]
            scale = len(raw) / sum(raw)
            return [w * scale for w in raw]
        weights = [_weight(w) for w in mode] if isinstance(mode, Iterable) and not isinstance(mode, (str, bytes)) \
            else [None]
        if None in weights:
            raise DistillError('class_weights: give "inverse", None or one number per label (a list in label order, '
                               f"e.g. [1.0, 2.5]), not {mode!r:.60}")
        if len(weights) != len(self.labels):
            raise DistillError(f"{len(weights)} class weights given for {len(self.labels)} labels {self.labels}")
        if not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
            raise DistillError("class weights must be finite, >= 0 and not all 0")
        return weights

    def to_dict(self) -> dict:
        data = {"labels": list(self.labels), "separator": self.separator, "depth": self.depth,
                "counts": dict(self.counts)}
        return data if self.scheme is None else {**data, "scheme": self.scheme}

    @classmethod
    def from_dict(cls, data: dict) -> "LabelHierarchy":
        return cls(list(data["labels"]), data.get("separator"), dict(data.get("counts", {})), data.get("scheme"))

    @property
    def tag_scheme(self) -> str:
        """The scheme of a tag set: as detected on the training data, or, for a model saved before
        schemes were recorded (or labels built by hand), what the labels show (`scheme_of_labels`)."""
        return self.scheme or scheme_of_labels(self.labels)

    def check_same(self, other: "LabelHierarchy", what: str) -> None:
        """Distillation maps logits by label, so both sides need the same labels (`in_order_of` puts them in
        the model's order: a model saved before the outside tag of a lower-case set went first has another)."""
        if set(self.labels) != set(other.labels):
            raise DistillError(f"{what}: label sets differ: teacher {self.labels} vs {other.labels}")

    def in_order_of(self, model: "LabelHierarchy") -> "LabelHierarchy":
        """These labels (counts, separator, scheme) in the order of `model`'s, which its logits follow."""
        return LabelHierarchy(list(model.labels), self.separator, self.counts, self.scheme)


def parse_class_weights(text: str) -> str | list[float] | None:
    """`--class-weights` as written: "none" (None), "inverse", or comma-separated numbers in label order."""
    if text in ("none", "inverse"):
        return None if text == "none" else text
    try:
        weights = [float(value) for value in text.split(",")]
    except ValueError:
        raise DistillError(f"class weights: use none, inverse, or comma-separated numbers in label order, not "
                           f"{text!r:.60}") from None
    if not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
        raise DistillError("class weights must be finite, >= 0 and not all 0")
    return weights


def _weight(value: object) -> float | None:
    """A class weight as a number; None for what is no number (a string, a bool, None, a list)."""
    if isinstance(value, (str, bytes, bool)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


CLASS_WEIGHTS_OPTION = {"parse": parse_class_weights, "cli_default": "none", "metavar": "none|inverse|W,W,...",
                        "help": "NLL class weights: none, inverse (frequency), or comma-separated values."}

TAG_SCHEMES = ("IOB1", "IOB2", "IOBES", "BILOU", "plain")
ENTITY_PREFIXES = ("B", "I", "E", "S", "L", "U")


def split_tag(tag: str) -> tuple[str | None, str]:
    """(prefix, type) of an entity tag, the prefix upper-cased (``b-per`` -> ``("B", "per")``), so a
    lower-case scheme reads like the upper-case one; (None, tag) for ``O`` and plain tags."""
    prefix, dash, kind = tag.partition("-")
    if dash and kind and prefix.upper() in ENTITY_PREFIXES:
        return prefix.upper(), kind
    return None, tag


def _scheme_of_prefixes(prefixes: set[str]) -> str | None:
    if not prefixes:
        return "plain"
    if prefixes & {"L", "U"}:
        return "BILOU"
    if prefixes & {"E", "S"}:
        return "IOBES"
    return None  # B/I alone: IOB1 or IOB2, which the tag sequences tell apart


def scheme_of_labels(labels: Iterable[str]) -> str:
    """The scheme a label set shows without its sequences: B/I-only sets count as IOB2 (an I- type
    without its B- tag as IOB1). For models saved before the scheme was recorded."""
    split = [split_tag(label) for label in labels]
    scheme = _scheme_of_prefixes({prefix for prefix, _ in split if prefix})
    if scheme is not None:
        return scheme
    begun = {kind for prefix, kind in split if prefix == "B"}
    return "IOB1" if any(prefix == "I" and kind not in begun for prefix, kind in split) else "IOB2"


def detect_tag_scheme(tag_sequences: Iterable[Sequence[str]]) -> str:
    """The scheme of training tags: BILOU (L-/U- prefixes), IOBES (E-/S-), IOB1 (some entity starts
    with I-: CoNLL-2003's original files), IOB2 (every entity starts with B-), or plain tags (POS)."""
    sequences = [[split_tag(tag) for tag in tags] for tags in tag_sequences]
    scheme = _scheme_of_prefixes({prefix for tags in sequences for prefix, _ in tags if prefix})
    if scheme is not None:
        return scheme
    for tags in sequences:
        for (before, before_kind), (prefix, kind) in zip([(None, "O")] + tags, tags):
            if prefix == "I" and (before is None or before_kind != kind):
                return "IOB1"
    return "IOB2"


def spelling_key(label: str) -> str:
    """What two spellings of one label share: Unicode form, case, spacing, invisible format characters
    (a zero-width space pasted from the web) and number format aside (``1`` and ``1.0``, as spreadsheet
    exports write integers)."""
    visible = "".join(ch for ch in unicodedata.normalize("NFKC", label) if unicodedata.category(ch) != "Cf")
    key = " ".join(visible.casefold().split())
    try:
        number = float(key)
    except ValueError:
        return key
    return str(int(number)) if number.is_integer() else key


# Characters that show nothing on their own: every Unicode space (U+00A0, U+2028, U+3000...), format
# characters (U+200B ZERO WIDTH SPACE, U+2060, U+FEFF...), controls, and the letters drawn blank (the
# Hangul fillers, the blank Braille pattern).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = ("Cf", "Cc", "Zs", "Zl", "Zp")


def shows_nothing(value: str) -> bool:
    """Whether `value` shows nothing in an editor: only spaces, format and control characters (or nothing)."""
    return all(char.isspace() or char in _BLANK_LETTERS or unicodedata.category(char) in _INVISIBLE_CATEGORIES
               for char in value)


def check_levels(where: str, label: str, separator: str | None, line: int | None = None) -> None:
    """Refuse a `label` that is no path of named levels at `separator` (none: flat labels, nothing to check).

    ``/a``, ``a/``, ``a//b`` and ``a/`` + U+200B have an empty level (one that `shows_nothing`): the first
    would train a level-0 class named '' and the last a deeper hierarchy than the labels mean, silently.
    Every reader of labelled data that will build a hierarchy applies this, where it knows the file and
    `line` (or the example: `where`)."""
    if not separator or separator not in label:
        return
    levels = label.split(separator)
    if not any(map(shows_nothing, levels)):  # a level of a zero-width space alone is as empty as ''
        return
    flat = option("--label-separator ''", "DataOptions(separator=None)")
    raise DataError(where, f"label {label!r} has an empty level (split at {separator!r}: "
                           f"{', '.join(map(repr, levels))}); name every level, as in 'Science{separator}Physics', "
                           f"or, if {separator!r} is part of flat labels, read them flat with {flat}", line)


def check_one_spelling(labels: Iterable[str], path: str) -> None:
    """Every label of a file spelt one way (`spelling_key`): ``Positive`` beside ``positive`` would become two
    classes, the model splitting one label's examples between them."""
    seen: dict[str, str] = {}
    for label in labels:
        other = seen.setdefault(spelling_key(label), label)
        if other != label:
            raise DataError(path, f"labels {other!r} and {label!r} differ only in case, spacing, Unicode form, "
                                  "invisible characters or number format; spell each label one way")


def build_hierarchy(task: str, labels: list, separator: str | None, path: str) -> LabelHierarchy:
    """Leaf labels from training data; tags are flat with the outside tag (``O``, or ``o`` in a lower-case
    tag set) first: a word the model reads no sub-token of keeps zero logits and so gets tag 0.

    Refused, since training on them would give a silently wrong model: one label or tag only (a
    model that cannot be wrong), and two spellings of one label (``Positive`` / ``positive``),
    which would become two classes.
    """
    if task == "classification":
        hierarchy = LabelHierarchy.from_labels(labels, separator)
    else:
        tags = [t for sentence in labels for t in sentence]
        outside = "o" if "o" in tags and "O" not in tags else "O"
        hierarchy = LabelHierarchy.from_labels(tags, None, first=outside)
        hierarchy.scheme = detect_tag_scheme(labels)
    check_one_spelling(hierarchy.labels, path)
    if task == "classification" and len(hierarchy) < 2:
        raise DataError(path, f"every example has the label {hierarchy.labels[0]!r}: a classifier needs at least "
                              "two labels to learn anything")
    if task == "tagging" and len(hierarchy) < 2:
        column = option("--tag-column", "DataOptions(tag_column=...)")
        raise DataError(path, f"every tag is {hierarchy.labels[0]!r}: there is nothing to tag (wrong {column}?)")
    return hierarchy


def check_labels_known(path: str, hierarchy: LabelHierarchy, task: str, labels: list) -> None:
    """Fail before training or scoring if dev/test holds a label the model cannot output (`hierarchy`: the
    model's labels, or those of the training data it will learn)."""
    flat = labels if task == "classification" else [t for tags in labels for t in tags]
    known = {spelling_key(label): label for label in hierarchy.labels}
    for label in dict.fromkeys(flat):
        if label not in hierarchy.index and spelling_key(label) in known:
            raise DataError(path, f"label {label!r} is spelt {known[spelling_key(label)]!r} in the model's labels; "
                                  "spell each label one way")
        hierarchy.encode(label, path)
