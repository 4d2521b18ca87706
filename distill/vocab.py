"""Word and character vocabularies for students, built from training data and saved as JSON."""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

from distill.errors import DistillError

PAD, UNK = "<pad>", "<unk>"
_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def word_tokenize(text: str) -> list[str]:
    """Words and punctuation marks; students of text classification read these."""
    return _TOKEN.findall(text)


class Vocabulary:
    """Token <-> id, with padding at 0 and out-of-vocabulary at 1."""

    def __init__(self, tokens: Sequence[str], lowercase: bool = False):
        self.tokens = list(tokens)
        self.lowercase = lowercase
        if self.tokens[:2] != [PAD, UNK]:
            raise DistillError("a vocabulary must start with the padding and unknown tokens")
        self.index = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None,
              lowercase: bool = False) -> "Vocabulary":
        counts = Counter(t.lower() if lowercase else t for seq in sequences for t in seq)
        kept = [t for t, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_freq]
        if max_size is not None:
            kept = kept[: max(max_size - 2, 0)]
        if not kept:
            raise DistillError(f"empty vocabulary: no token occurs at least {min_freq} times in the training data")
        return cls([PAD, UNK] + kept, lowercase)

    def __len__(self) -> int:
        return len(self.tokens)

    def ids(self, tokens: Sequence[str]) -> list[int]:
        if self.lowercase:
            return [self.index.get(t.lower(), 1) for t in tokens]
        return [self.index.get(t, 1) for t in tokens]

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, data: dict) -> "Vocabulary":
        return cls(data["tokens"], data.get("lowercase", False))
