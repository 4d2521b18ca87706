"""Small, fast students: BiLSTM and CNN text classifiers, BiLSTM and ID-CNN taggers.

Each is a plain `nn.Module` with a config, word (and character) vocabularies and a label set;
weights are saved as safetensors beside JSON. None of them knows about distillation.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from distill import errors, losses
from distill.crf import ConditionalRandomField
from distill.errors import DistillError
from distill.io import content_fingerprint, load_tensors, read_json, save_tensors, write_json
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel
from distill.models.card import CONFIG, VOCAB, WEIGHTS, card_version, write_model_card
from distill.models.registry import register_student
from distill.vocab import Vocabulary, word_tokenize



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


def write_student_config(model: LabelModel, directory: Path) -> str:
    """A student's ``config.json``: its config and labels; returns the file's name."""
    write_json(directory / CONFIG, {"config": asdict(model.config), "hierarchy": model.hierarchy.to_dict()})
    return CONFIG


class StudentFiles:
    """How a built-in student is saved and loaded: weights in ``model.safetensors``, what it is besides
    them (`write_description`: config, labels, vocabularies or encoder folder), then the card over all
    of it. `required_files` must be there before `unloaded` reads the description."""

    required_files: tuple[str, ...] = ()

    def write_files(self, directory: Path, **extra) -> None:
        from distill.models.registry import student_entry
        save_tensors(directory / WEIGHTS, self.state_dict())
        files = [WEIGHTS, *self.write_description(directory)]
        entry = student_entry(self.config.model)
        write_model_card(directory, {"kind": "student", "model": entry.name, "class": entry.source,
                                     "task": self.task, "labels": self.hierarchy.labels}, files, self.card_about())

    @classmethod
    def from_checkpoint(cls, directory: str | Path, card: dict) -> LabelModel:
        for needed in cls.required_files:
            if not (Path(directory) / needed).exists():
                raise DistillError(f"{directory}: not a student directory (missing {needed})")
        model = cls.unloaded(directory, card)
        try:
            model.load_state_dict(load_tensors(Path(directory) / WEIGHTS))
        except RuntimeError as err:
            raise DistillError(f"{directory}: weights do not fit the model ({str(err).splitlines()[0]})") from None
        return model.eval()


def last_states(outputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Final state of each direction of a padded BiLSTM output, never a padding state.

    Forward direction: position length-1. Backward direction: position 0, where it has read the
    whole sequence. (Taking the last time step would read padding.)
    """
    hidden = outputs.size(-1) // 2
    rows = torch.arange(outputs.size(0), device=outputs.device)
    forward = outputs[rows, lengths - 1, :hidden]
    backward = outputs[:, 0, hidden:]
    return torch.cat([forward, backward], dim=-1)


