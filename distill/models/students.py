"""Small, fast students: BiLSTM and CNN text classifiers, BiLSTM and ID-CNN taggers.

Each is a plain `nn.Module` with a config, word (and character) vocabularies and a label set;
weights are saved as safetensors beside JSON. None of them knows about distillation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from distill import losses
from distill.crf import ConditionalRandomField
from distill.errors import DistillError
from distill.io import load_tensors, read_json, save_tensors, write_json
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel
from distill.models.card import write_model_card
from distill.vocab import Vocabulary, word_tokenize

WEIGHTS, CONFIG, VOCAB = "model.safetensors", "config.json", "vocab.json"


@dataclass
class StudentConfig:
    """Architecture and training hyperparameters of a student; defaults suit sentences of news/reviews."""

    model: str = "lstm"
    embedding_dim: int = 100
    hidden_dim: int = 150
    layers: int = 1
    dropout: float = 0.5
    pooling: str = "last"          # lstm classifier: 'last' states of both directions, or 'max' over time
    binary: bool = False           # lstm/cnn classifier with two labels: one logit + sigmoid
    filter_widths: list = field(default_factory=lambda: [3, 4, 5])
    filters: int = 100
    char_embedding_dim: int = 30
    char_filters: int = 50
    char_width: int = 3
    crf: bool = False
    idcnn_dilations: list = field(default_factory=lambda: [1, 2, 1])
    idcnn_iterations: int = 4
    lowercase: bool = True
    min_freq: int = 1
    max_vocab: int = 50000
    lr: float = 2e-3
    batch_size: int = 32
    epochs: int = 15
    patience: int = 4
    seed: int = 42

    @classmethod
    def from_dict(cls, data: dict) -> "StudentConfig":
        """Unknown keys are ignored, so older checkpoints load (e.g. `max_words`, from when students cut inputs)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


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
    """
    tokens = word_tokenize(example) if isinstance(example, str) else list(example)
    return tokens or ["<unk>"]


class StudentModel(LabelModel):
    """Shared plumbing: vocabularies, batching of words, save / from_checkpoint."""

    task = "classification"

    def __init__(self, config: StudentConfig, hierarchy: LabelHierarchy, words: Vocabulary,
                 chars: Vocabulary | None = None):
        super().__init__()
        self.config, self.hierarchy, self.words, self.chars = config, hierarchy, words, chars
        if config.binary and len(hierarchy) != 2:
            raise DistillError(f"binary mode needs exactly two labels, got {len(hierarchy)}")
        self.outputs = 1 if config.binary else len(hierarchy)

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

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_tensors(directory / WEIGHTS, self.state_dict())
        write_json(directory / CONFIG, {"config": asdict(self.config), "hierarchy": self.hierarchy.to_dict()})
        write_json(directory / VOCAB, {"words": self.words.to_dict(),
                                       "chars": self.chars.to_dict() if self.chars else None})
        write_model_card(directory, {"kind": "student", "model": type(self).__name__, "task": self.task,
                                     "labels": self.hierarchy.labels}, [WEIGHTS, CONFIG, VOCAB])

    @classmethod
    def from_checkpoint(cls, directory: str | Path) -> "StudentModel":
        directory = Path(directory)
        for needed in (WEIGHTS, CONFIG, VOCAB):
            if not (directory / needed).exists():
                raise DistillError(f"{directory}: not a student directory (missing {needed})")
        model = cls.unloaded(directory)
        try:
            model.load_state_dict(load_tensors(directory / WEIGHTS))
        except RuntimeError as err:
            raise DistillError(f"{directory}: weights do not fit the model ({str(err).splitlines()[0]})") from None
        model.eval()
        return model

    @classmethod
    def unloaded(cls, directory: str | Path) -> "StudentModel":
        """The student of `directory` (config, labels, vocabularies) before its weights are loaded:
        `from_checkpoint` fills them, an exported model uses its `prepare`."""
        directory = Path(directory)
        meta, vocab = read_json(directory / CONFIG), read_json(directory / VOCAB)
        chars = Vocabulary.from_dict(vocab["chars"]) if vocab.get("chars") else None
        return cls(StudentConfig.from_dict(meta["config"]), LabelHierarchy.from_dict(meta["hierarchy"]),
                   Vocabulary.from_dict(vocab["words"]), chars)


class LSTMClassifier(StudentModel):
    """BiLSTM over word embeddings; the last real state of each direction (or max-pooling) -> Linear."""

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, config.layers, batch_first=True,
                            bidirectional=True, dropout=config.dropout if config.layers > 1 else 0.0)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(2 * config.hidden_dim, self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        outputs = run_lstm(self.lstm, self.dropout(self.embedding(word_ids)), lengths)
        if self.config.pooling == "max":
            mask = length_mask(lengths, word_ids.size(1), word_ids.device)
            features = masked_max(outputs, mask)
        else:
            features = last_states(outputs, lengths.to(outputs.device))
        return self.classifier(self.dropout(features))


class CNNClassifier(StudentModel):
    """Kim-style CNN: convolutions of several widths, max over time, Linear."""

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, config.filters, width, padding=width // 2)
            for width in config.filter_widths)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.filters * len(config.filter_widths), self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        embedded = self.dropout(self.embedding(word_ids)).transpose(1, 2)
        mask = length_mask(lengths, word_ids.size(1), word_ids.device)
        pooled = [masked_max(torch.relu(conv(embedded))[:, :, : word_ids.size(1)].transpose(1, 2), mask)
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

    task = "tagging"

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

    def supervised_loss(self, logits, targets, mask, class_weights):
        """With a CRF: its NLL, averaged over the sentences whose every word has a target."""
        if self.crf is None:
            return super().supervised_loss(logits, targets, mask, class_weights)
        complete = ~((targets < 0) & mask).any(dim=1)  # the CRF scores whole paths: skip partly labelled rows
        return losses.LossSum.of(self.crf.sequence_neg_log_likelihood(logits[complete], targets[complete],
                                                                      mask[complete]))


class LSTMTagger(TaggerModel):
    """BiLSTM tagger over word + character-CNN features (NLP Architect's NeuralTagger)."""

    def __init__(self, config, hierarchy, words, chars):
        super().__init__(config, hierarchy, words, chars)
        self.lstm = nn.LSTM(self.input_dim, config.hidden_dim, config.layers, batch_first=True,
                            bidirectional=True, dropout=config.dropout if config.layers > 1 else 0.0)
        self.classifier = nn.Linear(2 * config.hidden_dim, len(hierarchy))

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor, char_ids: torch.Tensor,
                word_rows: torch.Tensor) -> torch.Tensor:
        outputs = run_lstm(self.lstm, self.word_features(word_ids, char_ids, word_rows), lengths)
        return self.classifier(self.dropout(outputs))


