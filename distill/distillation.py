"""`TeacherStudentDistill`: the student's loss plus a distillation term against teacher logits.

    loss = w_s * student_loss + w_d * distill_loss

student_loss is the student's class-weighted NLL (or CRF NLL) against gold labels, and, for
unlabelled examples, against the teacher's argmax (pseudo-labels). distill_loss is
T^2 * KL(softmax(t/T) || softmax(s/T)) or the MSE between raw logits (Tang et al. 2019),
token-level for taggers over the words both sides scored.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import torch

from distill import losses, precision
from distill.errors import DistillError
from distill.inference import ExampleLogits
from distill.training import Objective

KD_LOSSES = ("kl", "mse")
DEFAULT_KD_LOSS = "kl"
DEFAULT_TEMPERATURE = 2.0
DEFAULT_STUDENT_WEIGHT = 0.5
DEFAULT_DISTILL_WEIGHT = 0.5


class TeacherLogits(Protocol):
    """Where teacher logits come from: a precomputed cache or the teacher itself."""

    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]: ...


class CachedTeacherLogits:
    """Teacher logits computed once for the whole transfer set (see `distill.cache`)."""

    def __init__(self, results: ExampleLogits):
        self.results = results

    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.results.batch(indices)


class OnlineTeacherLogits:
    """Runs the teacher on every batch (slower; for comparison with the cache)."""

    def __init__(self, teacher: torch.nn.Module, examples: Sequence):
        self.teacher, self.examples = teacher.eval(), examples

    @torch.inference_mode()
    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        inputs, scored = self.teacher.prepare([self.examples[i] for i in indices])
        with precision.autocast(self.teacher.device):
            logits = self.teacher(**inputs)
        return logits.float(), scored


class TeacherStudentDistill(Objective):
    """Composes the pure losses of `distill.losses` into a training objective for the student."""

    def __init__(self, teacher: TeacherLogits, kd_loss: str = DEFAULT_KD_LOSS,
                 temperature: float = DEFAULT_TEMPERATURE, student_weight: float = DEFAULT_STUDENT_WEIGHT,
                 distill_weight: float = DEFAULT_DISTILL_WEIGHT, class_weights: Sequence[float] | None = None,
                 min_confidence: float = 0.0):
        if kd_loss not in KD_LOSSES:
            raise DistillError(f"unknown kd loss {kd_loss!r}: choose one of {', '.join(KD_LOSSES)}")
        if temperature <= 0:
            raise DistillError(f"temperature must be > 0, got {temperature}")
        if student_weight < 0 or distill_weight < 0 or student_weight + distill_weight == 0:
            raise DistillError("loss weights must be >= 0 and not both 0")
        if not 0.0 <= min_confidence <= 1.0:
            raise DistillError(f"min confidence must be within [0, 1], got {min_confidence}")
        self.teacher = teacher
        self.kd_loss, self.temperature = kd_loss, temperature
        self.student_weight, self.distill_weight = student_weight, distill_weight
        self.class_weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float)
        self.min_confidence = min_confidence

    def pseudo_targets(self, teacher_logits: torch.Tensor, targets: torch.Tensor, labelled: torch.Tensor,
                       scored: torch.Tensor | None) -> torch.Tensor:
        """Gold targets for labelled rows; the teacher's confident argmax for unlabelled rows."""
        probabilities = teacher_logits.softmax(-1)
        confidence, guess = probabilities.max(-1)
        keep = confidence >= self.min_confidence
        if scored is not None:
            keep &= scored
        guess = torch.where(keep, guess, torch.full_like(guess, losses.IGNORE_INDEX))
        row_unlabelled = ~labelled.view(-1, *([1] * (targets.dim() - 1)))
        return torch.where(row_unlabelled, guess, targets)

    def distill_term(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                     mask: torch.Tensor | None) -> losses.LossSum:
        if student_logits.size(-1) == 1:  # one-logit binary student
            if self.kd_loss == "kl":
                return losses.binary_kl_distill_sum(student_logits, teacher_logits, self.temperature)
            return losses.binary_mse_distill_sum(student_logits, teacher_logits)
        if self.kd_loss == "kl":
            return losses.kl_distill_sum(student_logits, teacher_logits, self.temperature, mask)
        return losses.mse_distill_sum(student_logits, teacher_logits, mask)

    def terms(self, student: torch.nn.Module, logits: torch.Tensor, batch: dict) -> list[losses.LossSum]:
        """w_s * the student's loss and w_d * the distillation term, each with its own denominator."""
        teacher_logits, scored = self.teacher.logits(batch["indices"])
        teacher_logits = teacher_logits.to(logits.device)
        mask = batch["mask"]
        if mask is not None:  # both grids hold every word; the teacher may not have scored some
            mask = mask & scored.to(mask.device)
        targets = self.pseudo_targets(teacher_logits, batch["targets"], batch["labelled"], mask)
        weights = None if self.class_weights is None else self.class_weights.to(logits.device)
        student_loss = student.supervised_loss(logits, targets, batch["mask"], weights)
        distill_loss = self.distill_term(logits, teacher_logits, mask)
        return [student_loss.scaled(self.student_weight), distill_loss.scaled(self.distill_weight)]
