"""The static student: a table of word vectors, their mean, a small head (model2vec's recipe, distilled).

Each vocabulary word's vector is what the teacher's *fine-tuned* encoder says of that word read alone
(pooled as the teacher pools a sentence), PCA-reduced to `embedding_dim` and weighted by frequency, so
a frequent word ("the", ",") weighs little in the mean (`distill.embedding_init.static_word_vectors`).
A text costs one table lookup per word and one small matrix product: no recurrence, no convolution,
no n-gram hashing. `kd` then trains the table and the head against the teacher's logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Sequence

import numpy as np
import torch
from torch import nn

from distill.data import DataOptions
from distill.errors import require_whole
from distill.models.registry import register_student
from distill.models.student_config import ClassifierConfig, option
from distill.models.students import StudentModel
from distill.vocab import student_tokens

WORD_VECTORS = ["encoder", "input"]
WEIGHTINGS = ["sif", "zipf", "none"]


@dataclass
class StaticClassifierConfig(ClassifierConfig):
    model: str = "static"
    embedding_dim: int = option(256, "Word embedding width.", min=1)
    dropout: float = option(0.1, "Dropout: on embeddings and features (word students); before the Linear layer "
                                 "(transformer students).", min=0.0, max=1.0, max_open=True)
    word_vectors: str = option("encoder", "Static student, started from a teacher: each word's vector from the "
                                          "teacher's encoder reading the word alone ('encoder'), or the mean of its "
                                          "sub-word input embeddings ('input', as the other word students).",
                               choices=WORD_VECTORS)
    weighting: str = option("sif", "Static student, started from a teacher: word vectors scaled by frequency in the "
                                   "transfer set: SIF a/(a+p(word)), zipf log(1+rank), or none.", choices=WEIGHTINGS)
    head_hidden: int = option(256, "Static student: hidden units of the head's ReLU layer (0: a Linear layer on the "
                                   "mean).", min=0)


@register_student("static", task="classification")
class StaticClassifier(StudentModel):
    """Mean of the word vectors of a text's known words -> dropout -> [Linear -> ReLU -> dropout] -> Linear."""

    config_class = StaticClassifierConfig
    teacher_settings = ("word_vectors", "weighting")

    @staticmethod
    def runs_teacher_encoder(config: StaticClassifierConfig) -> bool:
        """Whether a student of `config` reads words through the teacher's encoder layers, which an ONNX export's
        graph does not give back (its source model does): for 'encoder' word vectors; 'input' ones are the mean of
        sub-word input embeddings, which the graph holds."""
        return config.word_vectors == "encoder"

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        with torch.no_grad():
            self.embedding.weight[1].zero_()  # <unk> is left out of the mean: no row to learn
        hidden = config.head_hidden
        layers: list[nn.Module] = [nn.Dropout(config.dropout)]
        if hidden:
            layers += [nn.Linear(config.embedding_dim, hidden), nn.ReLU(), nn.Dropout(config.dropout)]
        self.head = nn.Sequential(*layers, nn.Linear(hidden or config.embedding_dim, self.outputs))

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The mean over known words (neither padding nor <unk>, which says nothing of a text); a text of
        unknown words alone is the zero vector. One fused lookup-and-sum (`embedding_bag`, padding and <unk>
        weighted 0): a batch of long texts never becomes a (batch, words, width) tensor, which made the mean 20x
        slower than this on news articles."""
        known = word_ids > 1
        sums = nn.functional.embedding_bag(word_ids, self.embedding.weight, mode="sum",
                                           per_sample_weights=known.to(self.embedding.weight.dtype))
        return self.head(sums / known.sum(1, keepdim=True).clamp(min=1).to(sums.dtype))

    def lookup_serves(self) -> bool:
        """Whether the lookup table's logits (`lookup_logits`) equal `forward`'s: in eval mode, on the CPU, in
        float32 and without reduced precision, the head still the layers it was built of (`quantize_dynamic` or an
        adapter swaps a Linear layer for one the table cannot read)."""
        from distill import precision
        weight = self.embedding.weight
        return not self.training and weight.device.type == "cpu" and weight.dtype == torch.float32 \
            and precision.reduced(weight.device) is None \
            and all(type(layer) in (nn.Dropout, nn.Linear, nn.ReLU) for layer in self.head)

    def train(self, mode: bool = True) -> "StaticClassifier":
        """`nn.Module.train`; entering training mode drops the lookup table (`lookup_table`), so a step that torch
        keeps no count of (a fused optimizer's, ``AdamW(fused=True)``) is seen when inference reads it again."""
        if mode:
            self.__dict__.pop("_lookup", None)
        return super().train(mode)

    def batch_logits(self, examples: Sequence) -> tuple[torch.Tensor, None]:
        """Inference logits from the lookup table where it serves (`lookup_serves`), else `forward`'s own."""
        if not self.lookup_serves():
            return super().batch_logits(examples)
        return torch.from_numpy(self.lookup_logits(examples)), None

    def predict(self, examples: Sequence, batch_size: int = 64, data: DataOptions = DataOptions()) -> list:
        """`LabelModel.predict`, straight from the lookup table where it serves: a text needs no batching by length
        nor padding, so the logits of each `batch_size` slice are decoded as they are (a call of one text costs
        little beyond its tokenisation)."""
        if not self.lookup_serves():
            return super().predict(examples, batch_size, data)
        from distill.inference import readable_examples
        require_whole("batch_size", batch_size)
        examples, labels = readable_examples(self, examples, data), self.hierarchy.labels
        slices = (examples[start:start + batch_size] for start in range(0, len(examples), batch_size))
        return [labels[index] for batch in slices
                for index in self.decode(torch.from_numpy(self.lookup_logits(batch)), None)]

    def lookup_logits(self, examples: Sequence[str]) -> np.ndarray:
        """(examples, outputs) logits in numpy alone: each known word's row of the table already multiplied by
        the head's first Linear layer (`lookup_table`), so a text costs a gather, a mean and, with a hidden layer,
        one small product; the mean of the projected rows is the projection of the mean (dropout is off).
        A text of unknown words alone gets the first layer's bias, as `forward`'s zero vector does."""
        table, bias, rest = self.lookup_table()
        means = np.zeros((len(examples), table.shape[1]), dtype=table.dtype)
        for row, example in enumerate(examples):  # one gather each: a batch's ragged rows need no padding
            known = [i for i in self.words.ids(student_tokens(example)) if i > 1]  # neither padding nor <unk>
            if known:  # (a sum and a division: ndarray.mean goes through a Python wrapper, a third of a call's time)
                means[row] = np.add.reduce(table[known], axis=0) / len(known)
        logits = means + bias
        if rest is not None:
            weight, last_bias = rest
            logits = np.maximum(logits, 0) @ weight + last_bias
        return logits

    def lookup_table(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """The word table times the head's first Linear layer, its bias, and the last layer after the ReLU (None
        without a hidden layer: the table then holds each word's logits), as float32 numpy arrays. Built once
        per state of the weights: a training step or a load changes a parameter's version; `half()` then `float()`,
        `vector_to_parameters` or any `param.data = tensor` its memory (the version stays); either rebuilds it. An
        in-place edit through `param.data` (`param.data.mul_(2)`) changes neither: `train()` then drops the table."""
        linears = [layer for layer in self.head if isinstance(layer, nn.Linear)]
        params = (self.embedding.weight, *chain.from_iterable((layer.weight, layer.bias) for layer in linears))
        versions = tuple((p._version, p.data_ptr()) for p in params)  # (`parameters()` would cost more than a lookup)
        cached = self.__dict__.get("_lookup")
        if cached is None or cached[1] != versions or any(a is not b for a, b in zip(cached[0], params)):
            array = lambda tensor: tensor.detach().numpy().copy()  # noqa: E731 (never the parameter's memory)
            with torch.no_grad():
                table = (self.embedding.weight @ linears[0].weight.T).numpy()
            rest = None if len(linears) == 1 else (array(linears[1].weight.T), array(linears[1].bias))
            cached = (params, versions, (table, array(linears[0].bias), rest))
            self.__dict__["_lookup"] = cached
        return cached[2]

    def start_from_teacher(self, teacher, examples: Sequence) -> None:
        """Word vectors from the teacher (`config.word_vectors`), weighted by their frequency in `examples`."""
        from distill.embedding_init import static_word_vectors
        with torch.no_grad():
            self.embedding.weight[2:] = static_word_vectors(teacher, self.words, examples, self.config)