class IDCNNTagger(TaggerModel):
    """Iterated dilated CNN (Strubell et al. 2017): a block of dilated convolutions applied repeatedly."""

    def __init__(self, config, hierarchy, words, chars):
        super().__init__(config, hierarchy, words, chars)
        self.projection = nn.Conv1d(self.input_dim, config.filters, 3, padding=1)
        self.block = nn.ModuleList(nn.Conv1d(config.filters, config.filters, 3, padding=d, dilation=d)
                                   for d in config.idcnn_dilations)
        self.classifier = nn.Linear(config.filters, len(hierarchy))

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor, char_ids: torch.Tensor,
                word_rows: torch.Tensor) -> torch.Tensor:
        mask = (word_ids != 0).unsqueeze(1).float()
        hidden = torch.relu(self.projection(self.word_features(word_ids, char_ids, word_rows).transpose(1, 2)))
        hidden = hidden * mask
        for _ in range(self.config.idcnn_iterations):
            for conv in self.block:
                hidden = torch.relu(conv(hidden)) * mask
        return self.classifier(self.dropout(hidden.transpose(1, 2)))


STUDENT_TASKS = {"lstm": "classification", "cnn": "classification", "lstm-tagger": "tagging",
                 "idcnn-tagger": "tagging"}
STUDENTS = {"lstm": LSTMClassifier, "cnn": CNNClassifier, "lstm-tagger": LSTMTagger, "idcnn-tagger": IDCNNTagger}


def build_student(config: StudentConfig, hierarchy: LabelHierarchy, examples: Sequence) -> StudentModel:
    """A fresh student with vocabularies built from the training examples."""
    if config.model not in STUDENTS:
        raise DistillError(f"unknown student model {config.model!r}: choose one of {', '.join(STUDENTS)}")
    cls = STUDENTS[config.model]
    token_lists = [student_tokens(e) for e in examples]
    words = Vocabulary.build(token_lists, config.min_freq, config.max_vocab, config.lowercase)
    chars = Vocabulary.build((t for tokens in token_lists for t in tokens), 1, None, False) \
        if issubclass(cls, TaggerModel) else None
    return cls(config, hierarchy, words, chars)
