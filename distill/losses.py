"""Pure loss functions: supervised NLL and the distillation terms. No state, no models.

Every function takes logits and targets (plus an optional mask over real positions, for
token-level losses) and returns a scalar; the hidden-state and attention terms take layers' states
and attention distributions instead.
Token-level inputs are (batch, time, classes) with a (batch, time) boolean mask; sequence-level
inputs are (batch, classes) and take no mask.

Each loss is a (weighted) mean, and comes in two forms: ``name`` returns the mean, ``name_sum``
a `LossSum`, the sum and the denominator the mean divides it by (the number of examples,
scored words or logit entries, or the summed class weights of the targets). The sum form lets a
distributed run divide every rank's sum by the denominator of the whole global batch.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F

from distill.registry import Registry

IGNORE_INDEX = -100


class LossSum(NamedTuple):
    """A loss before averaging: `total` (differentiable) over the scored items and the `denominator`
    (detached) that makes it a mean. Sums and denominators of disjoint parts of a batch add up to those
    of the whole batch, which their means do not. `name` is what the training loop reports the term as
    (``student``, ``distillation``, ``hidden``...: `distill.callbacks`)."""

    total: torch.Tensor
    denominator: torch.Tensor
    name: str = "loss"

    @classmethod
    def of(cls, values: torch.Tensor, weights: torch.Tensor | None = None) -> "LossSum":
        """The sum of per-item `values` (weighted by `weights`) and the count (the summed weights)."""
        if weights is None:
            return cls(values.sum(), torch.tensor(float(values.numel()), device=values.device))
        return cls((values * weights).sum(), weights.sum().detach().float())

    def scaled(self, factor: float) -> "LossSum":
        """`factor` times the loss: only the sum scales, the denominator stays what it counts."""
        return self._replace(total=self.total * factor)

    def named(self, name: str) -> "LossSum":
        """The same term under `name`, as reports show it."""
        return self._replace(name=name)

    def mean(self, denominator: torch.Tensor | None = None) -> torch.Tensor:
        """`total` over `denominator` (default: its own); 0, not NaN, when nothing was scored."""
        denominator = self.denominator if denominator is None else denominator
        return self.total / torch.where(denominator > 0, denominator, torch.ones_like(denominator))


def combine(terms: Sequence[LossSum], denominators: torch.Tensor | None = None) -> torch.Tensor:
    """The sum of the terms' means, each over `denominators[k]` if given (else its own denominator)."""
    if denominators is None:
        return sum(term.mean() for term in terms)
    return sum(term.mean(d) for term, d in zip(terms, denominators))


def _flatten(logits: torch.Tensor, mask: torch.Tensor | None, *others: torch.Tensor):
    """Keep only the masked positions, as (n, classes) rows."""
    if mask is None:
        return (logits,) + others
    return (logits[mask],) + tuple(o[mask] for o in others)


def weighted_nll_sum(logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None,
                     mask: torch.Tensor | None = None) -> LossSum:
    """`weighted_nll` as sum_n w_{y_n} * nll_n and sum_n w_{y_n}."""
    logits, targets = _flatten(logits, mask, targets)
    keep = targets != IGNORE_INDEX
    logits, targets = logits[keep], targets[keep]
    nll = -F.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return LossSum.of(nll, None if class_weights is None else class_weights[targets])


