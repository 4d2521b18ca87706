"""Transformer students: the teacher with fewer encoder layers, or a smaller pretrained encoder.

Between the teacher (22.6M parameters, about 110 examples/s on a CPU) and the 2M-parameter
BiLSTM/CNN students, a student keeps `layers` of an encoder's layers, chosen by `layer_map`
(DistilBERT's every other layer by default), with the encoder's embeddings. Where they come from
(`encoder`):

* ``teacher``: the teacher's fine-tuned encoder, and its head too (same width; copied when the
  labels are the teacher's, fresh otherwise). `kd` copies its teacher; `student` the model of
  ``--embeddings-from-teacher DIR``.
* a pretrained encoder (``minilm-l6``, ``mpnet-base``, a folder, a hub name) and a fresh head. Its
  tokenizer may differ from the teacher's: classification distils sentence logits, tagging the
  logits of each word's first sub-token on both sides, so nothing else changes.

The student reads text exactly as the teacher does (a `Teacher` module inside does the reading and
scoring): a pooled sentence for classification, each word's first sub-token in windows of whole
words for tagging, on the same (sentences, words) grid; a text to classify is cut at `max_length`, also
when the teacher reads long texts in windows (`--long-inputs windows`). Saved as weights (``model.safetensors``),
``config.json`` (config and labels) and the encoder's config and tokenizer (``encoder/``), every file
in the card's checksums. `transformers` is imported when one is built or loaded, not when the
registry lists the students (loading a BiLSTM stays light).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch
from torch import nn

from distill import errors
from distill.errors import DistillError
from distill.io import atomic_directory, content_fingerprint, read_json
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel, ReadsSubWords
from distill.models.card import folder_files
from distill.models.registry import register_student
from distill.models.student_config import StudentConfig, option
from distill.models.students import CONFIG, WEIGHTS, StudentFiles, write_student_config

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

FROM_TEACHER = "teacher"
ENCODER_DIR = "encoder"  # as the teacher's: the encoder's config and tokenizer
LAYER_MAPS = ("uniform", "first", "last")
POOLINGS = ("auto", "first", "mean")
DEFAULT_MAX_LENGTH = 128  # what a student without a teacher reads when max_length is 0 ("its teacher's")


@dataclass
class TransformerStudentConfig(StudentConfig):
    model: str = "transformer"
    encoder: str = option(FROM_TEACHER, "Where a transformer student's layers come from: 'teacher' (the teacher's "
                                        "fine-tuned encoder and head) or a pretrained encoder: minilm-l6, mpnet-base, "
                                        "a folder.")
    layers: int = option(3, "Layers: of the LSTM; of the encoder, for a transformer student.", min=1)
    layer_map: str = option("uniform", "Which encoder layers a transformer student keeps: uniform (layer i*n/k of n, "
                                       "DistilBERT's 0,2,4 of 6), first, last, or numbers such as 0,2,5.",
                            metavar="uniform|first|last|N,N,...")
    dropout: float = option(0.1, "Dropout before the Linear layer (the encoder keeps its own).", min=0.0, max=1.0,
                            max_open=True)
    max_length: int = option(0, "Sub-word tokens a transformer student reads (tagging: per window of words); 0: "
                                "its teacher's (kd, --embeddings-from-teacher), else 128.", min=0)
    # Not options: copied from the teacher with its weights (else the encoder's own pooling, "auto").
    sentence_pooling: str = "auto"
    pre_classifier: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.sentence_pooling not in POOLINGS:
            raise DistillError(f"transformer student sentence_pooling {self.sentence_pooling!r}: choose one of "
                               f"{', '.join(POOLINGS)}")
        explicit_layers(self.layer_map, self.layers)  # its form now; its range against the encoder's depth at build
        if 0 < self.max_length < 8:
            raise DistillError(f"max_length must be 0 (its teacher's) or >= 8, got {self.max_length}")


@dataclass
class TransformerTaggerConfig(TransformerStudentConfig):
    model: str = "transformer-tagger"


def explicit_layers(layer_map: str, layers: int) -> list[int] | None:
    """The layer numbers `layer_map` lists (None for uniform, first or last), `layers` of them."""
    if layer_map in LAYER_MAPS:
        return None
    try:
        chosen = [int(v) for v in layer_map.split(",")]
    except ValueError:
        raise DistillError(f"layer map {layer_map!r}: use {', '.join(LAYER_MAPS)} or layer numbers such as "
                           "0,2,5") from None
    if len(chosen) != layers:
        count = errors.option(f"--layers {len(chosen)}", f"TransformerStudentConfig(layers={len(chosen)})")
        raise DistillError(f"layer map {layer_map} keeps {len(chosen)} layers, not {layers}: set {count}")
    return chosen


def _minilm() -> str:
    """A pretrained encoder for a transformer student, as the caller names one."""
    return errors.option("--encoder minilm-l6", "TransformerStudentConfig(encoder='minilm-l6')")


def kept_layers(layer_map: str, layers: int, depth: int) -> list[int]:
    """The indices of the `layers` layers of a `depth`-layer encoder that `layer_map` keeps."""
    chosen = explicit_layers(layer_map, layers) or {
        "uniform": [i * depth // layers for i in range(layers)],
        "first": list(range(layers)),
        "last": list(range(depth - layers, depth)),
    }[layer_map]
    if layers > depth:
        raise DistillError(f"a transformer student of {layers} layers: its encoder has only {depth}")
    if chosen != sorted(set(chosen)) or chosen[0] < 0 or chosen[-1] >= depth:
        raise DistillError(f"layer map {layer_map}: give increasing layer numbers from 0 to {depth - 1}")
    return chosen


def encoder_depth(encoder: PreTrainedModel) -> int:
    """How many layers `encoder` has (its config's ``num_hidden_layers``)."""
    depth = getattr(encoder.config, "num_hidden_layers", None)
    if not isinstance(depth, int) or depth < 1:
        raise DistillError(f"encoder {type(encoder).__name__} does not say how many layers it has (no "
                           "num_hidden_layers in its config): a transformer student cannot keep some of them")
    return depth


def layer_stack(encoder: PreTrainedModel) -> tuple[nn.Module, str]:
    """The module holding the encoder's layers and its attribute name (DistilBERT's ``transformer.layer``,
    BERT's and MPNet's ``encoder.layer``): the first list of as many modules as the encoder has layers."""
    depth = encoder_depth(encoder)
    for name, module in encoder.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == depth and name:
            parent, _, attribute = name.rpartition(".")
            return encoder.get_submodule(parent), attribute
    every = errors.option(f"--layers {depth}", f"TransformerStudentConfig(layers={depth})")
    raise DistillError(f"cannot find the layers of encoder {type(encoder).__name__} to keep some of (it has no "
                       f"list of its {depth} layers: they may share their weights): keep all of them, {every}")


def cut_layers(encoder: PreTrainedModel, keep: list[int]) -> PreTrainedModel:
    """A copy of `encoder` with only the layers `keep`, in order (embeddings and the rest copied); the
    config's per-layer settings (a list of one entry per layer: ModernBERT's ``layer_types``, Longformer's
    ``attention_window``) keep the same layers' entries. Keeping every layer copies the encoder as it is."""
    depth = encoder_depth(encoder)
    encoder = copy.deepcopy(encoder)
    if keep == list(range(depth)):
        return encoder
    parent, attribute = layer_stack(encoder)
    stack = getattr(parent, attribute)
    setattr(parent, attribute, nn.ModuleList(stack[i] for i in keep))
    per_layer = {name: value for name, value in vars(encoder.config).items()
                 if isinstance(value, (list, tuple)) and len(value) == depth and name != "architectures"}
    try:
        for name, value in per_layer.items():
            setattr(encoder.config, name, type(value)(value[i] for i in keep))
        encoder.config.num_hidden_layers = len(keep)
    except (AttributeError, NotImplementedError, TypeError, ValueError) as err:  # a depth the config derives
        every = errors.option(f"--layers {depth}", f"TransformerStudentConfig(layers={depth})")
        raise DistillError(f"encoder {type(encoder).__name__} cannot keep {len(keep)} of its {depth} layers (its "
                           f"config cannot say so: {str(err).splitlines()[0][:120]}): keep all of them, {every}") \
            from None
    _check_rebuilds(encoder, keep)
    return encoder


def _check_rebuilds(encoder: PreTrainedModel, keep: list[int]) -> None:
    """Refuse a cut that its config would not rebuild (a saved student is rebuilt from it): a family whose
    layers differ by their place (ModernBERT's first layer has no attention norm) keeps only layers that
    fit their new places."""
    from transformers import AutoModel
    with torch.device("meta"):
        rebuilt = AutoModel.from_config(copy.deepcopy(encoder.config))
    ours = {name: tuple(t.shape) for name, t in encoder.state_dict().items()}
    theirs = {name: tuple(t.shape) for name, t in rebuilt.state_dict().items()}
    if ours != theirs:
        differ = sorted(set(ours).symmetric_difference(theirs)) or \
            sorted(name for name in ours if ours[name] != theirs[name])
        layers = ",".join(map(str, keep))
        raise DistillError(f"encoder {type(encoder).__name__}: layers {layers} do not fit their new places (e.g. "
                           f"{differ[0]}: its layers differ by position): choose other layers with "
                           f"{errors.option('--layer-map', 'layer_map')}")


def teacher_max_length(teacher: LabelModel) -> int:
    """How many sub-word tokens `teacher` reads (per window, for a text read in windows); 128 for a
    teacher that reads words (a BiLSTM as the assistant of a chain)."""
    length = getattr(getattr(teacher, "config", None), "max_length", None)
    return length if isinstance(length, int) and length > 0 else DEFAULT_MAX_LENGTH


@register_student("transformer", task="classification")
class TransformerStudent(StudentFiles, ReadsSubWords, LabelModel):
    """A transformer encoder of a few layers + dropout + Linear, reading and scoring text as the teacher does."""

    config_class = TransformerStudentConfig
    kind = "student"
    exports_to_transformers = True  # its network is the teacher's code (`export --format transformers`)
    task = "classification"
    default_lr = 5e-5  # the teacher's encoder rate for classification; Adam at 2e-3 wrecks pretrained layers
    # the teacher's patience of 2: copied layers can peak at once (RT, 3 of 6 layers: dev best at epoch 1),
    # and a cap that stays a safety net (a CoNLL tagger was still improving at a cap of 10)
    default_epochs = 20
    default_patience = 2
    required_files = (WEIGHTS, CONFIG, ENCODER_DIR)

    def __init__(self, config: TransformerStudentConfig, hierarchy: LabelHierarchy, encoder: PreTrainedModel,
                 tokenizer: PreTrainedTokenizerBase):
        from distill.models.teacher import Teacher, TeacherConfig
        super().__init__()
        if not isinstance(config, self.config_class):
            raise DistillError(f"{type(self).__name__} needs a {self.config_class.__name__}, "
                               f"got a {type(config).__name__}")
        limit = getattr(encoder.config, "max_position_embeddings", None)
        if not config.max_length:
            config = replace(config, max_length=DEFAULT_MAX_LENGTH)
        if limit is not None and config.max_length > limit:
            length = errors.option(f"--max-length {config.max_length}",
                                   f"TransformerStudentConfig(max_length={config.max_length})")
            raise DistillError(f"{length} is more than the {limit} positions the transformer student's encoder can "
                               f"read; use at most {limit}")
        self.config, self.hierarchy = config, hierarchy
        reading = TeacherConfig(task=self.task, encoder=config.encoder, dropout=config.dropout,
                                pre_classifier=config.pre_classifier, pooling=config.sentence_pooling,
                                max_length=config.max_length)
        self.network = Teacher(reading, hierarchy, encoder, tokenizer)

    @property
    def encoder(self) -> PreTrainedModel:
        return self.network.encoder

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.network.tokenizer

    @classmethod
    def build(cls, config: TransformerStudentConfig, hierarchy: LabelHierarchy,
              examples: Sequence) -> "TransformerStudent":
        """`config.layers` layers of the pretrained encoder `config.encoder` and a fresh head."""
        return cls._from_pretrained_encoder(config, hierarchy, DEFAULT_MAX_LENGTH)

    @classmethod
    def _from_pretrained_encoder(cls, config: TransformerStudentConfig, hierarchy: LabelHierarchy,
                                 max_length: int) -> "TransformerStudent":
        """`build`, reading `max_length` sub-word tokens (at most the encoder's positions) where the
        config leaves it 0."""
        if config.encoder == FROM_TEACHER:
            copy = errors.option("kd; student --embeddings-from-teacher",
                                 "Distiller, or train_student's teacher_embeddings")
            raise DistillError(f"a transformer student needs layers to start from: a pretrained encoder ({_minilm()}, "
                               f"say) or a teacher to copy ({copy})")
        from distill.encoders import load_encoder, native_pooling
        encoder, tokenizer = load_encoder(config.encoder)
        keep = kept_layers(config.layer_map, config.layers, encoder_depth(encoder))
        pooling = native_pooling(config.encoder) if config.sentence_pooling == "auto" else config.sentence_pooling
        limit = getattr(encoder.config, "max_position_embeddings", None) or max_length
        config = replace(config, sentence_pooling=pooling, max_length=config.max_length or min(max_length, limit))
        return cls(config, hierarchy, cut_layers(encoder, keep), tokenizer)

    @classmethod
    def build_from_teacher(cls, config: TransformerStudentConfig, hierarchy: LabelHierarchy, examples: Sequence,
                           teacher: LabelModel) -> "TransformerStudent":
        """The teacher's embeddings, `config.layers` of its layers and its head (when the labels are the
        same); with a pretrained `config.encoder` the teacher only teaches (see `build`)."""
        if config.encoder != FROM_TEACHER:
            return cls._from_pretrained_encoder(config, hierarchy, teacher_max_length(teacher))
        config = replace(config, max_length=config.max_length or teacher_max_length(teacher))
        source, keep = cls._teacher_layers(config, teacher)
        config = replace(config, sentence_pooling=source.config.pooling,
                         pre_classifier=source.pre_classifier is not None)
        model = cls(config, hierarchy, cut_layers(source.encoder, keep), source.tokenizer)
        if source.hierarchy.labels == hierarchy.labels:
            model.network.load_state_dict(source.head_state_dict(), strict=False)
        return model

    @classmethod
    def check_teacher(cls, config: TransformerStudentConfig, teacher: LabelModel) -> None:
        """What `build_from_teacher` (or `build`, of a pretrained encoder: its depth) would refuse of `teacher` for
        `config`, without copying or loading any layers: a search checks its space's students so before any trial."""
        if config.encoder == FROM_TEACHER:
            cls._teacher_layers(config, teacher)
            return
        from distill.encoders import encoder_depth
        depth = encoder_depth(config.encoder)
        if depth is not None:
            kept_layers(config.layer_map, config.layers, depth)

    @staticmethod
    def _teacher_layers(config: TransformerStudentConfig, teacher: LabelModel):
        """The transformer whose layers a student of `config` copies from `teacher`, and which of them it keeps."""
        from distill.models.teacher import Teacher
        source = teacher.network if isinstance(teacher, TransformerStudent) else teacher
        if not isinstance(source, Teacher):
            # a word student, a multi-task teacher (`student --embeddings-from-teacher`: no head named), a language
            # model asked a prompt (a causal LM's folder, a served one: `distill.models.prompt`), or a transformers
            # classifier (distill.models.hub_teacher)
            from distill.models.multitask import MultiTaskTeacher
            what = f"{teacher.config.model} student" if getattr(teacher, "kind", None) == "student" else \
                "multi-task teacher" if isinstance(teacher, MultiTaskTeacher) else \
                "language model asked a prompt, whose layers distill does not copy" if hasattr(teacher, "prompt") \
                else "transformers classifier, whose layers distill does not copy"
            raise DistillError(f"a transformer student copies a transformer's layers, and the teacher is a "
                               f"{what}: give a pretrained encoder ({_minilm()})")
        return source, kept_layers(config.layer_map, config.layers, source.encoder.config.num_hidden_layers)

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        return self.network.prepare(examples)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                word_positions: torch.Tensor | None = None, word_slots: torch.Tensor | None = None,
                grid_shape: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (batch, labels) for classification, (sentences, words, labels) for tagging."""
        return self.network(input_ids, attention_mask, word_positions, word_slots, grid_shape)

    def fingerprint(self) -> str:
        """A digest of what decides the logits (config, labels, tokenizer size, weights): keys the logit
        cache when this student teaches the next one."""
        return content_fingerprint({"config": asdict(self.config), "labels": self.hierarchy.labels,
                                    "vocabulary": len(self.tokenizer)}, self.state_dict())

    def card_about(self) -> dict:
        """Its pretrained encoder as the base model (a student of the teacher's layers: the teacher, named by
        its run)."""
        encoder = self.config.encoder
        return {**super().card_about(), **({"base_model": encoder} if encoder != FROM_TEACHER else {})}

    def write_description(self, directory: Path) -> list[str]:
        """Config, labels, and the encoder's config and tokenizer; returns the files' names."""
        with atomic_directory(directory / ENCODER_DIR) as encoder_dir:
            self.encoder.config.save_pretrained(encoder_dir)
            self.tokenizer.save_pretrained(encoder_dir)
        return [write_student_config(self, directory), *folder_files(directory, ENCODER_DIR)]

    @classmethod
    def unloaded(cls, directory: str | Path, card: dict) -> "TransformerStudent":
        """The student of `directory` (config, labels, encoder architecture and tokenizer) before its
        weights are loaded: `from_checkpoint` fills them, an exported model uses its `prepare`."""
        from transformers import AutoTokenizer

        from distill.encoders import encoder_from_config
        directory = Path(directory)
        meta = read_json(directory / CONFIG)
        config = cls.config_class.from_dict(meta["config"], str(directory / CONFIG))
        try:
            tokenizer = AutoTokenizer.from_pretrained(directory / ENCODER_DIR)
            encoder = encoder_from_config(directory / ENCODER_DIR)
        except (OSError, ValueError) as err:
            raise DistillError(f"{directory / ENCODER_DIR}: cannot rebuild the encoder ({err})") from None
        return cls(config, LabelHierarchy.from_dict(meta["hierarchy"]), encoder, tokenizer)


@register_student("transformer-tagger", task="tagging")
class TransformerTagger(TransformerStudent):
    """The transformer student for tagging: each word scored from its first sub-token, as the teacher does."""

    config_class = TransformerTaggerConfig
    default_lr = 8e-5  # the teacher tagger's encoder rate
