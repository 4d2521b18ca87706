"""`Distiller`: a student trained against a teacher's logits (one teacher, an ensemble, an export, a transformers
classifier, or a file of soft labels), on labelled data and optional unlabeled text.

It composes: the teacher(s), the student, the loss (`distill.distillation.TeacherStudentDistill`), the training
settings (`TrainSettings`), the distillation settings (`DistillSettings`: how the teacher is asked and what the
transfer set holds), the runtime and the output; the run itself is `distill.trainers`' one fit, as for every run.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from distill import distributed
from distill.augment import check_methods, synthetic_examples
from distill.cache import CACHE_DIR_OPTION
from distill.callbacks import Callback
from distill.data import DataOptions, Examples, check_held_out, labelled_examples, unlabeled_examples
from distill.deprecation import RenamedKeys, renamed_arguments
from distill.distillation import (CachedTeacherLogits, DistillObjective, LayerObjective, OnlineTeacherLogits,
                                  TeacherStudentDistill, check_layer_models, refuse_unweighted_class_weights)
from distill.ensemble import (TEACHER_WEIGHTS_OPTION, EnsembleTeacherLogits, check_distinct_teachers, check_ensemble,
                              ensemble_logits, ensemble_mixtures, ensemble_weights, parse_teacher_weights)
from distill.errors import DistillError, option, require_flag, require_number, require_whole
from distill.inference import ExampleLogits, decode_labels, model_crf, predict_logits
from distill.io import write_json
from distill.labels import CLASS_WEIGHTS_OPTION, LabelHierarchy, check_labels_known
from distill.metrics import class_f1, classes_beaten, task_metrics
from distill.models import is_onnx_export, load_teacher, model_card
from distill.models.base import LabelModel
from distill.models.kinds import refuse_unasked, require_kind
from distill.models.multitask import single_teacher
from distill.models.protocol import check_student
from distill.models.student_config import StudentConfig
from distill.outputs import SUMMARY_FILE
from distill.settings import setting
from distill.soft_labels import SoftLabels
from distill.spill import Concatenated
from distill.trainers import (Output, Runtime, TrainResult, _check_arguments, _config_of, _labelled, _run,
                              _refuse_ignored_weights, _student_run, _student_task, _teacher_source, new_student,
                              student_settings)
from distill.provenance import RunState, teacher_role
from distill.training import TrainSettings, runtime
from distill.truncation import warn_if_truncated

# The DistillSettings fields in the order the Distiller took them as positional arguments before it took the group.
_LEGACY_ORDER = ("class_weights", "teacher_embeddings", "unlabeled_ratio", "online_teacher", "cache_dir",
                 "teacher_batch_size", "env", "head", "augment", "augment_methods", "teacher_weights")


@dataclass
class DistillSettings:
    """How a kd run uses its teacher and what its transfer set holds (the loss's own knobs are
    `TeacherStudentDistill`'s). `class_weights` weight the student's NLL; `teacher_embeddings` start a built
    student's word embeddings from the teacher's; at most `unlabeled_ratio` unlabeled examples per labelled one
    (None: all); `online_teacher` scores every batch instead of caching logits in `cache_dir` (None: the default
    cache), `teacher_batch_size` examples a teacher pass; `head` names a multi-task teacher's head; `augment`
    synthetic examples per labelled one made by `augment_methods`; `teacher_weights` weigh an ensemble's teachers."""

    class_weights: Any = setting(None, **CLASS_WEIGHTS_OPTION)
    teacher_embeddings: bool = setting(True, option="--embeddings-from-teacher", off="--random-embeddings",
                                       help="Start word embeddings from the teacher's sub-word embeddings (PCA-"
                                            "reduced); measured +3 points dev accuracy for the RT BiLSTM.")
    unlabeled_ratio: float | None = setting(None, low=0, low_open=True, help="Use at most this many unlabeled "
                                            "examples per labelled one (seeded sample).")
    online_teacher: bool = setting(False, help="Run the teacher every step instead of the logit cache.")
    cache_dir: str | Path | None = setting(None, **CACHE_DIR_OPTION)
    teacher_batch_size: int = 64
    head: str | None = setting(None, help="The head of a multi-task teacher to distil (required for one; see "
                                          "docs/multitask.md).")
    augment: int = setting(0, low=0, help="Synthetic examples per labelled one, made from it by --augment-methods and "
                           "labelled by the teacher like unlabeled text, kept on disk in $TMPDIR while kd runs (0: off; "
                           "docs/augmentation.md).")
    augment_methods: Sequence[str] | None = setting(
        None, metavar="NAME,NAME,...", help="Augmenters applied in turn to make each synthetic example: mask, replace, "
        "ngram, neighbour for classification; mention, token-replace, mask, neighbour for tagging; or one registered "
        "with distill.augment.register_augmenter [default: mask,replace,ngram; tagging: mention,token-replace].")
    teacher_weights: Sequence[float] | None = setting(None, **TEACHER_WEIGHTS_OPTION)

    def __post_init__(self) -> None:
        require_flag("teacher_embeddings", self.teacher_embeddings)
        require_flag("online_teacher", self.online_teacher)
        require_whole("teacher_batch_size", self.teacher_batch_size)
        require_number("unlabeled_ratio", self.unlabeled_ratio, 0, float("inf"), low_open=True, optional=True)
        require_whole("augment", self.augment, low=0)
        if isinstance(self.class_weights, str):  # as a run config or the command line writes them
            from distill.labels import parse_class_weights
            self.class_weights = parse_class_weights(self.class_weights)
        if isinstance(self.augment_methods, str):  # as a run config or the command line writes them
            self.augment_methods = [name.strip() for name in self.augment_methods.split(",")]
        self.teacher_weights = parse_teacher_weights(self.teacher_weights)
        if self.augment_methods is not None and not self.augment:
            raise DistillError(f"{option('--augment-methods', 'augment_methods')} choose how synthetic examples are "
                               f"made, and {option('--augment', 'augment')} is 0: give "
                               f"{option('--augment N', 'augment=N')}")
        if self.cache_dir is not None and self.online_teacher:
            raise DistillError("an online teacher scores every batch and keeps no logit cache: give the online "
                               "teacher or a cache folder, not both")


def _distill_settings(distill: DistillSettings | None, env: Runtime, legacy: tuple, legacy_names: dict
                      ) -> tuple[DistillSettings, Runtime]:
    """The Distiller's `DistillSettings` and runtime, from the group or, with a warning, from the separate arguments
    it took before (positional in their old order, or by name)."""
    names = {field.name for field in dataclasses.fields(DistillSettings)}
    if len(legacy) > len(_LEGACY_ORDER):
        raise DistillError(f"Distiller takes at most {4 + len(_LEGACY_ORDER)} positional arguments")
    given = dict(zip(_LEGACY_ORDER, legacy))
    for name, value in legacy_names.items():
        if name not in names or name in given:
            raise DistillError(f"Distiller got an unexpected or repeated argument {name!r}")
        given[name] = value
    if "env" in given:
        env = given.pop("env")
    if not given:
        return distill if distill is not None else DistillSettings(), env
    if distill is not None:
        raise DistillError(f"Distiller: give {', '.join(given)} in distill=DistillSettings(...), not beside it")
    warnings.warn(f"Distiller: {', '.join(f'{name}=' for name in given)} given to the Distiller is deprecated, use "
                  f"distill=DistillSettings({', '.join(f'{name}=...' for name in given)}) (the old way goes in the "
                  "next release)", DeprecationWarning, stacklevel=3)
    return DistillSettings(**given), env


def _distill_field(name: str) -> property:
    """`DistillSettings` field `name` read on the Distiller, where it was an attribute before the Distiller took
    the group: read-only, the group (`Distiller.distill`) is what a run uses."""
    return property(lambda self: getattr(self.distill, name), doc=f"``distill.{name}``, read-only.")


def teacher_dev_scores(teachers: Sequence[LabelModel], dev: Examples, weights: Sequence[float] | None = None,
                       batch_size: int = 64, progress: bool = False, cached: bool = True,
                       cache_dir: str | Path | None = None) -> dict:
    """The teacher's scores on the dev set, those the student's epochs get, and each class's F1 (``class_f1``):
    what kd reports beside the student's; of an ensemble of `teachers` (`weights`: one per teacher), those of
    its mixture at T = 1, decoded as the first teacher decodes. From the logits for the dev examples, read from
    and added to each teacher's logit cache in `cache_dir` (None: the default one), unless not `cached` (a run
    that keeps none)."""
    from distill.cache import LogitStore, teacher_logits
    results = [teacher_logits(teacher, dev.inputs, LogitStore(teacher, cache_dir) if cached else None, batch_size,
                              progress)[0] for teacher in teachers]
    if len(teachers) > 1:
        results = [ensemble_logits(results, [teacher.hierarchy.labels for teacher in teachers], weights, 1.0)]
    teacher = teachers[0]
    predicted = decode_labels(teacher, results[0])
    return {**task_metrics(teacher.task, teacher.hierarchy, dev.labels, predicted),
            "class_f1": class_f1(teacher.task, teacher.hierarchy.tag_scheme, dev.labels, predicted)}


def soft_dev_scores(soft, dev: Examples) -> dict | None:
    """`teacher_dev_scores` of soft labels (`distill.soft_labels.SoftLabels`): their best labels' scores on the dev
    set where the file gives every dev text a distribution, else None (no teacher's scores to report)."""
    results = soft.teacher_dev_logits(dev.inputs)
    if results is None:
        return None
    labels = soft.hierarchy.labels
    predicted = [labels[index] for index in results.logits.argmax(-1).tolist()]
    return {**task_metrics("classification", soft.hierarchy, dev.labels, predicted),
            "class_f1": class_f1("classification", None, dev.labels, predicted)}


class Distiller:
    """Distil `teacher` into `student` (a built model, a config, or a registered name such as ``"lstm"``), with
    the `loss`, the training `settings`, how the teacher is used and the transfer set built (`distill`, a
    `DistillSettings`, whose fields are named below) and the runtime `env`. (Those fields given to the Distiller
    itself, as before, still work, with a `DeprecationWarning`.)
    The teacher is a `Teacher`, a trained student (the next stage of a teacher-assistant chain), or
    either's directory.

    `loss` composes the student's NLL and the distillation term (`TeacherStudentDistill`); teacher
    logits are computed once over the transfer set (labelled + unlabeled) and cached on disk by
    content (`distill.cache`: an example that `pseudo-label` or an earlier run scored with this
    teacher is not scored again), or recomputed every batch with `online_teacher`. A student built
    here gets a vocabulary covering the whole transfer set and, with `teacher_embeddings`, word
    embeddings started from the teacher's (a transformer student with ``encoder="teacher"``: the
    teacher's embeddings, some of its layers and its head). At most `unlabeled_ratio` unlabeled
    examples per labelled one are used (a seeded sample; None: all). `class_weights` (``"inverse"`` or
    one number per label) weight the student's NLL. A loss with a layer term (``hidden_weight``,
    ``attention_weight``, ``cosine_weight``) runs the teacher on every batch, whatever `online_teacher`
    says. A multi-task teacher is distilled one head at a time: `head` names it (its logits are cached
    per head). `augment` synthetic examples per labelled one, made from it by `augment_methods` (None: the
    task's defaults; `distill.augment`), join the transfer set as unlabeled text does; they and the logits of the
    whole transfer set are then kept on disk, not in memory (`distill.spill`).

    `teacher` may be a list of teachers, an ensemble: the student learns the weighted mean of their
    distributions (`teacher_weights`, one positive number per teacher, normalised to sum 1; None: equal),
    each teacher's logits cached on its own (`EnsembleTeacherLogits`). They must share the label set (the
    student takes the first's order, and its embeddings with `teacher_embeddings`) and may differ in tokenizer
    and architecture.

    `teacher` may also be `distill.soft_labels.SoftLabels`: a file of the teacher's distributions (an LLM's or an
    annotation tool's soft labels), whose log-probabilities stand for the teacher's logits; no teacher model
    runs, the student's embeddings start random, and `fit` takes `train=None` to learn from the file alone.
    """

    # attributes of the Distiller before it took `DistillSettings`: read-only views of `distill` now
    class_weights = _distill_field("class_weights")
    teacher_embeddings = _distill_field("teacher_embeddings")
    unlabeled_ratio = _distill_field("unlabeled_ratio")
    online_teacher = _distill_field("online_teacher")
    cache_dir = _distill_field("cache_dir")
    teacher_batch_size = _distill_field("teacher_batch_size")
    head = _distill_field("head")
    augment = _distill_field("augment")

    def __init__(self, teacher: LabelModel | str | Path | Sequence[LabelModel | str | Path] | SoftLabels,
                 student: LabelModel | StudentConfig | str, loss: TeacherStudentDistill | None = None,
                 settings: TrainSettings = TrainSettings(), *legacy: Any, distill: DistillSettings | None = None,
                 env: Runtime = Runtime(), **legacy_names: Any):
        distill, env = _distill_settings(distill, env, legacy, legacy_names)
        self.distill = copy.copy(distill)  # what the run uses, whatever becomes of the caller's settings later
        teachers = list(teacher) if isinstance(teacher, (list, tuple)) else [teacher]
        if not teachers:
            raise DistillError("teacher: give a model or its directory, or a list of them, not an empty list")
        self.soft_labels = teacher if isinstance(teacher, SoftLabels) else None
        for one in teachers:
            if isinstance(one, SoftLabels) and self.soft_labels is None:
                raise DistillError("teacher: soft labels stand for the teacher, alone: give SoftLabels(FILE) as the "
                                   "teacher, not in a list")
            if not isinstance(one, (str, Path, LabelModel, SoftLabels)):
                raise DistillError(f"teacher: give a model (a Teacher or a student) or its directory, or a list of "
                                   f"them (an ensemble), not {type(one).__name__}")
        check_student(student)
        _check_arguments(settings=settings, env=env, **({"loss": loss} if loss is not None else {}))
        self.teacher_sources = [str(one) if isinstance(one, (str, Path)) else one.path if one is self.soft_labels
                                else None for one in teachers]
        self.teacher_source = self.teacher_sources[0]
        self.given = (*teachers, student) if self.soft_labels is None else (student,)  # models in memory: the
        # output must not replace their directories
        self._check_ensemble(teachers, loss)
        # normalised to sum 1; beside soft labels, refused as what they cannot take (`_check_soft_labels`)
        self.teacher_weights = ensemble_weights(distill.teacher_weights, len(teachers)) if self.soft_labels is None \
            else distill.teacher_weights
        self.teachers = [one if source else self._single(one, "teacher")
                         for one, source in zip(teachers, self.teacher_sources)]
        self.teacher = self.teachers[0]
        self.student, self.loss, self.settings = student, loss or TeacherStudentDistill(), settings
        if distill.class_weights is not None and self.loss.class_weights is not None:
            raise DistillError("class weights given twice: to the Distiller and to its loss")
        refuse_unweighted_class_weights(self.loss.student_weight, distill.class_weights)
        self.env = env
        # the task's default methods where none are given
        self.augment_methods = check_methods(distill.augment_methods, _student_task(student)) if distill.augment \
            else None
        self._check_soft_labels()
        if distill.cache_dir is not None:
            from distill.cache import check_cache_dir
            check_cache_dir(distill.cache_dir)

    def _check_soft_labels(self) -> None:
        """What soft labels cannot do: they are distributions for the texts of a file, not a model that runs (on
        every batch, on synthetic text, on the layers), keeps a cache, or has heads, weights or tags."""
        if self.soft_labels is None:
            return
        distill = self.distill
        refused = [option("--online-teacher", "online_teacher=True") if distill.online_teacher else None,
                   option("--hidden-weight, --attention-weight or --cosine-weight", "a layer term (hidden_weight, "
                          "attention_weight, cosine_weight)") if self.loss.uses_layers else None,
                   option("--head", "head") if distill.head is not None else None,
                   option("--cache-dir", "cache_dir") if distill.cache_dir is not None else None,
                   option("--teacher-weights", "teacher_weights") if distill.teacher_weights is not None else None,
                   option("--augment", "augment") if distill.augment else None]
        if any(refused):
            raise DistillError(f"soft labels give the teacher's distributions for the texts of "
                               f"{self.soft_labels.path}, and no teacher model runs: drop {next(filter(None, refused))}")
        if _student_task(self.student) != "classification":
            raise DistillError(f"soft labels give one distribution per text: a tagging student cannot learn from "
                               f"{self.soft_labels.path}")

    def _check_ensemble(self, teachers: list, loss: TeacherStudentDistill | None) -> None:
        """What an ensemble of teachers cannot do: it teaches through each teacher's cached logits alone."""
        if len(teachers) == 1:
            return
        check_distinct_teachers(teachers, [source or f"{number + 1} (in memory)"
                                           for number, source in enumerate(self.teacher_sources)])
        refused = [option("--online-teacher", "online_teacher=True") if self.distill.online_teacher else None,
                   option("--hidden-weight, --attention-weight or --cosine-weight", "a layer term (hidden_weight, "
                          "attention_weight, cosine_weight)") if loss is not None and loss.uses_layers else None,
                   option("--head", "head") if self.distill.head is not None else None]
        if any(refused):
            raise DistillError(f"an ensemble of teachers teaches through each teacher's cached logits only, with "
                               f"single-task teachers: drop {next(filter(None, refused))}, or give one teacher")

    def _single(self, model: LabelModel, where: str) -> LabelModel:
        """The teacher `model` as the student learns from it: a multi-task teacher's head `head`; an
        ensemble's teachers as they are (`check_ensemble` takes single-task ones only)."""
        return model if len(self.teacher_sources) > 1 else single_teacher(model, self.distill.head, where)

    def _teacher_name(self, number: int) -> str:
        """Teacher `number` (from 0) as messages name it: its directory, or which one in memory."""
        return self.teacher_sources[number] or ("(in memory)" if len(self.teachers) == 1
                                                 else f"{number + 1} (in memory)")

    def options(self) -> dict:
        """The distillation settings as a run's signature and summary record them."""
        distill = self.distill
        return {**self.loss.settings(), "class_weights": distill.class_weights,
                "unlabeled_ratio": distill.unlabeled_ratio, "online_teacher": distill.online_teacher,
                "embeddings_from_teacher": distill.teacher_embeddings,
                **({"head": distill.head} if distill.head is not None else {}),
                **({"augment": distill.augment, "augment_methods": list(self.augment_methods)} if distill.augment
                   else {}),
                **({"teacher_weights": self.teacher_weights} if self.teacher_weights else {})}

    @renamed_arguments(unlabelled="unlabeled")
    def fit(self, train: Any, dev: Any, unlabeled: Any = None, data: DataOptions = DataOptions(),
            output: Output = Output(), callbacks: Sequence[Callback] = ()) -> TrainResult:
        """Train the student on `train` (+ `unlabeled`, pseudo-labelled by the teacher's argmax; soft labels: the
        file's other texts, and `train` may be None); the best epoch on `dev` wins. Returns the trained student and
        the run's summary. `callbacks` hear of
        its steps and epochs (`distill.callbacks`), as those of every call that trains."""
        _check_arguments(data=data, output=output)
        if self.soft_labels is None:
            self._refuse_unlabeled_settings_without_text(unlabeled)
        env = self.env
        with runtime(env.precision, env.threads, env.progress):
            task = _student_task(self.student)
            if self.soft_labels is not None:
                hierarchy, train_set, dev_set, extra = self._soft_labelled(train, dev, unlabeled, data)
                self._refuse_unlabeled_settings_without_text(extra)
            else:
                hierarchy, train_set, dev_set = _labelled(train, dev, task, data)
                extra = unlabeled_examples(unlabeled, task, data, "unlabeled") if unlabeled is not None else None
            settings = student_settings(self.settings, self.student, task, hierarchy)
            if extra is not None:  # the dev set taught as transfer text would pick the epoch that fits it best
                check_held_out(extra, dev_set, "the unlabeled data" if self.soft_labels is None
                               else f"the soft-labelled texts of {self.soft_labels.path}")
            for source in self.teacher_sources if self.soft_labels is None else ():  # the teacher-kind table,
                if source:  # before an output is set up
                    require_kind(source, "kd")
            refuse_unasked(self.teacher_sources if self.soft_labels is None else [])
            self._refuse_for_an_export()
            teachers = {teacher_role(number): source or _teacher_source(model)
                        for number, (model, source) in enumerate(zip(self.teachers, self.teacher_sources))}
            inputs = {**teachers, "train": train_set if train is not None else None, "dev": dev_set, "unlabeled": extra}
            online, cache_dir = self.distill.online_teacher, self.distill.cache_dir
            if not online and self.soft_labels is None and output.directory is not None:  # the default cache too
                from distill.cache import check_cache_dir
                check_cache_dir(cache_dir, output.directory)
            with _run(output, inputs, getattr(self.student, "encoder", None), self.given, callbacks, command="kd",
                      config=_config_of(self.student), settings=settings, data=data, kd=self.options()) as run:
                result = self._fit(task, hierarchy, train_set, dev_set, extra, settings, run, callbacks)
                self._compare_with_teacher(result, dev_set, run)
        result.summary = RenamedKeys(result.summary, {"unlabelled_examples": "unlabeled_examples"})
        return result

    def _soft_labelled(self, train: Any, dev: Any, unlabeled: Any, data: DataOptions
                       ) -> tuple[LabelHierarchy, Examples, Examples, Examples | None]:
        """The label set, training and dev data of a run that learns from soft labels, and the file's texts that
        are not training texts: the transfer set's unlabeled part. The file is read against the training data's
        labels, or without training data its own (or those `SoftLabels` names)."""
        soft = self.soft_labels
        if unlabeled is not None:
            raise DistillError(f"the texts of {soft.path} are the unlabeled text that soft labels teach on: drop "
                               f"{option('--unlabeled', 'unlabeled')}, or add its texts with their soft labels to "
                               "the file")
        if train is None and self.loss.teacher_mistakes != "keep":  # every text unlabeled: no gold label to judge by
            name = option("--teacher-mistakes", "TeacherStudentDistill(teacher_mistakes=...)")
            raise DistillError(f"{name} judges the teacher where a labelled example's gold label is not its top class, "
                               f"and without training data every text of {soft.path} is unlabeled: drop {name}, or "
                               f"give {option('--train', 'train')}")
        if train is not None:
            hierarchy, train_set, dev_set = _labelled(train, dev, "classification", data)
            soft.read(hierarchy.labels, data.text_column)
        else:
            soft.read(None, data.text_column)
            best = [soft.hierarchy.labels[max(range(len(row)), key=row.__getitem__)]
                    for row in soft.records.probabilities]  # what `inverse` class weights count
            hierarchy = LabelHierarchy(soft.hierarchy.labels, None, {label: best.count(label) for label in set(best)})
            dev_set = labelled_examples(dev, "classification", data, "dev")
            soft.require_labels(dev_set.where, dev_set.labels)
            check_labels_known(dev_set.where, hierarchy, "classification", dev_set.labels)
            train_set = Examples([], [], "none", "train")
        texts = soft.other_texts(train_set.inputs)
        return hierarchy, train_set, dev_set, Examples(texts, None, soft.path, "soft labels") if texts else None

    def _refuse_unlabeled_settings_without_text(self, unlabeled: Any) -> None:
        """`unlabeled_ratio` samples the unlabeled text and `min_confidence` filters its pseudo-labels: without
        unlabeled text (given, or with soft labels the file's texts that are not training texts) either would be
        accepted and change nothing."""
        if unlabeled is not None:
            return
        named = [option("--unlabeled-ratio", "unlabeled_ratio") if self.distill.unlabeled_ratio is not None else None,
                 option("--min-confidence", "TeacherStudentDistill(min_confidence=...)")
                 if self.loss.min_confidence > 0 and not self.distill.augment else None]
        if any(named):
            name = next(filter(None, named))
            if self.soft_labels is not None:
                raise DistillError(f"{name} applies to unlabeled text, and the soft labels of {self.soft_labels.path} "
                                   f"give none (each of its texts is a training text): drop {name}")
            raise DistillError(f"{name} applies to unlabeled text, and none was given: give "
                               f"{option('--unlabeled', 'fit(..., unlabeled=...)')}, or drop {name}")

    def _refuse_for_an_export(self) -> None:
        """An ONNX export teaches through the logit cache: it gives logits, not the PyTorch model that an
        online teacher runs every batch nor the layers' states that a layer term compares."""
        if not self.teacher_source or self.soft_labels is not None:
            return
        try:
            card = model_card(self.teacher_source)
        except DistillError:
            return  # loading it says what is wrong
        if card.get("format") != "onnx" or not (self.distill.online_teacher or self.loss.uses_layers):
            return
        source = card.get("export", {}).get("source")
        what = option("--online-teacher", "online_teacher=True") if self.distill.online_teacher else \
            option("--hidden-weight, --attention-weight or --cosine-weight", "a layer term (hidden_weight, "
                   "attention_weight, cosine_weight)")
        raise DistillError(f"{self.teacher_source}: is an ONNX export, which teaches kd through the logit cache "
                           f"only; {what} needs the PyTorch teacher: drop it, or give the PyTorch teacher ({source})")

    def _fit(self, task: str, hierarchy: LabelHierarchy, train: Examples, dev: Examples, extra: Examples | None,
             settings: TrainSettings, run: RunState | None, callbacks: Sequence[Callback]) -> TrainResult:
        env = self.env
        teachers = [self.soft_labels] if self.soft_labels is not None else \
            [self._single(load_teacher(model, device=env.device), source) if source else model
             for model, source in zip(self.teachers, self.teacher_sources)]
        teacher = teachers[0]
        if len(teachers) > 1:
            check_ensemble(teachers, [self._teacher_name(number) for number in range(len(teachers))])
        if task != teacher.task:
            raise DistillError(f"the student does {task} but teacher {self._teacher_name(0)} does {teacher.task}")
        teacher.hierarchy.check_same(hierarchy, f"teacher vs training data {train.where}")
        as_given, hierarchy = hierarchy, hierarchy.in_order_of(teacher.hierarchy)  # logits line up with the teacher's
        crf = next((number for number, other in enumerate(teachers) if model_crf(other) is not None), None)
        if (extra or self.distill.augment) and crf is not None:
            raise DistillError(f"teacher {self._teacher_name(crf)} is a CRF tagger: its labels are "
                               "Viterbi paths, which kd's per-word pseudo-labels of unlabeled text would not "
                               "reproduce: distil it on labelled data only, or distil a teacher without "
                               f"{option('--crf', 'crf=True')}")
        unlabeled = list(extra.inputs) if extra else []
        ratio = self.distill.unlabeled_ratio
        if extra and ratio is not None:
            keep = int(ratio * len(train))
            if keep == 0:
                raise DistillError(f"unlabeled ratio {ratio} keeps none of the {len(unlabeled)} unlabeled examples "
                                   f"({ratio} per each of {len(train)} labelled ones): raise it, or give no "
                                   "unlabeled text")
            unlabeled = random.Random(settings.seed).sample(unlabeled, min(keep, len(unlabeled)))
        # the vocabulary covers the whole transfer set: words seen only in unlabeled text are not <unk>
        synthetic = synthetic_examples(train, dev, self.distill.augment, self.augment_methods, settings.seed, teachers,
                                       hierarchy.scheme) if self.distill.augment else []
        examples = list(train.inputs) + unlabeled
        if synthetic:  # kept on disk, as their logits will be: memory stays flat as --augment grows
            examples = Concatenated([examples, synthetic])
        made = f"{len(synthetic)} synthetic examples of {train.where}"
        sources = train.where + (f" and {extra.where}" if extra else "") + (f" and {made}" if synthetic else "")
        read_from = [train.where] * len(train.inputs) + [extra.where if extra else ""] * len(unlabeled) + \
            [made] * len(synthetic) if extra or synthetic else train.where  # as messages name them
        # the labels of the training data (the teacher's, in its order: checked above) with their counts there,
        # which `inverse` class weights come from, and its --label-separator
        model = new_student(self.student, hierarchy, examples, settings.seed,  # soft labels have no embeddings
                            teacher if self.distill.teacher_embeddings and self.soft_labels is None else None)
        if model.hierarchy.labels != teacher.hierarchy.labels:  # a student given in memory: its own order
            raise DistillError(f"the student's labels {model.hierarchy.labels} are in another order than the "
                               f"teacher's {teacher.hierarchy.labels}: its logits would be compared with the "
                               "wrong labels; start from a new student")
        unlabeled_count = len(unlabeled) + len(synthetic)
        transfer = Examples(examples, list(train.labels) + [None] * unlabeled_count, sources)  # named, not keyed
        loss = self.loss_for(model, as_given)
        if loss.uses_layers:
            check_layer_models(teacher, model)  # before the teacher scores dev (a served one's requests cost)
        summary = {"teacher": self.teacher_source, "kd": self.options(), "unlabeled_examples": len(unlabeled),
                   **({"teachers": [{"teacher": source, "weight": weight} for source, weight
                                    in zip(self.teacher_sources, self.teacher_weights)]}
                      if self.teacher_weights else {}),
                   **({"synthetic_examples": len(synthetic)} if self.distill.augment else {}),
                   **({"teacher_export": teacher.teacher_record()}
                      if is_onnx_export(teacher) and not self.teacher_weights else {})}  # an ensemble's: per teacher
        summary["teacher_dev"] = soft_dev_scores(self.soft_labels, dev) if self.soft_labels is not None else \
            teacher_dev_scores(teachers, dev, self.teacher_weights, self.distill.teacher_batch_size, env.progress,
                               not (self.distill.online_teacher or loss.uses_layers), self.distill.cache_dir)
        if loss.uses_layers:  # the teacher's states as well as its logits: it runs on every batch
            warn_if_truncated(teacher, examples, read_from)
            with LayerObjective(loss, teacher, model, examples, settings.seed) as objective:
                return _student_run(model, objective, transfer, dev, settings, run, env, summary, callbacks)
        started = time.perf_counter()
        cache_info: dict = {}
        if self.distill.online_teacher:
            warn_if_truncated(teacher, examples, read_from)
            source = OnlineTeacherLogits(teacher, examples)
        elif self.soft_labels is not None:
            source = CachedTeacherLogits(self.soft_labels.logits(examples, transfer.labels, read_from))
            cache_info = {"soft_labelled_examples": sum(map(self.soft_labels.holds, examples))}
        else:
            source, cache_info = self._cached_logits(teachers, examples, read_from, loss, summary)
        teacher_seconds = time.perf_counter() - started
        summary.update(teacher_logits_seconds=round(teacher_seconds, 2), **cache_info)
        return _student_run(model, DistillObjective(loss, source), transfer, dev, settings, run, env, summary,
                            callbacks)

    def _cached_logits(self, teachers: list[LabelModel], examples: Sequence, read_from: str | list[str],
                       loss: TeacherStudentDistill, summary: dict) -> tuple[CachedTeacherLogits, dict]:
        """The teachers' logits of the transfer set `examples` through their logit caches, as the student learns
        from them, and what the summary says of the caches (an ensemble's: in each teacher's record)."""
        from distill.cache import LogitStore, spilled_teacher_logits, teacher_logits
        stores = [LogitStore(model, self.distill.cache_dir) for model in teachers]  # each teacher's own cache
        labels = [model.hierarchy.labels for model in teachers]

        def combine(results: list[ExampleLogits]) -> list:
            """What the student learns from the teachers' logits: one's as they are, an ensemble's mixtures."""
            return results if len(teachers) == 1 else \
                ensemble_mixtures(results, labels, self.teacher_weights, loss)
        if self.distill.augment:  # N times the labelled data: scored a part at a time and kept on disk
            kept, hits = spilled_teacher_logits(teachers, stores, examples, combine, self.distill.teacher_batch_size,
                                                self.env.progress, read_from)
        else:  # each teacher warns of what it cuts among those it reads
            scored = [teacher_logits(model, examples, store, self.distill.teacher_batch_size, self.env.progress,
                                     source=read_from) for model, store in zip(teachers, stores)]
            kept, hits = combine([results for results, _ in scored]), [found for _, found in scored]
        if len(teachers) == 1:
            source = CachedTeacherLogits(*kept)
            cache_info = {"cache_dir": str(stores[0].folder), "cached_examples": hits[0]}
        else:
            source = EnsembleTeacherLogits(*kept)
            for record, store, found, one in zip(summary["teachers"], stores, hits, teachers):
                record.update(cache_dir=str(store.folder), cached_examples=found,
                              **({"teacher_export": one.teacher_record()} if is_onnx_export(one) else {}))
            cache_info = {"cached_examples": sum(hits)}
        return source, cache_info

    def _compare_with_teacher(self, result: TrainResult, dev: Examples, run: RunState | None) -> None:
        """Each class's dev F1 of the student at its best epoch (``dev_class_f1``) and the classes where it is
        above the teacher's (``classes_above_teacher``), added to the summary, train_summary.json's too."""
        teacher, scores = result.summary["teacher_dev"], None
        if distributed.is_main():  # soft labels that lack a dev text: no teacher's scores to compare with  # the best epoch's student: the run returns it as it saved it
            student = result.model
            predicted = decode_labels(student, predict_logits(student, dev.inputs))
            scores = class_f1(student.task, student.hierarchy.tag_scheme, dev.labels, predicted)
        scores = distributed.broadcast_object(scores)
        result.summary.update(dev_class_f1=scores, classes_above_teacher=None if teacher is None
                              else classes_beaten(scores, teacher["class_f1"]))
        if run is not None and distributed.is_main():
            write_json(run.directory / SUMMARY_FILE, result.summary)

    def loss_for(self, model: LabelModel, labels_given: LabelHierarchy | None = None) -> TeacherStudentDistill:
        """The loss a run trains the student `model` with: `loss`, or a copy of it holding the class weights of
        `distill`, made for `labels_given` (the training data's labels and counts, in their order: sorted, the
        outside tag first; None: `model`'s) and put in the student's label order by label, which a teacher saved
        before that order, and so the student, may not follow."""
        loss = self.loss
        if self.distill.class_weights is not None:
            loss = copy.deepcopy(self.loss)  # a shallow copy of a Module shares its buffers
            given = labels_given or model.hierarchy
            weights = given.class_weights(self.distill.class_weights)
            if weights is not None:
                weights = [weights[given.index[label]] for label in model.hierarchy.labels]
            loss.class_weights = None if weights is None else torch.tensor(weights, dtype=torch.float)
        _refuse_ignored_weights(model, loss.class_weights)
        return loss