def weighted_nll(logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """The class-weighted NLL: sum_n w_{y_n} * -log softmax(x_n)[y_n] / sum_n w_{y_n}.

    Targets equal to IGNORE_INDEX (and positions outside `mask`) take no part.
    """
    return weighted_nll_sum(logits, targets, class_weights, mask).mean()


def binary_nll_sum(logit: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None
                   ) -> LossSum:
    """`binary_nll` as a sum and the (weighted) count of targets."""
    logit = logit.reshape(-1).float()
    keep = targets != IGNORE_INDEX
    logit, targets = logit[keep], targets[keep]
    nll = F.binary_cross_entropy_with_logits(logit, targets.float(), reduction="none")
    return LossSum.of(nll, None if class_weights is None else class_weights[targets])


def binary_nll(logit: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None
               ) -> torch.Tensor:
    """The single-logit (sigmoid) form of `weighted_nll` for two classes."""
    return binary_nll_sum(logit, targets, class_weights).mean()


def supervised_nll_sum(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                       class_weights: torch.Tensor | None = None) -> LossSum:
    """The loss against gold (or pseudo) label indices that fits the logits: the class-weighted NLL,
    or its sigmoid form for one logit."""
    if logits.size(-1) == 1:
        return binary_nll_sum(logits, targets, class_weights)
    return weighted_nll_sum(logits, targets, class_weights, mask)


# The largest temperature accepted. T^2 * KL tends to its limit, half the mean squared difference of the
# centred logits, long before (within 0.05% at T = 1000 for logits of order 10); `softened_kl` keeps to a
# 60-digit reference within 1e-5 far beyond this, but above ~1e18 (logit differences / T)^2 leaves float32.
MAX_TEMPERATURE = 1e12
# The smallest. Softened by T, two logits d apart differ by a factor e^(d/T) in probability, which float32
# (24 bits) keeps apart only while d/T < ln(2^24) = 16.6: at T = 1e-3 every pair of logits more than 0.017
# apart is one-hot in float32, so T^2 * KL carries the teacher's argmax alone, and it tends to T times the
# student's margin against it, its gradient T * (q - p): a term of weight 1/1000 of the student's loss.
# Below, it is off in effect (at 1e-6 the loss matched --distill-weight 0 to 7 digits), and below ~1e-38
# logits / T leave float32 (inf, then NaN).
MIN_TEMPERATURE = 1e-3
_SMALL = 0.5  # rows whose centred log-ratio stays within +-_SMALL take the series form of `softened_kl`
_EXPM1_MINUS_X = (1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040, 1 / 40320, 1 / 362880)


def _expm1_minus_x(u: torch.Tensor) -> torch.Tensor:
    """e^u - 1 - u without the cancellation of computing it so, for |u| <= 0.5 (Taylor to u^9: < 1e-8 off)."""
    series = torch.full_like(u, _EXPM1_MINUS_X[-1])
    for coefficient in reversed(_EXPM1_MINUS_X[:-1]):
        series = coefficient + u * series
    return u * u * series


def softened_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """T^2 * KL(softmax(t/T) || softmax(s/T)) per row of (n, classes) logits, in float32 at any T.

    Computed as differences of log-softmaxes, the KL of a large T is rounding noise: log p and log q
    are about -log(classes) each and differ by (logit differences)/T, so float32's 1e-7 of them, times
    T^2, swamps the value (at T = 1e6, by 100 to 1e8 times it). Rows whose softened distributions are that
    close instead take an exact rewriting with no cancellation: with q = softmax(s/T) and
    u = (d - E_q[d]) / T for d = t - s (centred at the logits' own scale, where float32 resolves them),
    KL = E_q[u (e^u - 1)] / (1 + m) - log(1 + m) for m = E_q[e^u - 1 - u] >= 0, each part of the order
    of u^2. The rows that take it are within 1e-5 of a 60-digit reference for T from 1 to 1e18 (the
    gradient within 4e-6 of float64's T * (q - p)); the others (distributions far apart: a small T) are
    computed as differences, as exact there as float32 allows.
    """
    student_logits, teacher_logits = student_logits.float(), teacher_logits.float()
    log_q = F.log_softmax(student_logits / temperature, dim=-1)
    log_p = F.log_softmax(teacher_logits / temperature, dim=-1)
    direct = (log_p.exp() * (log_p - log_q)).sum(-1)
    q = log_q.exp()
    d = teacher_logits - student_logits
    u = (d - (q * d).sum(-1, keepdim=True)) / temperature
    close = u.abs().amax(-1, keepdim=True) <= _SMALL
    u = torch.where(close, u, torch.zeros_like(u))  # the other rows' u could overflow e^u (and NaN a gradient)
    m = (q * _expm1_minus_x(u)).sum(-1)
    series = (q * u * torch.expm1(u)).sum(-1) / (1 + m) - torch.log1p(m)
    return torch.where(close.squeeze(-1), series, direct) * temperature ** 2


def kl_distill_sum(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
                   mask: torch.Tensor | None = None) -> LossSum:
    """`kl_distill` as a sum and the number of examples (or masked positions)."""
    student_logits, teacher_logits = _flatten(student_logits, mask, teacher_logits)
    return LossSum.of(softened_kl(student_logits, teacher_logits, temperature))


def kl_distill(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
               mask: torch.Tensor | None = None) -> torch.Tensor:
    """T^2 * KL(softmax(t/T) || softmax(s/T)), averaged over examples (or masked positions).

    The T^2 factor keeps the gradient scale independent of T (Hinton et al. 2015).
    """
    return kl_distill_sum(student_logits, teacher_logits, temperature, mask).mean()


def mse_distill_sum(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                    mask: torch.Tensor | None = None) -> LossSum:
    """`mse_distill` as a sum and the number of logit entries."""
    student_logits, teacher_logits = _flatten(student_logits, mask, teacher_logits)
    return LossSum.of((student_logits.float() - teacher_logits.float()) ** 2)


def mse_distill(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error between raw logits (Tang et al. 2019), averaged over all logit entries."""
    return mse_distill_sum(student_logits, teacher_logits, mask).mean()


def two_class_logits(logit: torch.Tensor) -> torch.Tensor:
    """A one-logit (sigmoid) model's output z as two logits [0, z]: softmax gives sigmoid(z) for class 1,
    so every term and pseudo-label written for two logits reads a binary teacher correctly."""
    return torch.cat([torch.zeros_like(logit), logit], dim=-1)


def teacher_binary_logit(teacher_logits: torch.Tensor) -> torch.Tensor:
    """A two-class teacher as one logit: sigmoid(t1 - t0) equals softmax(t)[1]."""
    return teacher_logits[..., 1] - teacher_logits[..., 0]


def binary_kl_distill_sum(student_logit: torch.Tensor, teacher_logits: torch.Tensor,
                          temperature: float = 1.0) -> LossSum:
    """`binary_kl_distill` as a sum and the number of examples: the two-class `softened_kl` of the
    logits [0, s] and [0, t1 - t0], whose softmaxes are the Bernoullis."""
    s = two_class_logits(student_logit.reshape(-1, 1))
    t = two_class_logits(teacher_binary_logit(teacher_logits).reshape(-1, 1))
    return LossSum.of(softened_kl(s, t, temperature))


def binary_kl_distill(student_logit: torch.Tensor, teacher_logits: torch.Tensor,
                      temperature: float = 1.0) -> torch.Tensor:
    """T^2 * KL between Bernoulli(sigmoid(t/T)) and Bernoulli(sigmoid(s/T)) for a one-logit student."""
    return binary_kl_distill_sum(student_logit, teacher_logits, temperature).mean()


def binary_mse_distill_sum(student_logit: torch.Tensor, teacher_logits: torch.Tensor) -> LossSum:
    """`binary_mse_distill` as a sum and the number of examples."""
    margin = teacher_binary_logit(teacher_logits).reshape(-1).float()
    return LossSum.of((student_logit.reshape(-1).float() - margin) ** 2)


def binary_mse_distill(student_logit: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """MSE between the student's logit and the teacher's logit margin t1 - t0.

    Margins, not raw logits (only defined up to a shift): 4 times the two-logit MSE of centred logits.
    """
    return binary_mse_distill_sum(student_logit, teacher_logits).mean()


def mixture_logits(teacher_logits: Sequence[torch.Tensor], weights: Sequence[float],
                   temperature: float = 1.0) -> torch.Tensor:
    """Several teachers' logits (each (..., classes), in one label order) as the logits of their weighted
    mean distribution at temperature T: m = T * log(sum_i w_i softmax(z_i / T)), so softmax(m / T) is the
    mixture itself and the KL term, pseudo-labels and confidences read it as one teacher's (`weights`: one
    per teacher, summing to 1). A teacher with itself, or weights (1, 0), gives that teacher's logits up to a
    shift per row, which no softmax sees.

    At a large T the log-probabilities are all about -log(classes), and float32 keeps 7 digits of them, which
    T multiplies (at T = 1e6, errors of 0.3 in logits of order 3). Rows whose softened distributions all lie
    within a factor e^0.5 of uniform instead take an exact rewriting: with v_i = log softmax(z_i / T) +
    log(classes), computed from the logits centred at their own scale, m = T * log1p(sum_i w_i expm1(v_i))
    (up to the row's shift), each part of the order of v; the other rows are computed as written.
    """
    z = torch.stack([logits.float() for logits in teacher_logits])  # (teachers, ..., classes)
    w = torch.tensor([float(weight) for weight in weights], device=z.device).view(-1, *([1] * (z.dim() - 1)))
    log_p = F.log_softmax(z / temperature, dim=-1)
    direct = temperature * torch.logsumexp(w.log() + log_p, dim=0)
    close = (log_p + math.log(z.size(-1))).abs().amax(-1, keepdim=True).amax(0) <= _SMALL
    u = torch.where(close, (z - z.mean(-1, keepdim=True)) / temperature, torch.zeros_like(z))
    v = u - torch.log1p(torch.expm1(u).mean(-1, keepdim=True))  # log softmax(u) + log(classes), exactly
    series = temperature * torch.log1p((w * torch.expm1(v)).sum(0))
    return torch.where(close, series, direct)


def mean_logits(teacher_logits: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """The weighted mean of several teachers' raw logits (each (..., classes), in one label order): what the
    ``mse`` term regresses for an ensemble (Tang et al. 2019 regress logits, not probabilities)."""
    return sum(float(weight) * logits.float() for weight, logits in zip(weights, teacher_logits, strict=True))


def uniform_layer_map(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """Which teacher layer each student layer learns from, counted from 0 as `--layer-map` counts: student
    layer i of k from teacher layer (i+1)*n//k - 1 of n, so the last learns from the last (TinyBERT's
    uniform mapping)."""
    return [(i, (i + 1) * teacher_layers // student_layers - 1) for i in range(student_layers)]


def hidden_mse_sum(student_states: Sequence[torch.Tensor], teacher_states: Sequence[torch.Tensor],
                   projections: Sequence[Callable[[torch.Tensor], torch.Tensor]] | None = None,
                   mask: torch.Tensor | None = None) -> LossSum:
    """`hidden_mse` as a sum and the number of state entries compared."""
    squared = []
    for index, (student, teacher) in enumerate(zip(student_states, teacher_states, strict=True)):
        student, teacher = _flatten(student, mask, teacher)
        if projections is not None:
            student = projections[index](student)
        squared.append(((student.float() - teacher.float()) ** 2).reshape(-1))
    return LossSum.of(torch.cat(squared))


def hidden_mse(student_states: Sequence[torch.Tensor], teacher_states: Sequence[torch.Tensor],
               projections: Sequence[Callable[[torch.Tensor], torch.Tensor]] | None = None,
               mask: torch.Tensor | None = None) -> torch.Tensor:
    """MSE between hidden states of mapped layer pairs (TinyBERT's hidden-state term): pair k compares
    ``projections[k](student_states[k])`` (a learned map to the teacher's width when the widths differ)
    with ``teacher_states[k]``, (batch[, positions], width) each, averaged over every entry of every
    pair at the positions `mask` marks."""
    return hidden_mse_sum(student_states, teacher_states, projections, mask).mean()


def attention_kl_sum(student_log_probs: Sequence[torch.Tensor], teacher_log_probs: Sequence[torch.Tensor],
                     mask: torch.Tensor | None = None) -> LossSum:
    """`attention_kl` as a sum and the number of (example, head, query) rows compared."""
    rows = []
    for student, teacher in zip(student_log_probs, teacher_log_probs, strict=True):
        if mask is not None:  # (batch, heads, queries, keys) -> (real queries, heads, keys)
            student, teacher = student.transpose(1, 2)[mask], teacher.transpose(1, 2)[mask]
        student, teacher = student.float(), teacher.float()
        p_teacher = teacher.exp()
        # keys neither side attends to (padding) have p = 0 and log p = -inf on both: they add nothing
        kl = torch.where(p_teacher > 0, p_teacher * (teacher - student), torch.zeros_like(p_teacher)).sum(-1)
        rows.append(kl.reshape(-1))
    return LossSum.of(torch.cat(rows))


def attention_kl(student_log_probs: Sequence[torch.Tensor], teacher_log_probs: Sequence[torch.Tensor],
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """KL(teacher || student) between the attention distributions of mapped layer pairs (MiniLM's
    self-attention term; TinyBERT matches the same maps by MSE): pair k compares the log-probabilities
    ``student_log_probs[k]`` and ``teacher_log_probs[k]``, (batch, heads, queries, keys) each, head by
    head and query by query, averaged over every head and real query (`mask`: (batch, queries)) of every
    pair. Both must read the same tokens with as many heads."""
    return attention_kl_sum(student_log_probs, teacher_log_probs, mask).mean()


def cosine_distance_sum(student: torch.Tensor, teacher: torch.Tensor,
                        projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
                        mask: torch.Tensor | None = None) -> LossSum:
    """`cosine_distance` as a sum and the number of rows (sentences, or masked words) compared."""
    student, teacher = _flatten(student, mask, teacher)
    if projection is not None:
        student = projection(student)
    return LossSum.of(1 - F.cosine_similarity(student.float(), teacher.float(), dim=-1))


def cosine_distance(student: torch.Tensor, teacher: torch.Tensor,
                    projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
    """1 - cos(student, teacher) per row, averaged (DistilBERT's cosine embedding loss): the direction of
    a representation, not its scale, (batch[, positions], width) each, through `projection` (a learned
    map to the teacher's width) where the widths differ, at the positions `mask` marks."""
    return cosine_distance_sum(student, teacher, projection, mask).mean()


def teacher_mistakes(teacher_logits: torch.Tensor, targets: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """Where the teacher's top class is not the gold label: a boolean of `targets`' shape, (batch) for
    classification or (batch, words) for tagging; false where there is no gold label (IGNORE_INDEX: an
    unlabeled example, a padding position) and outside `mask`."""
    wrong = (targets != IGNORE_INDEX) & (teacher_logits.argmax(-1) != targets)
    return wrong if mask is None else wrong & mask


def shift_teacher_mistakes(teacher_logits: torch.Tensor, targets: torch.Tensor,
                           mask: torch.Tensor | None = None) -> torch.Tensor:
    """TextBrewer's probability shift: where the teacher's top class is not the gold label
    (`teacher_mistakes`), its logits of the two swap places, so the gold label is on top and the other
    classes keep their ranks and values; elsewhere (right, no gold label, outside `mask`) the logits stay."""
    top = teacher_logits.argmax(-1, keepdim=True)
    gold = torch.where(targets == IGNORE_INDEX, top.squeeze(-1), targets).unsqueeze(-1)  # a class index anyway
    swapped = teacher_logits.scatter(-1, top, teacher_logits.gather(-1, gold))
    swapped = swapped.scatter(-1, gold, teacher_logits.gather(-1, top))
    return torch.where(teacher_mistakes(teacher_logits, targets, mask).unsqueeze(-1), swapped, teacher_logits)


KDLoss = Callable[[torch.Tensor, torch.Tensor, float, "torch.Tensor | None"], LossSum]
KD_LOSSES: Registry[KDLoss] = Registry("kd loss")


def register_kd_loss(name: str) -> Callable[[KDLoss], KDLoss]:
    """Register a distillation term ``f(student_logits, teacher_logits, temperature, mask) -> LossSum``
    under `name`: `TeacherStudentDistill(kd_loss=name)` and ``nlp-train kd --kd-loss`` then offer it.
    A one-logit (binary) student passes (batch, 1) logits against the teacher's (batch, 2)."""
    return KD_LOSSES.decorator(name)


@register_kd_loss("kl")
def kl_term(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
            mask: torch.Tensor | None) -> LossSum:
    """T^2 * KL(teacher || student) at temperature T (Hinton et al. 2015)."""
    if student_logits.size(-1) == 1:
        return binary_kl_distill_sum(student_logits, teacher_logits, temperature)
    return kl_distill_sum(student_logits, teacher_logits, temperature, mask)


@register_kd_loss("mse")
def mse_term(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
             mask: torch.Tensor | None) -> LossSum:
    """MSE between raw logits (Tang et al. 2019); the temperature plays no part."""
    if student_logits.size(-1) == 1:
        return binary_mse_distill_sum(student_logits, teacher_logits)
    return mse_distill_sum(student_logits, teacher_logits, mask)
