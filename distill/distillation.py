"""`TeacherStudentDistill`: the student's loss plus a distillation term against teacher logits.

    loss = w_s * student_loss + w_d * distill_loss

student_loss is the student's class-weighted NLL (or CRF NLL) against gold labels, and, for
unlabelled examples, against the teacher's argmax (pseudo-labels). distill_loss is
T^2 * KL(softmax(t/T) || softmax(s/T)) or the MSE between raw logits (Tang et al. 2019),
token-level for taggers over the words both sides scored.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

import torch

from distill import losses, precision
from distill.errors import DistillError
from distill.inference import ExampleLogits
from distill.training import Objective

DEFAULT_KD_LOSS = "kl"
DEFAULT_TEMPERATURE = 2.0
DEFAULT_STUDENT_WEIGHT = 0.5
DEFAULT_DISTILL_WEIGHT = 0.5

SupervisedLoss = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None"], losses.LossSum]


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


class TeacherStudentDistill:
    """The distillation loss: w_s * the student's loss on gold (or pseudo) labels + w_d * a distillation
    term (`distill.losses.KD_LOSSES`: ``kl``, ``mse`` or a registered one) against the teacher's logits.

    A plain loss, usable in any training loop::

        loss = TeacherStudentDistill(temperature=2.0)(student_logits, teacher_logits, targets)

    Rows not `labelled` take the teacher's argmax as their hard target (pseudo-labels), dropped
    below `min_confidence`; for tagging, `mask` marks the (batch, words) positions both sides scored.
    """

    def __init__(self, kd_loss: str = DEFAULT_KD_LOSS, temperature: float = DEFAULT_TEMPERATURE,
                 student_weight: float = DEFAULT_STUDENT_WEIGHT, distill_weight: float = DEFAULT_DISTILL_WEIGHT,
                 class_weights: Sequence[float] | None = None, min_confidence: float = 0.0):
        if kd_loss not in losses.KD_LOSSES:
            raise DistillError(f"unknown kd loss {kd_loss!r}: choose one of {', '.join(losses.KD_LOSSES)}")
        if temperature <= 0:
            raise DistillError(f"temperature must be > 0, got {temperature}")
        if student_weight < 0 or distill_weight < 0 or student_weight + distill_weight == 0:
            raise DistillError("loss weights must be >= 0 and not both 0")
        if not 0.0 <= min_confidence <= 1.0:
            raise DistillError(f"min confidence must be within [0, 1], got {min_confidence}")
        self.kd_loss, self.temperature = kd_loss, temperature
        self.student_weight, self.distill_weight = student_weight, distill_weight
        self.class_weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float)
        self.min_confidence = min_confidence

    def settings(self) -> dict:
        """The knobs as JSON-able values (for a run's signature and summary)."""
        return {"kd_loss": self.kd_loss, "temperature": self.temperature, "student_weight": self.student_weight,
                "distill_weight": self.distill_weight, "min_confidence": self.min_confidence,
                "class_weights": None if self.class_weights is None else self.class_weights.tolist()}

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

    def terms(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
              mask: torch.Tensor | None = None, labelled: torch.Tensor | None = None,
              supervised_loss: SupervisedLoss = losses.supervised_nll_sum,
              student_mask: torch.Tensor | None = None) -> list[losses.LossSum]:
        """w_s * the student's loss and w_d * the distillation term, each a sum with its own denominator.

        `supervised_loss` is the student's own (a CRF tagger's path NLL); it sees `student_mask`
        (default: `mask`), the words the student reads, while the distillation term and the
        pseudo-labels use `mask`, the words the teacher scored too.
        """
        teacher_logits = teacher_logits.to(student_logits.device)
        if labelled is None:
            labelled = torch.ones(len(targets), dtype=torch.bool, device=targets.device)
        targets = self.pseudo_targets(teacher_logits, targets, labelled, mask)
        weights = None if self.class_weights is None else self.class_weights.to(student_logits.device)
        student_loss = supervised_loss(student_logits, targets, mask if student_mask is None else student_mask,
                                       weights)
        distill_loss = losses.KD_LOSSES[self.kd_loss](student_logits, teacher_logits, self.temperature, mask)
        return [student_loss.scaled(self.student_weight), distill_loss.scaled(self.distill_weight)]

    def __call__(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                 mask: torch.Tensor | None = None, labelled: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of one batch: logits (batch[, words], labels), targets (batch[, words]) label
        indices (`distill.losses.IGNORE_INDEX`: none), `mask` (batch, words) for tagging."""
        return losses.combine(self.terms(student_logits, teacher_logits, targets, mask, labelled))


class DistillObjective(Objective):
    """`TeacherStudentDistill` in the training loop: teacher logits looked up by example position."""

    def __init__(self, loss: TeacherStudentDistill, teacher: TeacherLogits):
        self.loss, self.teacher = loss, teacher

    def terms(self, student: torch.nn.Module, logits: torch.Tensor, batch: dict) -> list[losses.LossSum]:
        teacher_logits, scored = self.teacher.logits(batch["indices"])
        mask = batch["mask"]
        both = None if mask is None else mask & scored.to(mask.device)  # the teacher may not score some words
        return self.loss.terms(logits, teacher_logits, batch["targets"], both, batch["labelled"],
                               student.supervised_loss, student_mask=mask)
