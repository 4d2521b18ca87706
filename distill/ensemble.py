"""Ensembles of teachers: several teachers taught, and labelling, as one, through the weighted mixture of their
distributions (`ensemble_logits`), with one label set (`check_ensemble`) and weights (`ensemble_weights`, written on
the command line as `parse_teacher_weights` reads them). A kd run's `EnsembleTeacherLogits` is the teacher-logits
source (`distill.distillation.TeacherLogits`) that single teachers' caches also are; `pseudo-label` labels by the
same mixture at T = 1.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch

from distill import losses
from distill.distillation import CachedTeacherLogits
from distill.errors import DistillError, option
from distill.inference import ExampleLogits

if TYPE_CHECKING:
    from distill.distillation import TeacherStudentDistill
    from distill.spill import SpilledLogits


def parse_teacher_weights(value: str | Sequence[float] | None) -> Sequence[float] | None:
    """Ensemble weights written as text (``--teacher-weights 0.7,0.3``, a run config, a ``DistillSettings``
    field): comma-separated numbers, one per teacher; a sequence or None as given. `ensemble_weights` checks
    them against the teachers."""
    if not isinstance(value, str):
        return value
    try:
        return [float(weight) for weight in value.split(",")]
    except ValueError:
        raise DistillError(f"use comma-separated numbers, one per {option('--teacher', 'teacher')}, e.g. 0.7,0.3; "
                           f"not {value!r:.60}") from None


TEACHER_WEIGHTS_OPTION = {"parse": parse_teacher_weights, "metavar": "W,W,...",  # `distill.settings`
                          "help": "With --teacher repeated: one positive weight per teacher, in their order, "
                                  "normalised to sum 1 [default: equal]."}


def ensemble_weights(weights: Sequence[float] | None, teachers: int) -> list[float] | None:
    """The weights of an ensemble of `teachers`, normalised to sum 1 (None: equal): one positive number per
    teacher, in the teachers' order. One teacher has none (None), and is given none."""
    named = option("--teacher-weights", "teacher_weights")
    if teachers == 1:
        if weights is not None:
            raise DistillError(f"{named} weight the teachers of an ensemble, and one teacher was given: give several "
                               f"{option('--teacher', 'teachers (teacher=[A, B])')}, or drop {named}")
        return None
    if weights is None:
        return [1.0 / teachers] * teachers
    numbers = isinstance(weights, (list, tuple)) and all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0 for w in weights)
    if not numbers:
        raise DistillError(f"{named}: give one positive number per teacher, got {weights!r}")
    if len(weights) != teachers:
        raise DistillError(f"{named} gives {len(weights)} weights for {teachers} teachers: give one per teacher, in "
                           "the teachers' order")
    total = sum(weights)
    if not math.isfinite(total):  # weights each finite but summing past the largest float: their ratios are meant
        weights = [w / max(weights) for w in weights]
        total = sum(weights)
    return [w / total for w in weights]


def _identity(source: object) -> object:
    """What makes two teachers of an ensemble one: a folder by its real path (``A``, ``./A``, a link to it), a served
    or hub model by its name, a model in memory by the object."""
    if not isinstance(source, (str, Path)):
        return ("in memory", id(source))
    from distill.models.hub_files import HUB
    from distill.models.prompt import is_served
    if is_served(source) or str(source).startswith(HUB):
        return ("named", str(source))
    return ("folder", os.path.realpath(source))


def _export_record(source: object) -> dict | None:
    """The ``export`` record of an export's model card (the model it was made from: that model's card sha256, or a
    transformers folder's fingerprint), None for any other teacher."""
    if not isinstance(source, (str, Path)) or not os.path.isdir(source):
        return None
    from distill.models.card import MODEL_CARD
    try:
        export = json.loads((Path(source) / MODEL_CARD).read_text(encoding="utf-8")).get("export")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None  # no card, or not one of an export: loading the teacher says what is wrong with it
    return export if isinstance(export, dict) else None


def _one_model(first: object, second: object) -> str | None:
    """How two teachers of other paths are one model all the same (an export and the model it was made from, as
    its card records it; two exports of one model), or None: an export labels as its source does, to its
    precision, so the two mixed are that teacher alone."""
    from distill.models.onnx import made_from
    records = _export_record(first), _export_record(second)
    if all(records):
        made = [record.get("source_card_sha256") or record.get("source_fingerprint") for record in records]
        return "exports of one model" if made[0] and made[0] == made[1] else None
    if any(records):
        record, other = (records[0], second) if records[0] else (records[1], first)
        if isinstance(other, (str, Path)) and os.path.isdir(other) and made_from(record, other):
            return "one an export of the other"
    return None


