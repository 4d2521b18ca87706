"""Small, fast students: BiLSTM and CNN text classifiers, BiLSTM and ID-CNN taggers.

Each is a plain `nn.Module` with a config, word (and character) vocabularies and a label set;
weights are saved as safetensors beside JSON. None of them knows about distillation.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from distill import errors, losses
from distill.crf import ConditionalRandomField
from distill.errors import DistillError
from distill.io import content_fingerprint, load_tensors, read_json, save_tensors, write_json
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel
from distill.models.card import CONFIG, VOCAB, WEIGHTS, card_version, write_model_card
from distill.models.layers import last_states, length_mask, pool_over_time, pooled_width, run_lstm
from distill.models.registry import register_student
from distill.models.student_config import (ClassifierConfig, CNNClassifierConfig, IDCNNTaggerConfig, LSTMClassifierConfig,
                                           LSTMTaggerConfig, StudentConfig, TaggerConfig, WordStudentConfig)
from distill.vocab import Vocabulary, student_tokens



def write_student_config(model: LabelModel, directory: Path) -> str:
    """A student's ``config.json``: its config and labels; returns the file's name."""
    write_json(directory / CONFIG, {"config": asdict(model.config), "hierarchy": model.hierarchy.to_dict()})
    return CONFIG


class StudentFiles:
    """How a built-in student is saved and loaded: weights in ``model.safetensors``, what it is besides
    them (`write_description`: config, labels, vocabularies or encoder folder), then the card over all
    of it. `required_files` must be there before `unloaded` reads the description."""

    required_files: tuple[str, ...] = ()
    # what a subclass must define (`distill.models.protocol.check_student_class` checks at registration)
    files_built_on = {"write_description": "write_description(directory)", "unloaded": "unloaded(directory, card)"}

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


MAX_WORD_CHARS = 20  # the char CNN reads at most this many characters of a word


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
    # config fields that say how a teacher's weights are read: refused without a teacher (`trainers.new_student`)
    teacher_settings: tuple[str, ...] = ()
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
        from distill.models.kinds import refuse_embeddings_start
        refuse_embeddings_start(teacher)
        if teacher.sub_word_tokenizer() is None:
            raise DistillError(f"the teacher ({getattr(teacher.config, 'model', type(teacher).__name__)}) has no "
                               f"sub-word embeddings to start word embeddings from: use {errors.random_embeddings()}")
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
