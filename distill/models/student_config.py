"""What a student is: the config classes of the built-in students, whose fields (with `option`'s metadata) are
also the CLI's architecture options. A student class names its config as `config_class`; how it was trained lives
in `distill.training.TrainSettings`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from distill.errors import DistillError


def option(default, help: str, **cli) -> Any:
    """A config field with what the CLI needs to offer it as an option: help text and limits
    (``min``, ``max``, ``max_open``, ``choices``) or a ``flag`` declaration."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **cli})
    return field(default=default, metadata={"help": help, **cli})


TYPE_NAMES = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string",
              "list": "a list of whole numbers"}


def has_type(value: Any, annotation: str) -> bool:
    """Whether `value` (from the API or a config.json) fits a config field annotated `annotation`;
    JSON's true is no number and 1 is no boolean. Other annotations are not checked."""
    if annotation not in TYPE_NAMES:
        return True
    if annotation == "bool" or isinstance(value, bool):
        return annotation == "bool" and isinstance(value, bool)
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    return {"int": whole(value), "float": isinstance(value, (int, float)), "str": isinstance(value, str),
            "list": isinstance(value, list) and all(whole(v) for v in value)}[annotation]


@dataclass
class StudentConfig:
    """What a student is, never how it was trained: a run's settings live in
    `distill.training.TrainSettings`. Each student class has a subclass with its own fields."""

    NEW_SINCE_FORMAT_1: ClassVar[tuple[str, ...]] = ()  # fields whose name meant another model's setting then

    model: str = "lstm"

    def __post_init__(self):
        """Each option within what its CLI option takes (choices, limits), from the API and saved
        configs alike: a value the CLI refuses must not train silently (or never end) from Python."""
        for spec in fields(self):
            meta, value = spec.metadata, getattr(self, spec.name)
            if not has_type(value, str(spec.type)):
                raise DistillError(f"{spec.name} must be {TYPE_NAMES[str(spec.type)]}, got {value!r}")
            if value == [] and str(spec.type) == "list":  # no widths: a CNN whose classifier reads nothing
                raise DistillError(f"{spec.name} must be a non-empty list of whole numbers, got []")
            if "choices" in meta and value not in meta["choices"]:
                raise DistillError(f"{spec.name} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}")
            low, high = meta.get("min"), meta.get("max")
            for number in value if isinstance(value, list) else [value]:
                if not isinstance(number, (int, float)) or isinstance(number, bool) or (low is None and high is None):
                    continue
                open_top = meta.get("max_open", False)
                if not (math.isfinite(number) and (low is None or number >= low) and (
                        high is None or (number < high if open_top else number <= high))):
                    bounds = f">= {low}" if high is None else f"within [{low}, {high}{')' if open_top else ']'}"
                    raise DistillError(f"{spec.name} must be {bounds}, got {value!r}")

    @classmethod
    def from_dict(cls, data: dict, where: str = "student config") -> "StudentConfig":
        """A config from saved JSON; a key this class does not know is an error, never dropped."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DistillError(f"{where}: unknown setting(s) {', '.join(unknown)} for {cls.__name__} "
                               f"(known: {', '.join(sorted(known))})")
        return cls(**data)


@dataclass
class WordStudentConfig(StudentConfig):
    """A student that reads words (`StudentModel`): embedding width, dropout and its word vocabulary."""

    embedding_dim: int = option(100, "Word embedding width.", min=1)
    dropout: float = option(0.5, "Dropout: on embeddings and features (word students); before the Linear layer "
                                 "(transformer students).", min=0.0, max=1.0, max_open=True)
    lowercase: bool = option(True, "Lowercase words in the vocabulary (characters keep case anyway).",
                             flag="--lowercase/--cased")
    min_freq: int = option(1, "Vocabulary minimum count.", min=1)
    max_vocab: int = option(50000, "Largest word vocabulary, <pad> and <unk> included.", min=3)


POOLINGS = ["last", "max", "mean", "max-mean"]
POOLING_HELP = ("Text features over time: the last real state of each LSTM direction, the max, the mean, "
                "or max and mean side by side.")


@dataclass
class ClassifierConfig(WordStudentConfig):
    """A text classifier's config: with two labels it may output one logit (sigmoid) instead of two."""

    binary: bool = option(False, "Classifiers with two labels: one logit + sigmoid (BCE).", flag="--binary")


@dataclass
class PoolingClassifierConfig(ClassifierConfig):
    """A classifier that pools a text's states over time into one vector."""

    pooling: str = option("last", POOLING_HELP, choices=POOLINGS)


@dataclass
class LSTMClassifierConfig(PoolingClassifierConfig):
    model: str = "lstm"
    hidden_dim: int = option(150, "LSTM units per direction.", min=1)
    layers: int = option(1, "Layers: of the LSTM; of the encoder, for a transformer student.", min=1)


@dataclass
class CNNClassifierConfig(PoolingClassifierConfig):
    NEW_SINCE_FORMAT_1: ClassVar[tuple[str, ...]] = ("pooling",)  # the LSTM's, in format 1's config of all students

    model: str = "cnn"
    pooling: str = option("max", POOLING_HELP, choices=POOLINGS)  # Kim's CNN: max over time
    filters: int = option(100, "CNN filters per width, or ID-CNN channels.", min=1)
    filter_widths: list = option([3, 4, 5], "Convolution widths, comma-separated.", min=1)

    def __post_init__(self):
        super().__post_init__()
        if self.pooling == "last":
            raise DistillError("pooling 'last' reads an LSTM's final states: a cnn pools max, mean or max-mean")


@dataclass
class TaggerConfig(WordStudentConfig):
    model: str = "lstm-tagger"
    char_embedding_dim: int = option(30, "Character embedding width.", min=1)
    char_filters: int = option(50, "Character CNN filters (word features from characters).", min=1)
    char_width: int = option(3, "Character CNN width.", min=1)
    crf: bool = option(False, "CRF output layer (Viterbi decoding).", flag="--crf")


@dataclass
class LSTMTaggerConfig(TaggerConfig):
    hidden_dim: int = option(150, "LSTM units per direction.", min=1)
    layers: int = option(1, "Layers: of the LSTM; of the encoder, for a transformer student.", min=1)


@dataclass
class IDCNNTaggerConfig(TaggerConfig):
    model: str = "idcnn-tagger"
    filters: int = option(100, "CNN filters per width, or ID-CNN channels.", min=1)
    idcnn_dilations: list = option([1, 2, 1], "Dilations of the ID-CNN block, comma-separated.", min=1)
    idcnn_iterations: int = option(4, "Times the ID-CNN block is applied.", min=1)
