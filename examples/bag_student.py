"""A student defined outside the package: the mean of word embeddings -> Linear.

The smallest sensible text classifier (fastText without n-grams). Registering it is all it takes
for the Python API and ``nlp-train`` (``--model examples.bag_student:BagOfEmbeddings``, or ``--model
bag`` once this module is imported or announced as a ``distill.students`` entry point) to build,
train, distil, save and load it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from distill import ClassifierConfig, StudentModel, register_student


@dataclass
class BagConfig(ClassifierConfig):
    model: str = "bag"
    embedding_dim: int = 64  # every field a config class declares is its setting; this one a new default


@register_student("bag", task="classification")
class BagOfEmbeddings(StudentModel):
    """Averages the word embeddings of a text (padding aside) and classifies the average."""

    config_class = BagConfig

    def __init__(self, config: BagConfig, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words)
        self.embedding = nn.EmbeddingBag(len(words), config.embedding_dim, mode="mean", padding_idx=0)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.embedding_dim, self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.embedding(word_ids)))
