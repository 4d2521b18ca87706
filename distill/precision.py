"""Numeric precision of model forward passes: fp32, bf16 autocast where the device has it, or fp16
autocast on a CUDA GPU (training scales its gradients: `grad_scaler`).

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

PRECISIONS = ("fp32", "bf16", "fp16", "auto")
_setting = "fp32"


def set_precision(precision: str) -> None:
    """fp32; bf16 (autocast; an error where the device lacks it); fp16 (autocast on CUDA); auto (bf16
    where supported)."""
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


def uses_fp16(device: torch.device) -> bool:
    """Whether forward passes on `device` run under fp16 autocast: CUDA alone has it (float16 on a CPU is
    slower than fp32 and its gradients underflow without a scaler), so it is refused elsewhere."""
    if _setting == "fp16" and device.type != "cuda":
        setting = option("--precision fp16", "Runtime(precision='fp16')")
        raise DistillError(f"{setting} needs a CUDA GPU (float16 autocast with a gradient scaler), and the model "
                           f"is on {device}: use fp32, or bf16 where the device has it")
    return _setting == "fp16"


def reduced(device: torch.device) -> str | None:
    """The lower precision forward passes on `device` run in (bf16 or fp16), or None for fp32."""
    return "fp16" if uses_fp16(device) else "bf16" if uses_bf16(device) else None


def autocast(device: torch.device) -> ContextManager:
    """bf16 or fp16 autocast on `device` when the precision setting asks for it; nothing otherwise."""
    kind = reduced(device)
    if kind is not None:
        import torch
        return torch.autocast(device.type, dtype=torch.bfloat16 if kind == "bf16" else torch.float16)
    return contextlib.nullcontext()


def grad_scaler(device: torch.device) -> torch.amp.GradScaler:
    """Training's gradient scaler: on under fp16 (its small gradients would underflow to 0), else a
    pass-through that leaves every step exactly as without one."""
    import torch
    return torch.amp.GradScaler(device.type, enabled=uses_fp16(device))
