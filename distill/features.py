"""Turn examples into teacher inputs: sub-word ids, and for tagging each word's first sub-token.

A tagging sentence longer than the encoder's window is cut into consecutive windows at word
boundaries, so every word is scored. A word the tokenizer turns into no sub-token at all (a
zero-width character, say) appears in no window: it gets no loss, no metric and no distill term.
A text to classify is truncated to one window, or read in up to `max_windows` overlapping windows
(`TeacherConfig.long_inputs`); `text_reach` says how many of a text's sub-tokens the teacher reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:  # annotations only: a tokenizer is passed in, so reading these helpers needs no transformers
    from transformers import PreTrainedTokenizerBase


def special_token_frame(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The ids a tokenizer puts before and after the content (``[CLS]``/``[SEP]``, ``<s>``/``</s>``...)."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    raise ValueError("cannot locate content between the tokenizer's special tokens")


@dataclass
class Window:
    """One teacher input: sub-word ids, plus (for tagging) the words whose first piece it holds."""

    example: int
    input_ids: list[int]
    word_index: list[int]
    word_positions: list[int]


def window_frame(tokenizer: PreTrainedTokenizerBase, max_length: int) -> tuple[list[int], list[int], int]:
    """A window's special tokens before and after its content, and the content sub-tokens it holds."""
    prefix, suffix = special_token_frame(tokenizer)
    capacity = max_length - len(prefix) - len(suffix)
    if capacity < 1:
        raise ValueError(f"max_length {max_length} leaves no room between special tokens")
    return prefix, suffix, capacity


def window_starts(length: int, capacity: int, overlap: int, max_windows: int) -> list[int]:
    """Where the windows of a text of `length` sub-tokens start: every `capacity - overlap` sub-tokens
    until one reaches the end, at most `max_windows` of them (a short text: one window at 0)."""
    step = capacity - overlap
    needed = 1 + max(0, -(-(length - capacity) // step))
    return [i * step for i in range(min(needed, max_windows))]


def text_reach(capacity: int, overlap: int, max_windows: int) -> int:
    """Sub-tokens of a text that its windows read: beyond that, the text is cut."""
    return capacity + (max_windows - 1) * (capacity - overlap)


def content_ids(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> list[list[int]]:
    """Each text's sub-token ids without special tokens, uncut (and no warning about its length)."""
    return tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]


def encode_texts(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int,
                 overlap: int = 0, max_windows: int = 1) -> list[Window]:
    """A text's windows of `max_length`: one, truncated (the default), or up to `max_windows`
    overlapping ones, in text order, so a long text is read whole; the model pools each window."""
    if max_windows == 1:  # the tokenizer's own truncation: what teachers have always read
        ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
        return [Window(i, row, [], []) for i, row in enumerate(ids)]
    prefix, suffix, capacity = window_frame(tokenizer, max_length)
    return [Window(example, prefix + ids[start:start + capacity] + suffix, [], [])
            for example, ids in enumerate(content_ids(tokenizer, texts))
            for start in window_starts(len(ids), capacity, overlap, max_windows)]


def window_means(windows: Sequence[Window], examples: int) -> torch.Tensor:
    """An (examples, windows) matrix whose product with per-window features is each example's mean
    over its windows: the windows-to-example mapping, also as an exported graph's input."""
    weights = torch.zeros((examples, len(windows)))
    for column, window in enumerate(windows):
        weights[window.example, column] = 1.0
    return weights / weights.sum(1, keepdim=True)


def encode_words(tokenizer: PreTrainedTokenizerBase, sentences: Sequence[Sequence[str]],
                 max_length: int) -> list[Window]:
    """Windows of whole words for tagging; each word is predicted from its first sub-token."""
    prefix, suffix, capacity = window_frame(tokenizer, max_length)
    encoded = tokenizer([list(s) for s in sentences], is_split_into_words=True, add_special_tokens=False)
    windows: list[Window] = []
    for example in range(len(sentences)):
        pieces: dict[int, list[int]] = {}
        for token_id, word in zip(encoded["input_ids"][example], encoded.word_ids(example)):
            if word is not None:
                pieces.setdefault(word, []).append(token_id)
        ids: list[int] = []
        words: list[int] = []
        positions: list[int] = []
        for word in sorted(pieces):
            word_pieces = pieces[word][:capacity]
            if ids and len(ids) + len(word_pieces) > capacity:
                windows.append(Window(example, prefix + ids + suffix, words, positions))
                ids, words, positions = [], [], []
            words.append(word)
            positions.append(len(prefix) + len(ids))
            ids.extend(word_pieces)
        if ids or not windows or windows[-1].example != example:
            windows.append(Window(example, prefix + ids + suffix, words, positions))
    return windows


def word_grid_inputs(tokenizer: "PreTrainedTokenizerBase", sentences: Sequence[Sequence[str]], max_length: int,
                     pad_id: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """A tagger's encoder inputs for `sentences` (word windows, each word read at its first sub-token)
    plus where each window's words go in a (sentences x words) grid (`word_slots`, `grid_shape`), and
    which words any window scores: a word no sub-token covers is not scored."""
    windows = encode_words(tokenizer, sentences, max_length)
    inputs = collate_windows(windows, pad_id, tagging=True)
    width = max(len(s) for s in sentences)
    slots = torch.full(inputs["word_positions"].shape, -1, dtype=torch.long)
    scored = torch.zeros((len(sentences), width), dtype=torch.bool)
    for row, window in enumerate(windows):
        slots[row, : len(window.word_index)] = torch.tensor(window.word_index, dtype=torch.long) \
            + window.example * width
        scored[window.example, window.word_index] = True
    inputs.update(word_slots=slots, grid_shape=torch.tensor([len(sentences), width]))
    return inputs, scored


def encode(tokenizer: PreTrainedTokenizerBase, examples: Sequence, task: str, max_length: int) -> list[Window]:
    if task == "classification":
        return encode_texts(tokenizer, examples, max_length)
    return encode_words(tokenizer, examples, max_length)


def collate_windows(windows: Sequence[Window], pad_id: int, tagging: bool = False) -> dict[str, torch.Tensor]:
    """Pad a batch of windows into encoder inputs (and word positions for tagging)."""
    length = max(len(w.input_ids) for w in windows)
    input_ids = torch.full((len(windows), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(windows), length), dtype=torch.long)
    for row, window in enumerate(windows):
        input_ids[row, : len(window.input_ids)] = torch.tensor(window.input_ids)
        attention_mask[row, : len(window.input_ids)] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if tagging:
        width = max(1, max(len(w.word_positions) for w in windows))
        positions = torch.zeros((len(windows), width), dtype=torch.long)
        for row, window in enumerate(windows):
            positions[row, : len(window.word_positions)] = torch.tensor(window.word_positions, dtype=torch.long)
        batch["word_positions"] = positions
    return batch