def length_mask(lengths: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
    """(batch, width) True at real positions of sequences with these lengths."""
    return torch.arange(width, device=device).unsqueeze(0) < lengths.to(device).unsqueeze(1)


def masked_max(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over time of (batch, time, dim) values, ignoring positions where mask is False."""
    return values.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(dim=1).values


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over time of (batch, time, dim) values at the positions where mask is True."""
    weights = mask.unsqueeze(-1).to(values.dtype)
    return (values * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def pool_over_time(values: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(batch, time, dim) -> (batch, dim), or (batch, 2 * dim) for "max-mean": the max keeps each
    feature's strongest occurrence, the mean how much of the text shows it."""
    if pooling == "max":
        return masked_max(values, mask)
    if pooling == "mean":
        return masked_mean(values, mask)
    return torch.cat([masked_max(values, mask), masked_mean(values, mask)], dim=-1)


def pooled_width(pooling: str, width: int) -> int:
    return 2 * width if pooling == "max-mean" else width


def run_lstm(lstm: nn.LSTM, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    packed = pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
    outputs, _ = lstm(packed)
    return pad_packed_sequence(outputs, batch_first=True, total_length=inputs.size(1))[0]


MAX_WORD_CHARS = 20  # the char CNN reads at most this many characters of a word


def student_tokens(example) -> list[str]:
    """The words a student reads: a text is word-tokenized, a tagging example is already words.

    Every word, however long the example: LSTMs and CNNs have no position limit, and one pass over
    the whole sentence scores each word in context (no window seams), gives one CRF path per
    sentence and a score for every word the teacher scored in `kd`. Memory grows linearly with
    length; the readers refuse an example over `distill.data.MAX_EXAMPLE_CHARS` characters.
    Words are NFC-normalised: "naïve" typed as "i" plus a combining diaeresis (macOS, some scrapers)
    is the same word, in the vocabulary and the characters, not "nai", a lone mark and "ve".
    """
    tokens = word_tokenize(nfc(example)) if isinstance(example, str) else [nfc(t) for t in example]
    return tokens or ["<unk>"]


def nfc(text: str) -> str:
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


class StudentModel(StudentFiles, LabelModel):
    """Shared plumbing: vocabularies, batching of words, `build`, `save_pretrained` / `from_pretrained`.

    A new student is a subclass with a `config_class`, `__init__` building its layers and `forward`,
    registered with `distill.models.registry.register_student`.
    """

    config_class: type[StudentConfig] = WordStudentConfig
    kind = "student"
    # what a run that sets none uses (`distill.training.TrainSettings`): Adam's rate, the epoch cap (a safety
    # net) and the patience that ends the run (docs/results.md, "How long students train")
    default_lr = 2e-3
    default_epochs = 50
    default_patience = 4
    task = "classification"
    uses_chars = False  # taggers read characters too: `build` then makes a character vocabulary
    required_files = (WEIGHTS, CONFIG, VOCAB)

    def __init__(self, config: WordStudentConfig, hierarchy: LabelHierarchy, words: Vocabulary,
                 chars: Vocabulary | None = None):
        super().__init__()
        if not isinstance(config, self.config_class):
            raise DistillError(f"{type(self).__name__} needs a {self.config_class.__name__}, "
                               f"got a {type(config).__name__}")
        self.config, self.hierarchy, self.words, self.chars = config, hierarchy, words, chars
        binary = isinstance(config, ClassifierConfig) and config.binary
        if binary and len(hierarchy) != 2:
            raise DistillError(f"binary mode needs exactly two labels, got {len(hierarchy)}")
        self.outputs = 1 if binary else len(hierarchy)

    @classmethod
    def build(cls, config: WordStudentConfig, hierarchy: LabelHierarchy, examples: Sequence) -> "StudentModel":
        """A fresh student whose vocabularies come from `examples` (texts or token lists)."""
        token_lists = [student_tokens(e) for e in examples]
        words = Vocabulary.build(token_lists, config.min_freq, config.max_vocab, config.lowercase)
        chars = Vocabulary.build((t for tokens in token_lists for t in tokens), 1, None, False) \
            if cls.uses_chars else None
        return cls(config, hierarchy, words, chars)

    @classmethod
    def build_from_teacher(cls, config: WordStudentConfig, hierarchy: LabelHierarchy, examples: Sequence,
                           teacher: LabelModel) -> "StudentModel":
        """`build`, its word embeddings started from the sub-word embeddings of `teacher` (a transformer)."""
        if getattr(teacher, "tokenizer", None) is None:
            instead = errors.option("--random-embeddings", "random ones (teacher_embeddings=False for Distiller, "
                                    "None for train_student)")
            raise DistillError(f"the teacher ({getattr(teacher.config, 'model', type(teacher).__name__)}) has no "
                               f"sub-word embeddings to start word embeddings from: use {instead}")
        model = cls.build(config, hierarchy, examples)
        model.start_from_teacher(teacher, examples)
        return model

    def start_from_teacher(self, teacher: LabelModel, examples: Sequence) -> None:
        """Overwrite the word embeddings with the teacher's (`distill.embedding_init.init_from_teacher`); a
        student whose vectors come otherwise from the teacher (`static`) says so here."""
        from distill.embedding_init import init_from_teacher
        init_from_teacher(self, teacher)

    def fingerprint(self) -> str:
        """A digest of what decides the logits (config, labels, vocabularies, weights): keys the logit
        cache when this student teaches the next one."""
        return content_fingerprint({"config": asdict(self.config), "labels": self.hierarchy.labels,
                                    "words": self.words.to_dict(),
                                    "chars": self.chars.to_dict() if self.chars else None}, self.state_dict())

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        token_lists = [student_tokens(e) for e in examples]
        width = max(len(t) for t in token_lists)
        lengths = torch.tensor([len(t) for t in token_lists])
        word_ids = torch.tensor([self.words.ids(t) + [0] * (width - len(t)) for t in token_lists])
        inputs = {"word_ids": word_ids, "lengths": lengths}
        if self.chars is not None:
            inputs.update(self.char_inputs(token_lists, width))
        device = self.device
        inputs = {k: v.to(device) for k, v in inputs.items()}
        if self.task == "classification":
            return inputs, None
        return inputs, length_mask(lengths, width, device)

    def char_inputs(self, token_lists: list[list[str]], width: int) -> dict[str, torch.Tensor]:
        """Characters of each distinct word of the batch once (row 0: padding), and where each word's row is.

        Words repeat a lot within a batch (the, commas, names), so the char CNN runs on far fewer rows.
        """
        rows: dict[str, int] = {}
        word_rows = [[rows.setdefault(t, len(rows) + 1) for t in tokens] + [0] * (width - len(tokens))
                     for tokens in token_lists]
        longest = max(self.config.char_width, max(min(len(t), MAX_WORD_CHARS) for t in rows))
        char_ids = [[0] * longest] + [ids + [0] * (longest - len(ids))
                                      for ids in (self.chars.ids(t[:MAX_WORD_CHARS]) for t in rows)]
        return {"char_ids": torch.tensor(char_ids), "word_rows": torch.tensor(word_rows)}

    def write_description(self, directory: Path) -> list[str]:
        """What the model is besides its weights (config, labels, vocabularies); returns the files' names."""
        write_json(directory / VOCAB, {"words": self.words.to_dict(),
                                       "chars": self.chars.to_dict() if self.chars else None})
        return [write_student_config(self, directory), VOCAB]

    @classmethod
    def unloaded(cls, directory: str | Path, card: dict) -> "StudentModel":
        """The student of `directory` (config, labels, vocabularies) before its weights are loaded:
        `from_checkpoint` fills them, an exported model uses its `prepare`."""
        directory = Path(directory)
        meta, vocab = read_json(directory / CONFIG), read_json(directory / VOCAB)
        chars = Vocabulary.from_dict(vocab["chars"]) if vocab.get("chars") else None
        settings = meta["config"]
        if card_version(card) < 2:  # the one config of all students, training settings included
            own = {f.name for f in fields(cls.config_class)} - set(cls.config_class.NEW_SINCE_FORMAT_1)
            settings = {k: v for k, v in settings.items() if k in own}
        config = cls.config_class.from_dict(settings, str(directory / CONFIG))
        return cls(config, LabelHierarchy.from_dict(meta["hierarchy"]), Vocabulary.from_dict(vocab["words"]), chars)


@register_student("lstm", task="classification")
class LSTMClassifier(StudentModel):
    """BiLSTM over word embeddings; the last real state of each direction (or max / mean pooling) -> Linear."""

    config_class = LSTMClassifierConfig

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, config.layers, batch_first=True,
                            bidirectional=True, dropout=config.dropout if config.layers > 1 else 0.0)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(pooled_width(config.pooling, 2 * config.hidden_dim), self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        outputs = run_lstm(self.lstm, self.dropout(self.embedding(word_ids)), lengths)
        if self.config.pooling == "last":
            features = last_states(outputs, lengths.to(outputs.device))
        else:
            features = pool_over_time(outputs, length_mask(lengths, word_ids.size(1), word_ids.device),
                                      self.config.pooling)
        return self.classifier(self.dropout(features))


@register_student("cnn", task="classification")
class CNNClassifier(StudentModel):
    """Kim-style CNN: convolutions of several widths, max (or mean) over time, Linear."""

    config_class = CNNClassifierConfig

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, config.filters, width, padding=width // 2)
            for width in config.filter_widths)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(pooled_width(config.pooling, config.filters) * len(config.filter_widths),
                                    self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        embedded = self.dropout(self.embedding(word_ids)).transpose(1, 2)
        mask = length_mask(lengths, word_ids.size(1), word_ids.device)
        pooled = [pool_over_time(torch.relu(conv(embedded))[:, :, : word_ids.size(1)].transpose(1, 2), mask,
                                 self.config.pooling)
                  for conv in self.convolutions]
        return self.classifier(self.dropout(torch.cat(pooled, dim=-1)))


class CharCNN(nn.Module):
    """Character CNN word features (max over characters), as in NLP Architect's taggers."""

    def __init__(self, chars: int, dim: int, filters: int, width: int):
        super().__init__()
        self.embedding = nn.Embedding(chars, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, filters, width, padding=width // 2)

    def forward(self, char_ids: torch.Tensor, word_rows: torch.Tensor) -> torch.Tensor:
        """Features of the distinct words `char_ids` (words, chars), spread to (batch, words) by `word_rows`."""
        length = char_ids.size(1)
        features = torch.relu(self.conv(self.embedding(char_ids).transpose(1, 2)))[:, :, :length]
        features = features.masked_fill((char_ids == 0).unsqueeze(1), 0.0).max(dim=-1).values
        return features[word_rows]


class TaggerModel(StudentModel):
    """Word embeddings + character CNN -> a context encoder -> per-word scores (+ optional CRF)."""

    config_class = TaggerConfig
    task = "tagging"
    uses_chars = True

    def __init__(self, config, hierarchy, words, chars):
        if chars is None:
            raise DistillError("taggers need a character vocabulary")
        super().__init__(config, hierarchy, words, chars)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.char_cnn = CharCNN(len(chars), config.char_embedding_dim, config.char_filters, config.char_width)
        self.dropout = nn.Dropout(config.dropout)
        self.crf = ConditionalRandomField(len(hierarchy)) if config.crf else None

    def word_features(self, word_ids: torch.Tensor, char_ids: torch.Tensor, word_rows: torch.Tensor) -> torch.Tensor:
        return self.dropout(torch.cat([self.embedding(word_ids), self.char_cnn(char_ids, word_rows)], dim=-1))

    @property
    def input_dim(self) -> int:
        return self.config.embedding_dim + self.config.char_filters

    def decode(self, logits: torch.Tensor, mask: torch.Tensor | None) -> list:
        if self.crf is None:
            return super().decode(logits, mask)
        return self.crf.decode(logits, mask)

    @property
    def takes_class_weights(self) -> bool:
        return self.crf is None  # a CRF scores whole tag sequences: no per-tag weight applies

    def supervised_loss(self, logits, targets, mask, class_weights):
        """With a CRF: its NLL, averaged over the sentences whose every word has a target."""
        if self.crf is None:
            return super().supervised_loss(logits, targets, mask, class_weights)
        complete = ~((targets < 0) & mask).any(dim=1)  # the CRF scores whole paths: skip partly labelled rows
        return losses.LossSum.of(self.crf.sequence_neg_log_likelihood(logits[complete], targets[complete],
                                                                      mask[complete]))


@register_student("lstm-tagger", task="tagging")
class LSTMTagger(TaggerModel):
    """BiLSTM tagger over word + character-CNN features (NLP Architect's NeuralTagger)."""

    config_class = LSTMTaggerConfig

    def __init__(self, config, hierarchy, words, chars):
        super().__init__(config, hierarchy, words, chars)
        self.lstm = nn.LSTM(self.input_dim, config.hidden_dim, config.layers, batch_first=True,
                            bidirectional=True, dropout=config.dropout if config.layers > 1 else 0.0)
        self.classifier = nn.Linear(2 * config.hidden_dim, len(hierarchy))

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor, char_ids: torch.Tensor,
                word_rows: torch.Tensor) -> torch.Tensor:
        outputs = run_lstm(self.lstm, self.word_features(word_ids, char_ids, word_rows), lengths)
        return self.classifier(self.dropout(outputs))


@register_student("idcnn-tagger", task="tagging")
class IDCNNTagger(TaggerModel):
    """Iterated dilated CNN (Strubell et al. 2017): a block of dilated convolutions applied repeatedly."""

    config_class = IDCNNTaggerConfig

    def __init__(self, config, hierarchy, words, chars):
        super().__init__(config, hierarchy, words, chars)
        self.projection = nn.Conv1d(self.input_dim, config.filters, 3, padding=1)
        self.block = nn.ModuleList(nn.Conv1d(config.filters, config.filters, 3, padding=d, dilation=d)
                                   for d in config.idcnn_dilations)
        self.classifier = nn.Linear(config.filters, len(hierarchy))
        self.identity_init()

    @torch.no_grad()
    def identity_init(self) -> None:
        """Start each dilated convolution as the identity (its centre tap; Strubell et al. 2017 after Le et
        al. 2015): the block is applied `idcnn_iterations` times, a stack of ReLU layers (12 by default)
        through which randomly initialised weights pass little signal or gradient. On CoNLL-2003 the
        tagger alone reached in 12 epochs the dev F1 that took 47 from random weights (docs/results.md)."""
        for conv in self.block:
            conv.weight.zero_()
            conv.weight[:, :, conv.kernel_size[0] // 2].copy_(torch.eye(conv.out_channels))
            conv.bias.zero_()

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor, char_ids: torch.Tensor,
                word_rows: torch.Tensor) -> torch.Tensor:
        mask = (word_ids != 0).unsqueeze(1).float()
        hidden = torch.relu(self.projection(self.word_features(word_ids, char_ids, word_rows).transpose(1, 2)))
        hidden = hidden * mask
        for _ in range(self.config.idcnn_iterations):
            for conv in self.block:
                hidden = torch.relu(conv(hidden)) * mask
        return self.classifier(self.dropout(hidden.transpose(1, 2)))


def build_student(config: StudentConfig, hierarchy: LabelHierarchy, examples: Sequence) -> LabelModel:
    """A fresh student of the registered kind `config.model`, vocabularies built from `examples`."""
    from distill.models.registry import student_entry
    return student_entry(config.model).cls.build(config, hierarchy, examples)


def student_default(cls: type, name: str) -> Any:
    """A student class's default `name` (lr, epochs, patience) for a run that sets none; a class of
    its own that declares none gets the word students'."""
    return getattr(cls, f"default_{name}", getattr(StudentModel, f"default_{name}"))
