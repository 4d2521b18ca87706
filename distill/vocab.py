"""Word and character vocabularies for students, built from training data and saved as JSON."""

from __future__ import annotations

import re
import unicodedata
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
