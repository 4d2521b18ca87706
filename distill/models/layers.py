"""Tensor operations the models share: states of a padded BiLSTM, masks, pooling over time (a student's
features, a teacher's sentence vector), and window logits placed in a word grid. Pure functions of tensors."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


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


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence features: the first token's state, or the mean over real (unpadded) tokens."""
    if pooling == "mean":
        return masked_mean(hidden, attention_mask)
    return hidden[:, 0]


def place_in_grid(window_logits: torch.Tensor, word_slots: torch.Tensor, grid_shape: torch.Tensor) -> torch.Tensor:
    """Per-window word logits put at their `word_slots` of a (sentences, words, labels) grid; words no
    window holds keep zero logits. Outside `forward` too, for an exported model's window logits."""
    sentences, width = (int(v) for v in grid_shape)
    grid = window_logits.new_zeros((sentences * width, window_logits.size(-1)))
    real = word_slots >= 0
    grid[word_slots[real]] = window_logits[real]
    return grid.view(sentences, width, -1)
