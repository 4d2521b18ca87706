"""Numeric precision of model forward passes: fp32, or bf16 autocast where the device has it.

Like the thread count, precision is a process setting (`nlp-train --precision`), read by the
two places that run models: the training loop and batched inference. The default is fp32, so
results stay exactly reproducible; bf16 is opt-in (see docs/distributed.md for what it costs
in accuracy and buys in speed). The setting itself needs no torch, so that the command line reads
`PRECISIONS` (its `--precision` choices) without importing it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, ContextManager

from distill.errors import DistillError, option

if TYPE_CHECKING:
    import torch

PRECISIONS = ("fp32", "bf16", "auto")
_setting = "fp32"


def set_precision(precision: str) -> None:
    """fp32; bf16 (autocast; an error where the device lacks it); auto (bf16 where supported)."""
    global _setting
    if precision not in PRECISIONS:
        raise DistillError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    _setting = precision


def current() -> str:
    """The process's precision setting (fp32, bf16 or auto), e.g. for a run's resume signature."""
    return _setting


def bf16_supported(device: torch.device) -> bool:
    import torch
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and torch.backends.mkldnn.is_available() and \
        torch.ops.mkldnn._is_mkldnn_bf16_supported()


def uses_bf16(device: torch.device) -> bool:
    if _setting == "bf16" and not bf16_supported(device):
        setting = option("--precision bf16", "Runtime(precision='bf16')")
        raise DistillError(f"{setting}: device {device} has no bf16 support; use fp32 or auto")
    return _setting == "bf16" or (_setting == "auto" and bf16_supported(device))


def autocast(device: torch.device) -> ContextManager:
    """bf16 autocast on `device` when the precision setting asks for it; nothing otherwise."""
    if uses_bf16(device):
        import torch
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
