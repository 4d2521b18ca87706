"""`TeacherStudentDistill`: the student's loss plus a distillation term against teacher logits.

    loss = w_s * student_loss + w_d * distill_loss

student_loss is the student's class-weighted NLL (or CRF NLL) against gold labels, and, for
unlabeled examples, against the teacher's argmax (pseudo-labels). distill_loss is
T^2 * KL(softmax(t/T) || softmax(s/T)) or the MSE between raw logits (Tang et al. 2019),
token-level for taggers over the words both sides scored. With a transformer teacher and student,
``w_h * hidden_term`` (the MSE between mapped layers' states), ``w_a * attention_term`` (the KL
between their attention distributions) and ``w_c * cosine_term`` (the cosine distance between the last
layers' states) can join them (`LayerObjective`).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import weakref
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, Sequence

import torch
from torch import nn

from distill import distributed, losses, precision
from distill.errors import DistillError, option
from distill.inference import ExampleLogits
from distill.training import Objective

if TYPE_CHECKING:
    from distill.spill import SpilledLogits

DEFAULT_KD_LOSS = "kl"
DEFAULT_TEMPERATURE = 2.0
DEFAULT_STUDENT_WEIGHT = 0.5
DEFAULT_DISTILL_WEIGHT = 0.5
# What the distillation term makes of a labelled example (word) whose gold label is not the teacher's top class
TEACHER_MISTAKES = ("keep", "shift", "drop")

SupervisedLoss = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None"], losses.LossSum]


class TeacherLogits(Protocol):
    """Where teacher logits come from: a precomputed cache or the teacher itself."""

    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def target_logits(self, indices: Sequence[int]) -> torch.Tensor | None:
        """The logits an unlabeled row's hard target and confidence come from, where they are not `logits`' (an
        ensemble's mixture at T = 1, `distill.ensemble`); None: `logits`' own."""


class CachedTeacherLogits:
    """Teacher logits computed once for the whole transfer set (see `distill.cache`), in memory
    (`ExampleLogits`) or, for a transfer set grown by augmentation, on disk (`distill.spill.SpilledLogits`)."""

    def __init__(self, results: "ExampleLogits | SpilledLogits"):
        self.results = results

    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.results.batch(indices)

    def target_logits(self, indices: Sequence[int]) -> torch.Tensor | None:
        return None

    @functools.cached_property
    def digest(self) -> str:
        """The logits' checksum. A teacher's logits for an example depend slightly on the batch it was
        scored in (its padding), so a cache filled by another command, or scored again after it was
        cleared, holds other logits: a resume must train on the very ones it started with."""
        return self.results.digest


class OnlineTeacherLogits:
    """Runs the teacher on every batch (slower; for comparison with the cache, and for the hidden-state
    term, which reads the teacher's inputs of the latest batch, `inputs`)."""

    def __init__(self, teacher: torch.nn.Module, examples: Sequence):
        self.teacher, self.examples = teacher.eval(), examples
        self.inputs: dict[str, torch.Tensor] = {}

    @torch.inference_mode()
    def logits(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.inputs, scored = self.teacher.prepare_on_device([self.examples[i] for i in indices])
        with precision.autocast(self.teacher.device):
            logits = self.teacher(**self.inputs)
        return logits.float(), scored

    def target_logits(self, indices: Sequence[int]) -> torch.Tensor | None:
        return None


class LayerStates(NamedTuple):
    """What the layer terms compare, per mapped layer pair. The hidden-state term: the student's states,
    the teacher's, and the maps from the student's width to the teacher's; the cosine term reads the
    last of them (without the hidden-state term, they hold the last pair alone). The attention term:
    both sides' attention log-probabilities and the real query tokens, (batch, tokens). A term that is
    off leaves its fields empty."""

    student: Sequence[torch.Tensor] = ()
    teacher: Sequence[torch.Tensor] = ()
    projections: Sequence[Callable[[torch.Tensor], torch.Tensor]] = ()
    student_attention: Sequence[torch.Tensor] = ()
    teacher_attention: Sequence[torch.Tensor] = ()
    queries: torch.Tensor | None = None


def refuse_unweighted_class_weights(student_weight: float, class_weights: object) -> None:
    """Class weights weight the student's loss on the (gold or pseudo) labels, the NLL: with its weight 0 they
    would be accepted and change nothing."""
    if class_weights is not None and student_weight == 0:
        raise DistillError(f"class weights weight the student's loss on the labels, whose weight "
                           f"({option('--student-weight', 'student_weight')}) is 0: they would change nothing; "
                           f"drop them, or give that loss a weight")


def inert_settings(settings: dict[str, Any]) -> list[str]:
    """Those of `TeacherStudentDistill`'s keyword `settings` (the others at their defaults) that the rest leave
    nothing to act on: `min_confidence` drops pseudo-labels from the student's loss on the labels (weight
    `student_weight`), `teacher_mistakes` judges the distillation term (weight `distill_weight`), and
    `teacher_layers` pairs the layers that the layer terms compare. A search trial leaves them out."""
    values = {**DEFAULT_SETTINGS, **settings}
    layer_weights = (values["hidden_weight"], values["attention_weight"], values["cosine_weight"])
    inert = {"min_confidence": values["min_confidence"] > 0 and values["student_weight"] == 0,
             "teacher_mistakes": values["teacher_mistakes"] != "keep" and values["distill_weight"] == 0,
             "teacher_layers": values["teacher_layers"] != "uniform" and not any(layer_weights)}
    return [name for name, unused in inert.items() if unused]


def refuse_inert_settings(settings: dict[str, Any]) -> None:
    """A loss setting that the others leave nothing to act on (`inert_settings`) would be accepted and change
    nothing: refused, named as the caller knows it."""
    inert = inert_settings(settings)
    if "min_confidence" in inert:
        weight = option("--student-weight", "student_weight")
        raise DistillError(f"{option('--min-confidence', 'min_confidence')} drops unsure pseudo-labels from the "
                           f"student's loss on the labels, whose weight ({weight}) is 0: it would change nothing; "
                           "drop it, or give that loss a weight")
    if "teacher_mistakes" in inert:
        raise DistillError(f"{option('--teacher-mistakes', 'teacher_mistakes')} {settings['teacher_mistakes']} changes "
                           f"the distillation term, whose weight ({option('--distill-weight', 'distill_weight')}) is "
                           "0: it would change nothing; drop it, or give that term a weight")
    if "teacher_layers" in inert:
        terms = option("--hidden-weight, --attention-weight and --cosine-weight",
                       "the layer terms (hidden_weight, attention_weight, cosine_weight)")
        raise DistillError(f"{option('--teacher-layers', 'teacher_layers')} pairs the layers that {terms} compare, "
                           "and all three are 0: drop it, or give a layer term a weight")


class TeacherStudentDistill(nn.Module):
    """The distillation loss: w_s * the student's loss on gold (or pseudo) labels + w_d * a distillation
    term (`distill.losses.KD_LOSSES`: ``kl``, ``mse`` or a registered one) against the teacher's logits
    (+ w_h, w_a, w_c * the hidden-state, attention and cosine terms, given the layers' states: `LayerObjective`,
    between the layers `teacher_layers` pairs: `layer_pairs`).

    A plain loss, usable in any training loop::

        loss = TeacherStudentDistill(temperature=2.0)(student_logits, teacher_logits, targets)

    Rows not `labelled` take the teacher's argmax as their hard target (pseudo-labels), dropped
    below `min_confidence`; for tagging, `mask` marks the (batch, words) positions both sides scored.
    `temperature` is kl's (and a registered loss's) T, 2 unless given; ``mse`` compares raw logits and
    refuses one, as ``--kd-loss mse --temperature`` is refused. Where the teacher's top class is not a
    labelled row's gold label, `teacher_mistakes` says what the distillation term makes of it (`distilled`):
    ``keep`` (the default), ``shift`` or ``drop``.

    An `nn.Module`, so it composes with other modules and `.to(device)` moves its class weights (a buffer
    outside `state_dict`: a setting, recorded by `settings`). It holds no trainable weights: the
    hidden-state term's width maps are the caller's (`LayerStates.projections`; in distill's loop
    `LayerObjective`'s, kept in the run's resume state).
    """

    def __init__(self, kd_loss: str = DEFAULT_KD_LOSS, temperature: float | None = None,
                 student_weight: float = DEFAULT_STUDENT_WEIGHT, distill_weight: float = DEFAULT_DISTILL_WEIGHT,
                 class_weights: Sequence[float] | None = None, min_confidence: float = 0.0,
                 hidden_weight: float = 0.0, attention_weight: float = 0.0, cosine_weight: float = 0.0,
                 teacher_layers: str | Sequence[int] = "uniform", teacher_mistakes: str = "keep"):
        losses.KD_LOSSES.entry(kd_loss)  # one of them, or a line naming them
        if kd_loss == "mse" and temperature is not None:
            raise DistillError("kd_loss 'mse' compares raw logits: a temperature has no effect there; leave it unset")
        temperature = DEFAULT_TEMPERATURE if temperature is None else temperature  # kl's (and a plugin loss's) T
        for name, value in (("temperature", temperature), ("student weight", student_weight),
                            ("distill weight", distill_weight), ("min confidence", min_confidence),
                            ("hidden weight", hidden_weight), ("attention weight", attention_weight),
                            ("cosine weight", cosine_weight)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DistillError(f"{name} must be a finite number, got {value!r}")
        if temperature < losses.MIN_TEMPERATURE:
            raise DistillError(f"temperature must be at least {losses.MIN_TEMPERATURE:g}, got {temperature:g}: below, "
                               "softening makes the distributions one-hot to within float32, so the kl term keeps "
                               "only the teacher's argmax and shrinks with T (at T -> 0, T times the student's "
                               "margin): distillation is off in effect; T = 1 compares the distributions as they are")
        if temperature > losses.MAX_TEMPERATURE:
            raise DistillError(f"temperature must be at most {losses.MAX_TEMPERATURE:g}, got {temperature:g}: by then "
                               "softening leaves the distributions uniform to within float32 (the kl term has long "
                               "reached its limit, half the mean squared difference of the centred logits)")
        if student_weight < 0 or distill_weight < 0 or student_weight + distill_weight == 0:
            raise DistillError("loss weights must be >= 0 and not both 0")
        if not 0.0 <= min_confidence <= 1.0:
            raise DistillError(f"min confidence must be within [0, 1], got {min_confidence}")
        if teacher_mistakes not in TEACHER_MISTAKES:
            raise DistillError(f"teacher mistakes {teacher_mistakes!r}: choose one of {', '.join(TEACHER_MISTAKES)}")
        for name, weight in (("hidden", hidden_weight), ("attention", attention_weight), ("cosine", cosine_weight)):
            if not weight >= 0:
                raise DistillError(f"{name} weight must be >= 0, got {weight}")
        refuse_inert_settings({"student_weight": student_weight, "distill_weight": distill_weight,
                               "min_confidence": min_confidence, "teacher_mistakes": teacher_mistakes,
                               "teacher_layers": teacher_layers, "hidden_weight": hidden_weight,
                               "attention_weight": attention_weight, "cosine_weight": cosine_weight})
        super().__init__()
        self.hidden_weight, self.attention_weight, self.cosine_weight = hidden_weight, attention_weight, cosine_weight
        chosen = parse_teacher_layers(teacher_layers)  # its form now; its length and range once the layers are known
        self.teacher_layers = "uniform" if chosen is None else ",".join(map(str, chosen))  # one spelling per choice
        self.kd_loss, self.temperature = kd_loss, temperature
        self.student_weight, self.distill_weight = student_weight, distill_weight
        refuse_unweighted_class_weights(student_weight, class_weights)
        self.register_buffer("class_weights", None if class_weights is None
                             else torch.tensor(class_weights, dtype=torch.float), persistent=False)
        self.min_confidence = min_confidence
        self.teacher_mistakes = teacher_mistakes

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self.settings().items())

    def settings(self) -> dict:
        """The knobs as JSON-able values (for a run's signature and summary)."""
        return {"kd_loss": self.kd_loss, "temperature": self.temperature, "student_weight": self.student_weight,
                "distill_weight": self.distill_weight, "min_confidence": self.min_confidence,
                "class_weights": None if self.class_weights is None else self.class_weights.tolist(),
                # only when on: the runs (and resume signatures) of before the terms stay as they were
                **({"hidden_weight": self.hidden_weight} if self.hidden_weight else {}),
                **({"attention_weight": self.attention_weight} if self.attention_weight else {}),
                **({"cosine_weight": self.cosine_weight} if self.cosine_weight else {}),
                **({"teacher_layers": self.teacher_layers} if self.teacher_layers != "uniform" else {}),
                **({"teacher_mistakes": self.teacher_mistakes} if self.teacher_mistakes != "keep" else {})}

    @property
    def uses_layers(self) -> bool:
        """Whether a term compares the layers inside (states, attention), not only the logits."""
        return self.hidden_weight > 0 or self.attention_weight > 0 or self.cosine_weight > 0

    def pseudo_targets(self, teacher_logits: torch.Tensor, targets: torch.Tensor, labelled: torch.Tensor,
                       scored: torch.Tensor | None) -> torch.Tensor:
        """Gold targets for labelled rows; the teacher's confident argmax for unlabeled rows."""
        probabilities = teacher_logits.softmax(-1)
        confidence, guess = probabilities.max(-1)
        keep = confidence >= self.min_confidence
        if scored is not None:
            keep &= scored
        guess = torch.where(keep, guess, torch.full_like(guess, losses.IGNORE_INDEX))
        row_unlabeled = ~labelled.view(-1, *([1] * (targets.dim() - 1)))
        return torch.where(row_unlabeled, guess, targets)

    def terms(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
              mask: torch.Tensor | None = None, labelled: torch.Tensor | None = None,
              supervised_loss: SupervisedLoss = losses.supervised_nll_sum,
              student_mask: torch.Tensor | None = None, layers: LayerStates | None = None,
              target_logits: torch.Tensor | None = None) -> list[losses.LossSum]:
        """w_s * the student's loss and w_d * the distillation term, each a sum with its own denominator;
        w_h * the hidden-state term (`losses.hidden_mse_sum` over `layers`, at `mask`) when w_h > 0,
        w_a * the attention term (`losses.attention_kl_sum`, at `layers.queries`) when w_a > 0, and
        w_c * the cosine term (`losses.cosine_distance_sum`, the last pair's states at `mask`) when w_c > 0.

        `supervised_loss` is the student's own (a CRF tagger's path NLL); it sees `student_mask`
        (default: `mask`), the words the student reads, while the distillation term and the
        pseudo-labels use `mask`, the words the teacher scored too. `target_logits` (default: the teacher's)
        give the pseudo-labels and their confidence: an ensemble's mixture at T = 1 (`EnsembleTeacherLogits`).
        """
        teacher_logits = teacher_logits.to(student_logits.device)
        if teacher_logits.size(-1) == 1:  # a --binary teacher (a chain's student): its logit z as [0, z]
            teacher_logits = losses.two_class_logits(teacher_logits)
        check_logits(student_logits, teacher_logits, targets)
        if labelled is None:
            labelled = torch.ones(len(targets), dtype=torch.bool, device=targets.device)
        guessing = teacher_logits if target_logits is None else target_logits.to(student_logits.device)
        targets = self.pseudo_targets(guessing, targets, labelled, mask)
        weights = None if self.class_weights is None else self.class_weights.to(student_logits.device)
        student_loss = supervised_loss(student_logits, targets, mask if student_mask is None else student_mask,
                                       weights)
        compared_student, compared_teacher, compared = self.distilled(student_logits, teacher_logits, targets,
                                                                      labelled, mask)
        distill_loss = losses.KD_LOSSES[self.kd_loss](compared_student, compared_teacher, self.temperature, compared)
        terms = [student_loss.scaled(self.student_weight).named("student"),
                 distill_loss.scaled(self.distill_weight).named("distillation")]
        if self.uses_layers and layers is None:
            raise DistillError("the layer terms need the layers' states: train through a LayerObjective (as "
                               "Distiller does), or pass layers=LayerStates(...)")
        if self.hidden_weight > 0:
            hidden_loss = losses.hidden_mse_sum(layers.student, layers.teacher, layers.projections, mask)
            terms.append(hidden_loss.scaled(self.hidden_weight).named("hidden"))
        if self.attention_weight > 0:
            attention_loss = losses.attention_kl_sum(layers.student_attention, layers.teacher_attention, layers.queries)
            terms.append(attention_loss.scaled(self.attention_weight).named("attention"))
        if self.cosine_weight > 0:
            cosine_loss = losses.cosine_distance_sum(layers.student[-1], layers.teacher[-1], layers.projections[-1],
                                                     mask)
            terms.append(cosine_loss.scaled(self.cosine_weight).named("cosine"))
        return terms

    def distilled(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                  labelled: torch.Tensor, mask: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The student's logits, the teacher's and the mask the distillation term compares, with the teacher's
        mistakes on the gold labels (those of the `labelled` rows of `targets`) as `teacher_mistakes` says:
        ``keep`` them, ``shift`` them (`losses.shift_teacher_mistakes`: the gold label swaps logits with the
        teacher's top class), or ``drop`` those examples (words) from the term (the student's loss on their
        gold labels stays)."""
        if self.teacher_mistakes == "keep":
            return student_logits, teacher_logits, mask
        row_labelled = labelled.view(-1, *([1] * (targets.dim() - 1)))
        gold = torch.where(row_labelled, targets, torch.full_like(targets, losses.IGNORE_INDEX))
        if self.teacher_mistakes == "shift":
            return student_logits, losses.shift_teacher_mistakes(teacher_logits, gold, mask), mask
        right = ~losses.teacher_mistakes(teacher_logits, gold, mask)
        if mask is not None:
            return student_logits, teacher_logits, mask & right
        return student_logits[right], teacher_logits[right], None

    def forward(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                mask: torch.Tensor | None = None, labelled: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of one batch: logits (batch[, words], labels), targets (batch[, words]) label
        indices (`distill.losses.IGNORE_INDEX`: none), `mask` (batch, words) for tagging."""
        return losses.combine(self.terms(student_logits, teacher_logits, targets, mask, labelled))


# TeacherStudentDistill's keyword defaults, against which `inert_settings` reads a partial set of settings
DEFAULT_SETTINGS = {name: parameter.default for name, parameter in
                    inspect.signature(TeacherStudentDistill.__init__).parameters.items() if name != "self"}


def check_logits(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor) -> None:
    """The loss's inputs belong together, or one `DistillError` says how they differ: a loop of the caller's own
    (transformers' `Trainer`) passes them by hand, and torch's own shape errors name no culprit."""
    shapes = (f"the student's logits {tuple(student_logits.shape)}, the teacher's {tuple(teacher_logits.shape)}, "
              f"the targets {tuple(targets.shape)}")
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise DistillError(f"the targets are label indices (integers; {losses.IGNORE_INDEX} for none), not "
                           f"{targets.dtype} values (one-hot or soft labels): give each example's label index")
    if student_logits.shape[:-1] != targets.shape or teacher_logits.shape[:-1] != targets.shape:
        raise DistillError(f"the loss takes (batch, labels) logits, or (batch, words, labels) for tagging, of the "
                           f"same examples as the targets (batch[, words]); got {shapes}: a teacher of another task, "
                           "or logits of other examples")
    labels = teacher_logits.size(-1)
    if student_logits.size(-1) not in (labels, 1) or (student_logits.size(-1) == 1 and labels != 2):
        raise DistillError(f"the teacher scores {labels} labels, the student {student_logits.size(-1)}: build the "
                           "student with the teacher's labels (build_student(config, teacher.hierarchy, ...))")
    given = targets[targets != losses.IGNORE_INDEX]
    if given.numel() and (given.min() < 0 or given.max() >= labels):
        raise DistillError(f"the targets hold label index {int(given.max() if given.max() >= labels else given.min())}"
                           f", but the teacher scores {labels} labels: the targets are indices of the teacher's "
                           f"labels (from 0; {losses.IGNORE_INDEX} for none)")


class DistillObjective(Objective):
    """`TeacherStudentDistill` in the training loop: teacher logits looked up by example position."""

    def __init__(self, loss: TeacherStudentDistill, teacher: TeacherLogits):
        self.loss, self.teacher = loss, teacher

    def terms(self, student: torch.nn.Module, logits: torch.Tensor, batch: dict) -> list[losses.LossSum]:
        teacher_logits, scored = self.teacher.logits(batch["indices"])
        mask = batch["mask"]
        both = None if mask is None else mask & scored.to(mask.device)  # the teacher may not score some words
        guessing = self.teacher.target_logits(batch["indices"])
        return self.loss.terms(logits, teacher_logits, batch["targets"], both, batch["labelled"],
                               student.supervised_loss, student_mask=mask, layers=self.layer_states(student, batch),
                               target_logits=guessing)

    def layer_states(self, student: torch.nn.Module, batch: dict) -> LayerStates | None:
        """What the layer terms compare for `batch` (after the teacher's logits): none here."""
        return None

    def state_dict(self) -> dict:
        digest = getattr(self.teacher, "digest", None)  # cached logits: the run's resume must train on them
        return {} if digest is None else {"teacher_logits_sha256": digest}

    def load_state_dict(self, state: dict) -> None:
        saved = state.get("teacher_logits_sha256")
        if saved is not None and saved != getattr(self.teacher, "digest", None):
            raise DistillError("cannot resume: the teacher's logits differ from those the interrupted run trained on "
                               "(computed again, in other batches: its logit cache was cleared or moved, or its "
                               "shards were written by an older distill and are not trusted now): resume with that "
                               f"{option('--cache-dir', 'cache_dir')}, or start over with "
                               f"{option('--overwrite', 'overwrite=True')}")


def encoder_reader(model: torch.nn.Module):
    """The `Teacher` module that reads text for a transformer model (a teacher, or a transformer
    student's `network`), or None for a model without a transformer encoder."""
    from distill.models.teacher import Teacher
    reader = getattr(model, "network", model)
    return reader if isinstance(reader, Teacher) else None


class LayerOutputs:
    """Forward hooks keeping the output states of a transformer's encoder layers, those of its latest
    forward pass; `remove` takes them off."""

    def __init__(self, model: torch.nn.Module):
        from distill.models.transformer_student import layer_stack
        parent, attribute = layer_stack(encoder_reader(model).encoder)
        layers = getattr(parent, attribute)
        self.outputs: list[torch.Tensor | None] = [None] * len(layers)
        self.handles = [layer.register_forward_hook(self._keeper(index)) for index, layer in enumerate(layers)]

    def _keeper(self, index: int):
        def keep(module, args, output):
            self.outputs[index] = output[0] if isinstance(output, tuple) else output
        return keep

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def aligned_states(model: torch.nn.Module, states: list[torch.Tensor], inputs: dict) -> list[torch.Tensor]:
    """Layer states at the places teacher and student share whatever their tokenizers: for
    classification the sentence as the model pools it (a text read in windows: the mean of its
    windows' pooled states), (batch, width); for tagging each word's first
    sub-token on the (sentences, words, width) grid of its logits."""
    from distill.models.layers import place_in_grid, pool
    if "word_positions" not in inputs:
        pooled = [pool(state, inputs["attention_mask"], encoder_reader(model).config.pooling) for state in states]
        weights = inputs.get("window_weights")  # a text read in windows: the mean of its windows, as its logits
        return pooled if weights is None else [weights.to(state.dtype) @ state for state in pooled]
    index = inputs["word_positions"].unsqueeze(-1)
    return [place_in_grid(state.gather(1, index.expand(-1, -1, state.size(-1))), inputs["word_slots"],
                          inputs["grid_shape"]) for state in states]


RECORDING_ATTENTION = "distill-recording"
# attention module -> where its latest attention log-probabilities go (modules of encoders being watched)
_ATTENTION_SINKS: "weakref.WeakKeyDictionary[nn.Module, Callable[[torch.Tensor], None]]" = weakref.WeakKeyDictionary()


def recording_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                        **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' eager attention, which also hands a watched module's attention log-probabilities
    (before dropout) to its sink: registered with transformers' attention interface as
    ``RECORDING_ATTENTION``, with the eager additive mask."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    log_probs = torch.log_softmax(scores.float(), dim=-1)
    sink = _ATTENTION_SINKS.get(module)
    if sink is not None:
        sink(log_probs)
    probs = nn.functional.dropout(log_probs.exp().to(query.dtype), p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


class AttentionMaps:
    """The attention log-probabilities (batch, heads, queries, keys) of a transformer's encoder layers in
    its latest forward pass: while on, the encoder attends through `recording_attention` (the same
    numbers as its own attention); `remove` gives it its own back. The encoder must compute attention
    through transformers' attention interface (`check_attention_term`)."""

    def __init__(self, model: torch.nn.Module):
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

        from distill.models.transformer_student import layer_stack
        self.encoder = encoder_reader(model).encoder
        AttentionInterface.register(RECORDING_ATTENTION, recording_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(RECORDING_ATTENTION, eager_mask)
        self.own = self.encoder.config._attn_implementation
        self.encoder.set_attn_implementation(RECORDING_ATTENTION)
        parent, attribute = layer_stack(self.encoder)
        self.layers = getattr(parent, attribute)
        self.outputs: list[torch.Tensor | None] = [None] * len(self.layers)
        for index, layer in enumerate(self.layers):
            for module in layer.modules():
                _ATTENTION_SINKS[module] = self._keeper(index)

    def _keeper(self, index: int):
        def keep(log_probs: torch.Tensor) -> None:
            self.outputs[index] = log_probs
        return keep

    def remove(self) -> None:
        for layer in self.layers:
            for module in layer.modules():
                _ATTENTION_SINKS.pop(module, None)
        self.encoder.set_attn_implementation(self.own)


def _no_attention() -> str:
    """Turning the attention term off, as the caller knows it."""
    return option("--attention-weight 0", "TeacherStudentDistill(attention_weight=0)")


def _layer_terms() -> str:
    """The layer terms' weights, as the caller knows them."""
    return option("--hidden-weight, --attention-weight, --cosine-weight", "hidden_weight, attention_weight, "
                  "cosine_weight")


def check_attention_term(student: torch.nn.Module, teacher: torch.nn.Module) -> None:
    """Refuse the attention term where student and teacher do not attend over the same tokens with as
    many heads (it compares their attention head by head, query token by query token), or where an
    encoder computes attention in its own code, out of `AttentionMaps`'s reach."""
    ours, theirs = encoder_reader(student), encoder_reader(teacher)
    for reader in (ours, theirs):
        if not reader.encoder._can_set_attn_implementation():
            raise DistillError(f"the attention term reads attention through transformers' attention interface, "
                               f"which {type(reader.encoder).__name__} does not use: set {_no_attention()}")
    heads = [reader.encoder.config.num_attention_heads for reader in (ours, theirs)]
    if heads[0] != heads[1]:
        raise DistillError(f"the attention term compares head by head: the student has {heads[0]} attention "
                           f"heads a layer, the teacher {heads[1]}; set {_no_attention()}")
    if ours.tokenizer.get_vocab() != theirs.tokenizer.get_vocab():
        raise DistillError("the attention term compares token by token, and the student's tokenizer is not the "
                           f"teacher's: use {option('--hidden-weight', 'hidden_weight')}, which compares words, or a "
                           "student cut from the teacher")
    if theirs.config.windows_per_text > 1:
        windows = option("--long-inputs windows", "TeacherConfig(long_inputs='windows')")
        raise DistillError("the attention term compares token by token, and the teacher reads long texts in "
                           f"windows ({windows}) where the student reads one: set {_no_attention()}")
    if ours.config.max_length != theirs.config.max_length:
        length = theirs.config.max_length
        raise DistillError(f"the attention term compares token by token: the student reads {ours.config.max_length} "
                           f"sub-tokens, the teacher {length}; set "
                           f"{option(f'--max-length {length}', f'TransformerStudentConfig(max_length={length})')}")


def parse_teacher_layers(teacher_layers: str | Sequence[int]) -> list[int] | None:
    """The teacher layer numbers `teacher_layers` lists, one per student layer (None for "uniform"): a
    text of plain digits and commas such as "0,2,4", or the numbers themselves."""
    if teacher_layers == "uniform":
        return None
    if isinstance(teacher_layers, str):
        plain = re.fullmatch(r"[0-9]+(,[0-9]+)*", teacher_layers)  # not int()'s " 1", "+1", "1_0" or "１"
        chosen = [int(value) for value in teacher_layers.split(",")] if plain else []
    elif isinstance(teacher_layers, (list, tuple)) and all(type(value) is int for value in teacher_layers):
        chosen = list(teacher_layers)
    else:
        chosen = []
    if not chosen or min(chosen) < 0:
        raise DistillError(f"teacher layers {teacher_layers!r}: use uniform or one teacher layer number per student "
                           f"layer, counted from 0, such as 0,2,4")
    return chosen


def layer_pairs(teacher_layers: str, student_depth: int, teacher_depth: int) -> list[tuple[int, int]]:
    """(student layer, teacher layer) pairs, counted from 0, that the layer terms compare: `teacher_layers`
    is "uniform" (`losses.uniform_layer_map`) or one teacher layer per student layer, e.g. "0,2,4" for a
    student cut from the teacher's layers 0, 2 and 4 (`--layer-map 0,2,4`)."""
    chosen = parse_teacher_layers(teacher_layers)
    if chosen is None:
        return losses.uniform_layer_map(student_depth, teacher_depth)
    if len(chosen) != student_depth:
        raise DistillError(f"teacher layers {teacher_layers} name {len(chosen)} layers for a student of "
                           f"{student_depth}: give one per student layer")
    if max(chosen) >= teacher_depth:
        raise DistillError(f"teacher layers {teacher_layers}: the teacher has layers 0 to {teacher_depth - 1}")
    return list(enumerate(chosen))


def check_layer_models(teacher: torch.nn.Module, student: torch.nn.Module) -> None:
    """The layer terms compare the layers of distill's own transformer teacher (or a transformer student as
    teacher) with a transformer student's: any other model is refused, before a teacher is asked anything (a
    served one's requests cost)."""
    for role, model in (("teacher", teacher), ("student", student)):
        if encoder_reader(model) is not None:
            continue
        config = getattr(model, "config", None)
        what = f"a {config.model} student" if getattr(model, "kind", None) == "student" and config is not None else \
            f"{getattr(model, 'source', None) or getattr(config, 'source', None) or 'the teacher'} " \
            f"({type(model).__name__}), whose layers distill does not read (only its logits)"
        raise DistillError(f"the layer terms ({_layer_terms()}) compare transformer layers: the {role} must be "
                           f"distill's transformer teacher or a transformer student, not {what}: set "
                           f"{_layer_terms()} to 0")


class LayerObjective(DistillObjective):
    """`DistillObjective` plus the layer terms, each student layer against the teacher layer the loss's
    `teacher_layers` pairs it with (`layer_pairs`; by default student layer i of k against teacher layer
    (i+1)*n//k - 1 of n); the teacher runs on every batch (the logit cache holds no states).

    * hidden states (TinyBERT's): compared where both read the same thing (`aligned_states`), through a
      learned Linear map where the widths differ. The maps train with the student and are kept in the
      run's resume state, not in the student; `seed` starts them.
    * attention (MiniLM's): the two layers' attention distributions, head by head over the same tokens
      (`check_attention_term`).
    * cosine (DistilBERT's): the direction of the last pair's states, where the hidden-state term compares
      them, through the same map.

    A context manager: leaving it takes the hooks off both models and gives their encoders their own
    attention back."""

    def __init__(self, loss: TeacherStudentDistill, teacher: torch.nn.Module, student: torch.nn.Module,
                 examples: Sequence, seed: int = 0):
        check_layer_models(teacher, student)
        if distributed.world_size() > 1:
            raise DistillError(f"the layer terms ({_layer_terms()}) run as one process: start "
                               f"{option('kd', 'it')} without torchrun")
        if loss.attention_weight > 0:
            check_attention_term(student, teacher)
        super().__init__(loss, OnlineTeacherLogits(teacher, examples))
        self.student_outputs, self.teacher_outputs = LayerOutputs(student), LayerOutputs(teacher)
        depths = len(self.student_outputs.outputs), len(self.teacher_outputs.outputs)
        self.pairs = layer_pairs(loss.teacher_layers, *depths)
        # the pairs whose states are compared: all for the hidden-state term, the last for the cosine term
        self.state_pairs = self.pairs if loss.hidden_weight > 0 else self.pairs[-1:] if loss.cosine_weight > 0 else []
        widths = [encoder_reader(model).encoder.config.hidden_size for model in (student, teacher)]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.projections = nn.ModuleList(nn.Linear(*widths) if widths[0] != widths[1] else nn.Identity()
                                             for _ in self.state_pairs).to(teacher.device)
        self.attention = [AttentionMaps(model) for model in (student, teacher)] if loss.attention_weight > 0 else []

    def __enter__(self) -> "LayerObjective":
        return self

    def __exit__(self, *exc) -> None:
        self.student_outputs.remove()
        self.teacher_outputs.remove()
        for maps in self.attention:
            maps.remove()

    def parameters(self) -> list[nn.Parameter]:
        return list(self.projections.parameters())

    def state_dict(self) -> dict:
        return self.projections.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.projections.load_state_dict(state)

    def layer_states(self, student: torch.nn.Module, batch: dict) -> LayerStates:
        """The mapped layers' states (and attention) of the student's latest forward (this batch's) and of
        the teacher's."""
        states = {}
        if self.state_pairs:
            ours = [self.student_outputs.outputs[i] for i, _ in self.state_pairs]
            theirs = [self.teacher_outputs.outputs[j] for _, j in self.state_pairs]
            states.update(student=aligned_states(student, ours, batch["inputs"]), projections=self.projections,
                          teacher=aligned_states(self.teacher.teacher, theirs, self.teacher.inputs))
        if self.attention:
            tokens = batch["inputs"]["input_ids"]
            if not torch.equal(tokens, self.teacher.inputs["input_ids"].to(tokens.device)):
                raise DistillError("the attention term compares token by token, and the student and the teacher "
                                   f"read this batch as different tokens: set {_no_attention()}")
            ours, theirs = (maps.outputs for maps in self.attention)
            states.update(student_attention=[ours[i] for i, _ in self.pairs],
                          teacher_attention=[theirs[j] for _, j in self.pairs],
                          queries=batch["inputs"]["attention_mask"].bool())
        return LayerStates(**states)
