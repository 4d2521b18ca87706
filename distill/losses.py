"""Pure loss functions: supervised NLL and the distillation terms. No state, no models.

Every function takes logits and targets (plus an optional mask over real positions, for
token-level losses) and returns a scalar. Token-level inputs are (batch, time, classes) with a
(batch, time) boolean mask; sequence-level inputs are (batch, classes) and take no mask.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def _flatten(logits: torch.Tensor, mask: torch.Tensor | None, *others: torch.Tensor):
    """Keep only the masked positions, as (n, classes) rows."""
    if mask is None:
        return (logits,) + others
    return (logits[mask],) + tuple(o[mask] for o in others)


def weighted_nll(logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """The class-weighted NLL: sum_n w_{y_n} * -log softmax(x_n)[y_n] / sum_n w_{y_n}.

    Targets equal to IGNORE_INDEX (and positions outside `mask`) take no part.
    """
    logits, targets = _flatten(logits, mask, targets)
    if targets.numel() == 0 or not (targets != IGNORE_INDEX).any():
        return logits.sum() * 0.0
    return F.nll_loss(F.log_softmax(logits.float(), dim=-1), targets, weight=class_weights,
                      ignore_index=IGNORE_INDEX)


def binary_nll(logit: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None
               ) -> torch.Tensor:
    """The single-logit (sigmoid) form of `weighted_nll` for two classes."""
    logit = logit.reshape(-1).float()
    keep = targets != IGNORE_INDEX
    logit, targets = logit[keep], targets[keep]
    if targets.numel() == 0:
        return logit.sum() * 0.0
    weights = None if class_weights is None else class_weights[targets]
    losses = F.binary_cross_entropy_with_logits(logit, targets.float(), reduction="none")
    if weights is None:
        return losses.mean()
    return (losses * weights).sum() / weights.sum()


def kl_distill(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
               mask: torch.Tensor | None = None) -> torch.Tensor:
    """T^2 * KL(softmax(t/T) || softmax(s/T)), averaged over examples (or masked positions).

    The T^2 factor keeps the gradient scale independent of T (Hinton et al. 2015).
    """
    student_logits, teacher_logits = _flatten(student_logits, mask, teacher_logits)
    if student_logits.numel() == 0:
        return student_logits.sum() * 0.0
    log_p_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    kl = (log_p_teacher.exp() * (log_p_teacher - log_p_student)).sum(-1)
    return kl.mean() * temperature ** 2


def mse_distill(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error between raw logits (Tang et al. 2019), averaged over all logit entries."""
    student_logits, teacher_logits = _flatten(student_logits, mask, teacher_logits)
    if student_logits.numel() == 0:
        return student_logits.sum() * 0.0
    return F.mse_loss(student_logits.float(), teacher_logits.float())


def teacher_binary_logit(teacher_logits: torch.Tensor) -> torch.Tensor:
    """A two-class teacher as one logit: sigmoid(t1 - t0) equals softmax(t)[1]."""
    return teacher_logits[..., 1] - teacher_logits[..., 0]


def binary_kl_distill(student_logit: torch.Tensor, teacher_logits: torch.Tensor,
                      temperature: float = 1.0) -> torch.Tensor:
    """T^2 * KL between Bernoulli(sigmoid(t/T)) and Bernoulli(sigmoid(s/T)) for a one-logit student."""
    s = student_logit.reshape(-1).float() / temperature
    t = teacher_binary_logit(teacher_logits).reshape(-1).float() / temperature
    p_t = torch.sigmoid(t)
    kl = p_t * (F.logsigmoid(t) - F.logsigmoid(s)) + (1 - p_t) * (F.logsigmoid(-t) - F.logsigmoid(-s))
    return kl.mean() * temperature ** 2


def binary_mse_distill(student_logit: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """MSE between the student's logit and the teacher's logit margin t1 - t0."""
    return F.mse_loss(student_logit.reshape(-1).float(), teacher_binary_logit(teacher_logits).reshape(-1).float())
