"""A teacher from label names alone: a sentence encoder and a description per label, no training data.

Each text and each label description is embedded as sentence-transformers embeds a sentence with
MiniLM-L6 or MPNet (the mean of the encoder's token states, L2-normalised); a label stands for the mean
of its descriptions' embeddings (normalised again), and the teacher's logits are the cosine similarities
of a text to the labels divided by a temperature (fitted on labelled dev data when there is some, else
`DEFAULT_TEMPERATURE`). It is a `Teacher` whose head reads the normalised features: the Linear's rows
are the label embeddings over the temperature, with no bias, so the teacher's own code (windows, the
logit cache, ONNX export, a slim safetensors folder) serves it unchanged.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Sequence

import torch
from torch.nn import functional

from distill.errors import DistillError, option, require_number
from distill.labels import LabelHierarchy
from distill.models.card import folder_files, write_model_card
from distill.models.slim import save_slim_checkpoint
from distill.models.teacher import ENCODER_DIR, Teacher, TeacherConfig, load_encoder_folder, save_encoder_folder

# Cosine similarities lie in [-1, 1]: at T = 0.05 a margin of 0.1 between two labels' similarities is a
# factor e^2 in their probabilities. Fitted on dev (NLL) for MiniLM-L6: 0.043 on Rotten Tomatoes, 0.032 on BBC
# News (docs/results.md, Teachers without labels).
DEFAULT_TEMPERATURE = 0.05
TEMPERATURE_RANGE = (1e-3, 10.0)  # where the fit on dev searches, and what --temperature takes
TEMPERATURE_SOURCES = ("default", "given", "dev")
CARD_MODEL = "ZeroShotTeacher"  # the card's "model": which teacher class loads the folder


@dataclass
class ZeroShotConfig(TeacherConfig):
    """A zero-shot teacher: the encoder and how it reads text (`TeacherConfig`), each label's descriptions, and
    the temperature that divides the cosine similarities (`temperature_from`: default, given or dev)."""

    dropout: float = 0.0
    pooling: str = "mean"  # sentence-transformers' pooling of MiniLM-L6 and MPNet, whatever the encoder's folder says
    descriptions: dict[str, list[str]] = field(default_factory=dict)
    temperature: float = DEFAULT_TEMPERATURE
    temperature_from: str = "default"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task != "classification":
            raise DistillError("a zero-shot teacher classifies texts: it has no tagging form (task must be "
                               f"classification, got {self.task!r})")
        require_number("temperature", self.temperature, *TEMPERATURE_RANGE)
        if self.temperature_from not in TEMPERATURE_SOURCES:
            raise DistillError(f"temperature_from must be one of {', '.join(TEMPERATURE_SOURCES)}, "
                               f"got {self.temperature_from!r}")
        if not isinstance(self.descriptions, dict) or not all(
                isinstance(texts, list) and texts and all(isinstance(t, str) and t.strip() for t in texts)
                for texts in self.descriptions.values()):
            raise DistillError("descriptions must map each label to a list of non-empty texts")


class ZeroShotTeacher(Teacher):
    """Encoder, mean pooling, L2 normalisation and a Linear holding label embeddings / temperature: cosine
    similarity over a temperature, as logits. Built by `distill.zero_shot.zero_shot_teacher`."""

    exports_to_transformers = False  # a stock transformers classifier has no normalisation before its head

    def head_logits(self, features: torch.Tensor) -> torch.Tensor:
        """Cosine similarities to the label embeddings over the temperature (the Linear's rows hold both)."""
        return self.classifier(functional.normalize(features, dim=-1))

    @torch.no_grad()
    def embed(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """Normalised sentence embeddings of `texts` (mean-pooled, windows averaged), in order, as fp32."""
        self.eval()
        rows = []
        for start in range(0, len(texts), batch_size):
            inputs, _ = self.prepare(list(texts[start:start + batch_size]))
            hidden = self.encoder(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
            features = self.pooled(hidden.last_hidden_state, inputs["attention_mask"], inputs.get("window_weights"))
            rows.append(functional.normalize(features.float(), dim=-1))
        return torch.cat(rows)

    def set_labels(self, label_embeddings: torch.Tensor, temperature: float) -> None:
        """The head from each label's (normalised) embedding, one row per label, and the temperature."""
        with torch.no_grad():
            self.classifier.weight.copy_(label_embeddings / temperature)
            self.classifier.bias.zero_()

    def checkpoint(self, optimizer_state: dict | None = None) -> dict:
        """The teacher checkpoint's schema with the zero-shot config alone (there are no training settings)."""
        return {"config": asdict(self.config), "hierarchy": self.hierarchy.to_dict(),
                "encoder_state_dict": self.encoder.state_dict(), "classifier_state_dict": self.head_state_dict(),
                "optimizer_state_dict": {}}

    def write_files(self, directory: Path, **extra) -> None:
        """A slim teacher folder (`distill.models.slim`: safetensors and JSON) with the encoder's config and
        tokenizer, and the card naming this class."""
        save_encoder_folder(directory, self.encoder, self.tokenizer)
        files = save_slim_checkpoint(directory, self.checkpoint())
        write_model_card(directory, {"kind": "teacher", "model": CARD_MODEL, "task": self.config.task,
                                     "labels": self.hierarchy.labels}, [*files, *folder_files(directory, ENCODER_DIR)],
                         self.card_about())

    def card_about(self) -> dict:
        return {**super().card_about(), "zero_shot": {"descriptions": self.config.descriptions,
                                                      "temperature": self.config.temperature}}

    @classmethod
    def unloaded(cls, directory: str | Path, checkpoint: dict, card: dict) -> "ZeroShotTeacher":
        directory = Path(directory)
        data = checkpoint["config"]
        known = {f.name for f in fields(ZeroShotConfig)}
        if not isinstance(data, dict) or set(data) - known:
            unknown = sorted(set(data) - known) if isinstance(data, dict) else data
            raise DistillError(f"{directory}: unknown zero-shot teacher setting(s) {unknown}")
        encoder, tokenizer = load_encoder_folder(directory)
        return cls(ZeroShotConfig(**data), LabelHierarchy.from_dict(checkpoint["hierarchy"]), encoder, tokenizer)


def fit_temperature(similarities: torch.Tensor, gold: torch.Tensor, where: str = "the calibration data") -> float:
    """The temperature T that minimises the NLL of `gold` label indices under softmax(similarities / T): the NLL
    is convex in 1/T, so a golden-section search over log T within `TEMPERATURE_RANGE` finds it. `gold` (read from
    `where`) of one label is refused: its NLL says nothing of how the labels compare, so the fit ends at a bound."""
    if gold.unique().numel() < 2:
        raise DistillError(f"{where}: all its examples have one label, on which no temperature can be fitted (their "
                           "loss only says how sure the teacher is of that label, and the fit runs toward "
                           f"{TEMPERATURE_RANGE[0]:g} or {TEMPERATURE_RANGE[1]:g}); give data of two labels or more, or "
                           f"{option('--temperature', 'temperature=')}")
    def nll(log_t: float) -> float:
        return float(functional.cross_entropy(similarities / math.exp(log_t), gold))
    low, high = (math.log(bound) for bound in TEMPERATURE_RANGE)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    fa, fb = nll(a), nll(b)
    for _ in range(60):
        if fa < fb:
            high, b, fb = b, a, fa
            a = high - ratio * (high - low)
            fa = nll(a)
        else:
            low, a, fa = a, b, fb
            b = low + ratio * (high - low)
            fb = nll(b)
    return math.exp((low + high) / 2)
