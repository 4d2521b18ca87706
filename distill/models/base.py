"""What every model offers the training loop and inference, whatever its architecture."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from distill import losses
from distill.errors import DistillError
from distill.labels import LabelHierarchy


def pick_device(name: str = "auto") -> torch.device:
    """'auto' is the GPU when there is one, else the CPU; otherwise any torch device name."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DistillError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DistillError(f"device {name!r} requested but no CUDA GPU is available")
    return device


class LabelModel(nn.Module):
    """A model that maps examples to label logits.

    Subclasses set ``hierarchy`` and ``task`` and implement ``prepare`` (examples -> forward
    inputs and a mask of scored words) and ``forward`` (inputs -> logits).
    """

    hierarchy: LabelHierarchy
    task: str

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        raise NotImplementedError

    def decode(self, logits: torch.Tensor, mask: torch.Tensor | None) -> list:
        """Best label index per example, or per word for tagging (argmax of raw scores)."""
        if logits.size(-1) == 1:
            return (logits.squeeze(-1) > 0).long().tolist()
        return logits.argmax(-1).tolist()

    def supervised_loss(self, logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                        class_weights: torch.Tensor | None) -> losses.LossSum:
        """The loss against gold (or pseudo) label indices that fits this model's output, as a sum and
        its denominator (see `distill.losses.LossSum`)."""
        if logits.size(-1) == 1:
            return losses.binary_nll_sum(logits, targets, class_weights)
        return losses.weighted_nll_sum(logits, targets, class_weights, mask)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
