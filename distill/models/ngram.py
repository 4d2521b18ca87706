"""The bag-of-n-grams student (fastText's classifier, Joulin et al. 2017).

The mean of a text's word embeddings and of its hashed word n-gram embeddings, then a Linear layer.
No recurrence and no convolution: a text costs a few additions per word, so on a CPU this is the
student for long documents, where the BiLSTM reads word by word and the CNN convolves every window.
The n-grams give it some of the word order that a bag of words lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from distill.models.registry import register_student
from distill.models.student_config import ClassifierConfig, option
from distill.models.students import StudentModel

HASH_PRIME = 1_000_003  # rolling hash of word ids; any large odd number spreads n-grams over the buckets


@dataclass
class NgramClassifierConfig(ClassifierConfig):
    model: str = "ngram"
    embedding_dim: int = option(64, "Word embedding width.", min=1)  # narrower: the n-gram table has as many columns
    # each n costs a hashing pass of n steps over every text: beyond a few words an n-gram is too rare to learn
    ngrams: int = option(2, "Longest word n-gram embedded besides the words (1: the words alone).", min=1, max=8)
    buckets: int = option(131072, "Rows of the hashed n-gram table: n-grams that hash alike share one.", min=1,
                          max=2**24)


def ngram_ids(word_ids: torch.Tensor, n: int, buckets: int) -> torch.Tensor:
    """The n-gram starting at each position (it and the next n-1 words) hashed into rows 1..buckets, or 0
    (padding) where it would reach past the text. Same shape as `word_ids`, whatever its length: no
    branch on the length, so an exported graph computes the same for texts shorter than n."""
    length = word_ids.size(1)
    padded = nn.functional.pad(word_ids, (0, n - 1))
    hashed = torch.zeros_like(word_ids)
    for offset in range(n):
        hashed = (hashed * HASH_PRIME + padded[:, offset: offset + length]) % buckets
    complete = padded[:, n - 1: n - 1 + length] != 0  # words are right-padded: the last word decides
    return torch.where(complete, hashed + 1, torch.zeros_like(hashed))


@register_student("ngram", task="classification")
class NgramClassifier(StudentModel):
    """The mean of word and hashed n-gram embeddings (padding aside) -> dropout -> Linear."""

    config_class = NgramClassifierConfig

    def __init__(self, config, hierarchy, words, chars=None):
        super().__init__(config, hierarchy, words, None)
        self.embedding = nn.Embedding(len(words), config.embedding_dim, padding_idx=0)
        self.ngram_embedding = nn.Embedding(config.buckets + 1, config.embedding_dim, padding_idx=0) \
            if config.ngrams > 1 else None
        if self.ngram_embedding is not None:
            # hashed rows start small: the words, started from the teacher's vectors, lead at first
            nn.init.normal_(self.ngram_embedding.weight, std=0.1)
            with torch.no_grad():
                self.ngram_embedding.weight[0].zero_()
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.embedding_dim, self.outputs)

    def forward(self, word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        total = self.embedding(word_ids).sum(1)
        count = (word_ids != 0).sum(1)
        for n in range(2, self.config.ngrams + 1):
            ids = ngram_ids(word_ids, n, self.config.buckets)
            total = total + self.ngram_embedding(ids).sum(1)
            count = count + (ids != 0).sum(1)
        return self.classifier(self.dropout(total / count.clamp(min=1).unsqueeze(1).to(total.dtype)))