def check_distinct_teachers(sources: Sequence[object], names: Sequence[str]) -> None:
    """An ensemble names each teacher once (`sources`: folders, served models' names or models in memory, named
    by `names`), an export and its source model being one teacher (`_one_model`): one teacher twice mixes it with
    itself, which is that teacher alone at twice the cost, and is most likely another teacher mistyped; refused
    before anything is loaded."""
    seen: dict[object, str] = {}
    for source, name in zip(sources, names, strict=True):
        key = _identity(source)
        if key in seen:
            raise _given_twice(seen[key], name, "")
        seen[key] = name
    for later in range(len(sources)):
        for earlier in range(later):
            how = _one_model(sources[earlier], sources[later])
            if how is not None:
                raise _given_twice(names[earlier], names[later], f" ({how})")


def _given_twice(first: str, second: str, how: str) -> DistillError:
    """The refusal of teachers `first` and `second` as one, `how` saying why where their paths differ."""
    return DistillError(f"teachers {first} and {second} are one teacher given twice{how}: an ensemble mixes "
                        f"different teachers (a teacher mixed with itself is that teacher alone); give each "
                        f"{option('--teacher', 'teacher')} once, and {option('--teacher-weights', 'teacher_weights')}"
                        " to weight one more")


def check_ensemble(teachers: Sequence[torch.nn.Module], names: Sequence[str]) -> None:
    """An ensemble's teachers (named by `names`) label alike: single-task teachers of one task with one
    label set (in any order), whatever their tokenizers and architectures."""
    from distill.models.multitask import MultiTaskTeacher
    first = teachers[0]
    for teacher, name in zip(teachers, names, strict=True):
        if isinstance(teacher, MultiTaskTeacher):
            raise DistillError(f"{name}: is a multi-task teacher, and an ensemble takes single-task teachers: give "
                               f"one teacher with {option('--head', 'head=')}, or single-task teachers")
        if teacher.task != first.task:
            raise DistillError(f"teachers {names[0]} and {name} do different tasks, {first.task} and {teacher.task}: "
                               "an ensemble's teachers label the same task")
        if set(teacher.hierarchy.labels) != set(first.hierarchy.labels):
            raise DistillError(f"teachers {names[0]} and {name} have different label sets, {first.hierarchy.labels} "
                               f"and {teacher.hierarchy.labels}: an ensemble averages its teachers' distributions "
                               "over one label set")


def ensemble_logits(results: Sequence[ExampleLogits], labels: Sequence[Sequence[str]], weights: Sequence[float],
                    temperature: float | None) -> ExampleLogits:
    """Several teachers' logits for the same examples as one teacher's, in the first teacher's label order
    (`labels`: each teacher's own order; a one-logit teacher's z as [0, z]): their mixture at `temperature`
    (`losses.mixture_logits`), or for None the weighted mean of their logits (`losses.mean_logits`, what
    ``mse`` regresses). Tagging logits are per word whatever a teacher's tokenizer (`ExampleLogits`), so they
    line up; a word is scored where every teacher scored it."""
    aligned = []
    for result, own in zip(results, labels, strict=True):
        logits = losses.two_class_logits(result.logits) if result.logits.size(-1) == 1 else result.logits
        aligned.append(logits[..., [list(own).index(label) for label in labels[0]]])
    combined = losses.mean_logits(aligned, weights) if temperature is None else \
        losses.mixture_logits(aligned, weights, temperature)
    scored = None if results[0].scored is None else functools.reduce(torch.logical_and, (r.scored for r in results))
    return ExampleLogits(combined, results[0].offsets, scored)


def ensemble_mixtures(results: Sequence[ExampleLogits], labels: Sequence[Sequence[str]], weights: Sequence[float],
                      loss: "TeacherStudentDistill") -> list[ExampleLogits]:
    """What an ensemble teaches through `loss`: the teachers' mixture at its temperature (``mse``: the weighted
    mean of their logits), and at T = 1, which an unlabeled row's hard target and confidence come from."""
    return [ensemble_logits(results, labels, weights, None if loss.kd_loss == "mse" else loss.temperature),
            ensemble_logits(results, labels, weights, 1.0)]




class EnsembleTeacherLogits(CachedTeacherLogits):
    """Several teachers' cached logits taught as one teacher's (`ensemble_logits`): the distillation term
    reads their mixture at the loss's temperature (``mse``: the weighted mean of their logits), and an
    unlabeled row's hard target and confidence come from their mixture at T = 1 (`target_logits`), as
    ``pseudo-label`` labels by the ensemble."""

    def __init__(self, mixture: "ExampleLogits | SpilledLogits", targets: "ExampleLogits | SpilledLogits"):
        super().__init__(mixture)
        self.targets = targets

    def target_logits(self, indices: Sequence[int]) -> torch.Tensor:
        """The logits whose softmax is the ensemble's distribution at T = 1, padded as `logits` pads."""
        return self.targets.batch(indices)[0]
