"""The search space: which students, with which of their config fields, and which loss, training and distillation
settings are searched, each checked against the class it sets (`SearchSpace`, `parse_space`, `load_space`);
`DEFAULT_SPACES` holds one per task."""

from __future__ import annotations

import inspect
import itertools
import json
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

from distill.errors import DistillError, import_extra, option


SEARCH_EXTRA = "pip install 'distill[search]'"
TRIALS_FOLDER = "trials"
BEST_FOLDER = "best"
BEST_EXPORT_FOLDER = "best-onnx"
TRIALS_JSON, TRIALS_TABLE, TRIALS_PLOT = "trials.json", "trials.md", "trials.png"
STUDY_DB = "study.db"
STUDY_RECORD = "study.json"  # in TRIALS_FOLDER: the study whose trials the folder holds
LOCK_FILE = ".search.lock"
# what a search writes in its folder: a file or folder given for something else (its cache) is none of these
SEARCH_NAMES = (TRIALS_FOLDER, BEST_FOLDER, BEST_EXPORT_FOLDER, TRIALS_JSON, TRIALS_TABLE, TRIALS_PLOT, STUDY_DB,
                LOCK_FILE)
HEARTBEAT_SECONDS = 30  # a running trial's sign of life in the storage
GRACE_SECONDS = 120  # a trial silent this long is taken as killed: failed and queued again
WAIT_SECONDS = 5  # how often a process with no trial to start looks again while others finish theirs
TIMING_EXAMPLES = 512  # dev examples a latency measurement reads (length-sorted batches), twice
GROUPS = ("students", "loss", "training", "distiller")
DISTILLER_FIELDS = ("augment", "unlabeled_ratio", "teacher_embeddings")
RANGE_KEYS = ("low", "high", "log", "step")

# A space per task: each student with the fields that size it, the loss, and the learning rate. A field's value is
# a list (one of them), {low, high[, log][, step]} (a whole number when both ends are whole), or one value.
DEFAULT_SPACES: dict[str, dict] = {
    "classification": {
        "students": {
            "lstm": {"hidden_dim": {"low": 32, "high": 256, "log": True}, "embedding_dim": [50, 100, 200],
                     "layers": [1, 2]},
            "cnn": {"filters": {"low": 32, "high": 200, "log": True}, "embedding_dim": [50, 100, 200]},
            # the fast end: a mean of word vectors taken from the fine-tuned teacher, and a small head
            "static": {"embedding_dim": [64, 128, 256], "head_hidden": [0, 128, 256]},
        },
        "loss": {"kd_loss": ["kl", "mse"], "temperature": {"low": 1.0, "high": 8.0},
                 "student_weight": [0.0, 0.25, 0.5], "distill_weight": [0.5, 1.0]},
        "training": {"lr": {"low": 5.0e-4, "high": 5.0e-3, "log": True}},
    },
    "tagging": {
        "students": {
            "lstm-tagger": {"hidden_dim": {"low": 32, "high": 256, "log": True}, "embedding_dim": [50, 100, 200]},
            "idcnn-tagger": {"filters": {"low": 32, "high": 200, "log": True}, "embedding_dim": [50, 100, 200]},
        },
        "loss": {"kd_loss": ["kl", "mse"], "temperature": {"low": 1.0, "high": 8.0},
                 "student_weight": [0.0, 0.25, 0.5], "distill_weight": [0.5, 1.0]},
        "training": {"lr": {"low": 5.0e-4, "high": 5.0e-3, "log": True}},
    },
}

# the study (and its storage's SQLAlchemy, which optuna requires), its plot, the trials' ONNX timing
SEARCH_PACKAGES = ("optuna", "sqlalchemy", "matplotlib", "onnx", "onnxruntime")


def require_search_packages() -> None:
    """Every package of the search extra, imported before a search starts: a missing plotting or ONNX package
    found only when the trials are done (or the first is timed) wasted their training."""
    for module in SEARCH_PACKAGES:
        import_extra(module, "the student search", SEARCH_EXTRA)


def optuna_module():
    """optuna, or a one-line error naming the extra that installs it."""
    optuna = import_extra("optuna", "the student search", SEARCH_EXTRA)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the search reports its trials itself
    return optuna


# -- the space ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One searched setting: one of `choices`, a number in [`low`, `high`] (whole when both are; `log` scale,
    `step`), or a fixed `value`."""

    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    value: Any = None

    def candidates(self) -> list:
        """Values that bound what the setting can take: each choice, both ends, or the value."""
        return list(self.choices) if self.choices is not None else \
            [self.low, self.high] if self.low is not None else [self.value]

    def contains(self, value: Any) -> bool:
        """Whether the setting can take `value` (a default student's, to be enqueued as the study's own)."""
        if self.choices is not None:
            return any(value == choice and isinstance(value, bool) == isinstance(choice, bool)
                       for choice in self.choices)
        if self.low is None:
            return value == self.value
        if not _number(value) or not self.low <= value <= self.high or \
                (_whole(self.low) and _whole(self.high) and not _whole(value)):
            return False
        steps = None if self.step is None else (value - self.low) / self.step
        return steps is None or math.isclose(steps, round(steps), abs_tol=1e-9)

    def encode(self, value: Any) -> Any:
        """`value` as the study stores it: a list or mapping choice as its JSON text."""
        return json.dumps(value) if self.choices is not None and isinstance(value, (list, dict)) else value

    def sample(self, trial, key: str) -> Any:
        if self.choices is not None:  # optuna stores plain values: a list (filter widths) as its JSON text
            encoded = [json.dumps(c) if isinstance(c, (list, dict)) else c for c in self.choices]
            return self.choices[encoded.index(trial.suggest_categorical(key, encoded))]
        if self.low is None:
            return self.value
        if _whole(self.low) and _whole(self.high):
            return trial.suggest_int(key, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(key, self.low, self.high, step=self.step, log=self.log)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _param(value: Any, where: str) -> Param:
    if isinstance(value, list):
        if not value:
            raise DistillError(f"{where}: an empty list of choices; give at least one value")
        return Param(choices=tuple(value))
    if not isinstance(value, dict):
        return Param(value=value)
    unknown = sorted(set(value) - set(RANGE_KEYS))
    if unknown or "low" not in value or "high" not in value:
        extra = f"; {', '.join(unknown)} is no part of one" if unknown else ""
        raise DistillError(f"{where}: a range is {{low: N, high: N}} with optional log: true or step: N{extra}")
    low, high, log, step = value["low"], value["high"], value.get("log", False), value.get("step")
    if not (_number(low) and _number(high)) or not low < high:
        raise DistillError(f"{where}: bad range {low!r} to {high!r}: low and high are numbers, low below high")
    if not isinstance(log, bool):
        raise DistillError(f"{where}: log is true or false, got {log!r}")
    if log and (low <= 0 or step is not None):
        raise DistillError(f"{where}: a log range needs low above 0 and no step")
    if step is not None and (not _number(step) or step <= 0):
        raise DistillError(f"{where}: step must be a number above 0, got {step!r}")
    if step is not None and _whole(low) and _whole(high) and not _whole(step):
        raise DistillError(f"{where}: a range of whole numbers takes a whole step, got {step!r}")
    if step is not None and not math.isclose((high - low) / step, round((high - low) / step), abs_tol=1e-9):
        # Optuna would search up to the last step below high, with only a warning (all of it low, for a step
        # beyond the range)
        raise DistillError(f"{where}: step {step!r} does not divide the range {low!r} to {high!r} into whole steps")
    return Param(low=low, high=high, log=log, step=step)


@dataclass
class TrialSettings:
    """What one trial trains: a student config, and the loss's, training's and Distiller's settings."""

    student: str
    config: dict
    loss: dict
    training: dict
    distiller: dict

    def record(self) -> dict:
        return {"student": self.student, "config": self.config, "loss": self.loss, "training": self.training,
                "distiller": self.distiller}


@dataclass
class SearchSpace:
    """Parsed and checked search space: per student its fields' `Param`s, and those of the loss, training and
    Distiller; `given`: the space as written (recorded with the study), `source`: where it came from."""

    students: dict[str, dict[str, Param]]
    loss: dict[str, Param] = field(default_factory=dict)
    training: dict[str, Param] = field(default_factory=dict)
    distiller: dict[str, Param] = field(default_factory=dict)
    given: dict = field(default_factory=dict)
    source: str = "the search space"

    def params(self, student: str) -> Iterator[tuple[str, str, str, Param]]:
        """Each setting of a trial of `student`: its group (config, loss, training, distiller), field, name in
        the study (``STUDENT.FIELD``, ``loss.FIELD`` ...) and `Param`, the loss's kd_loss first."""
        for name, p in self.students[student].items():
            yield "config", name, f"{student}.{name}", p
        for name, p in sorted(self.loss.items(), key=lambda item: item[0] != "kd_loss"):
            yield "loss", name, f"loss.{name}", p
        for group in ("training", "distiller"):
            for name, p in getattr(self, group).items():
                yield group, name, f"{group}.{name}", p

    def sample(self, trial) -> TrialSettings:
        """A trial's settings, asked of the study: the student first, then its fields in `params`' order. A
        default student's trial (user attribute ``default``) takes `defaults`: those the space holds were
        enqueued as its parameters, and the others (a default outside a searched range) are used as they are."""
        student = trial.suggest_categorical("student", list(self.students))
        default = self.defaults(student) if trial.user_attrs.get("default") == student else None
        chosen: dict[str, dict] = {"config": {}, "loss": {}, "training": {}, "distiller": {}}
        for group, name, key, p in self.params(student):
            if name == "temperature" and chosen["loss"].get("kd_loss") == "mse":
                continue  # mse compares raw logits: TeacherStudentDistill refuses a temperature with it
            outside = default is not None and not p.contains(default[group][name])
            chosen[group][name] = default[group][name] if outside else p.sample(trial, key)
        from distill.distillation import inert_settings
        for name in inert_settings(chosen["loss"]):  # one the trial's other draws leave nothing to act on
            del chosen["loss"][name]
        return TrialSettings(student, **chosen)

    def defaults(self, student: str) -> dict[str, dict]:
        """What `nlp-train kd --model STUDENT` trains, for each field the space names (a field the space fixes
        keeps its value, as every trial does: an epoch cap holds for the defaults too): the student config's
        defaults, the loss's, the student's training defaults (`student_default`) and the Distiller's."""
        from distill.distillation import TeacherStudentDistill
        from distill.models.registry import student_entry
        from distill.models.students import student_default
        from distill.distiller import DistillSettings
        from distill.training import TrainSettings
        entry = student_entry(student)
        sources = {"config": entry.cls.config_class(model=student), "loss": TeacherStudentDistill(),
                   "training": TrainSettings(), "distiller": DistillSettings()}
        values: dict[str, dict] = {"config": {}, "loss": {}, "training": {}, "distiller": {}}
        for group, name, _, p in self.params(student):
            if p.choices is None and p.low is None:
                values[group][name] = p.value
            else:
                values[group][name] = getattr(sources[group], name)
                if group == "training" and values[group][name] is None and name in ("lr", "epochs", "patience"):
                    values[group][name] = student_default(entry.cls, name)  # what the run records
        return values

    def check_metric(self, task: str, scheme: str | None) -> None:
        """The training's select_metric where the space fixes one: scored for the teacher's task and tags (each
        trial would fail on it once the study holds the space, which is then not corrected in place)."""
        from distill.metrics import select_metric
        given = self.training.get("select_metric")
        if given is not None and given.candidates()[0] is not None:
            try:
                select_metric(given.candidates()[0], task, scheme)
            except DistillError as err:
                raise DistillError(f"{self.source}: training.select_metric: {err}") from None

    def check_students_fit(self, teacher) -> None:
        """Each student's bounding settings (every choice, both ends of a range) against the teacher its trials
        start from (`distill.trainers.check_student_fits`: a transformer student's layers against the
        teacher's): a trial failing on it would leave the study with a space that cannot be corrected in place."""
        from distill.models.registry import student_config, student_entry
        from distill.trainers import check_student_fits
        for name, params in self.students.items():
            if not callable(getattr(student_entry(name).cls, "check_teacher", None)):
                continue
            for values in itertools.product(*(param.candidates() for param in params.values())):
                try:
                    check_student_fits(student_config(name, **dict(zip(params, values))), teacher)
                except DistillError as err:
                    raise DistillError(f"{self.source}: students.{name}: {err}") from None

    def check_unlabeled(self, unlabeled: Any) -> None:
        """Without unlabeled text (`unlabeled` None), a space whose trials may draw `unlabeled_ratio`, or a
        `min_confidence` above 0 without augmented text, is refused before the study is made: each such trial
        failed (naming kd's option, which the search does not take) once the study held the space."""
        if unlabeled is not None:
            return
        ratio = self.distiller.get("unlabeled_ratio")
        confidence, augment = self.loss.get("min_confidence"), self.distiller.get("augment")
        if ratio is not None and any(value is not None for value in ratio.candidates()):
            name = "distiller.unlabeled_ratio"
        elif confidence is not None and any(value and value > 0 for value in confidence.candidates()) and \
                (augment is None or any(not value for value in augment.candidates())):
            name = "loss.min_confidence"
        else:
            return
        raise DistillError(f"{self.source}: {name} applies to unlabeled text, and none was given: give "
                           f"{option('--unlabeled', 'unlabeled=')}, or drop {name} from the space")

    def starts_from_teacher(self) -> bool:
        """Whether a trial may start its student's word embeddings from the teacher's (the Distiller's
        `teacher_embeddings`, on unless the space fixes it off)."""
        given = self.distiller.get("teacher_embeddings")
        return given is None or True in given.candidates()

    def default_params(self, student: str) -> dict:
        """`defaults` as the study's parameters, for `study.enqueue_trial`: the searched fields whose default
        the space holds."""
        default = self.defaults(student)
        params: dict = {"student": student}
        for group, name, key, p in self.params(student):
            if name == "temperature" and default["loss"].get("kd_loss") == "mse":
                continue
            if (p.choices is not None or p.low is not None) and p.contains(default[group][name]):
                params[key] = p.encode(default[group][name])
        return params


def _check_values(param: Param, where: str, build) -> None:
    """Every bounding value of `param` through `build` (the class the setting belongs to), whose own checks say
    what is wrong (a width of 0, an unknown loss) before any trial runs."""
    for value in param.candidates():
        try:
            build(value)
        except DistillError as err:
            raise DistillError(f"{where}: {value!r}: {err}") from None
        except TypeError as err:
            raise DistillError(f"{where}: {value!r}: {err}") from None


def _group_fields(group: str) -> list[str]:
    from distill.distillation import TeacherStudentDistill
    from distill.training import TrainSettings
    if group == "loss":
        return [name for name in inspect.signature(TeacherStudentDistill.__init__).parameters
                if name not in ("self", "class_weights")]
    if group == "training":
        return [spec.name for spec in fields(TrainSettings)]
    return list(DISTILLER_FIELDS)


def _builder(group: str, name: str):
    from distill.distillation import TeacherStudentDistill
    from distill.training import TrainSettings
    if group == "loss":  # the layer map judged where a layer term uses it (`_check_loss_together` judges both)
        return lambda value: TeacherStudentDistill(**{name: value, **({"hidden_weight": 1.0}
                                                                       if name == "teacher_layers" else {})})
    if group == "training":
        return lambda value: TrainSettings(**{name: value})
    from distill.distiller import DistillSettings
    return lambda value: DistillSettings(**{name: value})


def parse_space(given: dict, task: str | None = None, source: str = "the search space") -> SearchSpace:
    """A space from its data (as `DEFAULT_SPACES` holds them, or a YAML/JSON file reads), every name and bound
    checked: a student must be registered (for `task`), a field must be one of its config's, the loss's
    (`TeacherStudentDistill`), training's (`TrainSettings`) or Distiller's, and each value one its class takes."""
    from distill.models.registry import student_entry
    if not isinstance(given, dict):
        raise DistillError(f"{source}: a search space is a mapping of {', '.join(GROUPS)}")
    unknown = sorted(set(given) - set(GROUPS))
    if unknown:
        raise DistillError(f"{source}: unknown section {unknown[0]!r}; a search space has {', '.join(GROUPS)}")
    students = given.get("students")
    if not isinstance(students, dict) or not students:
        raise DistillError(f"{source}: students: name at least one student, each with its searched fields "
                           "(students: {lstm: {hidden_dim: [64, 128]}})")
    parsed: dict[str, dict[str, Param]] = {}
    for name, settings in students.items():
        try:
            entry = student_entry(str(name))
        except DistillError as err:
            raise DistillError(f"{source}: students: {err}") from None
        if task is not None and entry.task != task:
            raise DistillError(f"{source}: student {name!r} does {entry.task}, and the teacher {task}")
        settings = settings or {}
        if not isinstance(settings, dict):
            raise DistillError(f"{source}: students.{name}: give its fields as a mapping (hidden_dim: [64, 128])")
        own = [spec.name for spec in fields(entry.cls.config_class) if spec.name != "model"]
        parsed[name] = {}
        for key, value in settings.items():
            where = f"{source}: students.{name}.{key}"
            if key not in own:
                raise DistillError(f"{source}: student {name!r} has no field {key!r} (its fields: {', '.join(own)})")
            parsed[name][key] = param = _param(value, where)
            config_class = entry.cls.config_class
            _check_values(param, where, lambda v, key=key: config_class(model=name, **{key: v}))
    groups: dict[str, dict[str, Param]] = {}
    for group in GROUPS[1:]:
        section = given.get(group) or {}
        if not isinstance(section, dict):
            raise DistillError(f"{source}: {group}: give its fields as a mapping (lr: {{low: 1e-4, high: 1e-2}})")
        known = _group_fields(group)
        groups[group] = {}
        for key, value in section.items():
            if group == "training" and key == "seed":  # each trial's is --seed, a reseeded run's the next ones
                raise DistillError(f"{source}: training.seed: the search seeds every trial itself "
                                   f"({option('--seed', 'seed=')}, and the reseeded runs the seeds after it): a "
                                   "searched seed would choose luck")
            if key not in known:
                raise DistillError(f"{source}: {group} has no field {key!r} (its fields: {', '.join(known)})")
            where = f"{source}: {group}.{key}"
            groups[group][key] = param = _param(value, where)
            if group == "training" and key == "select_metric" and len(set(param.candidates())) > 1:
                raise DistillError(f"{where}: the trials are compared on their dev scores, each of its own select "
                                   "metric: give one metric, not a choice of them")
            _check_values(param, where, _builder(group, key))
    _check_loss_together(groups["loss"], source)
    return SearchSpace(parsed, groups["loss"], groups["training"], groups["distiller"], given, source)


def _check_loss_together(loss: dict[str, Param], source: str) -> None:
    """The loss's settings judged together, at the bounds of each (both weights 0 is no loss): a trial drawing a
    combination its class refuses would fail the search after the trials before it, and leave the study with a
    space that cannot be corrected in place."""
    from distill.distillation import TeacherStudentDistill, inert_settings
    kd_losses = loss["kd_loss"].candidates() if "kd_loss" in loss else []
    if "temperature" in loss and kd_losses and all(value == "mse" for value in kd_losses):
        # a trial drawing mse leaves the temperature out (`SearchSpace.sample`): here every trial would
        raise DistillError(f"{source}: loss.temperature: every trial's kd_loss is mse, which compares raw logits and "
                           "takes no temperature: remove it, or search kl too (kd_loss: [kl, mse])")
    names = list(loss)
    drawn = [dict(zip(names, values)) for values in itertools.product(*(loss[name].candidates() for name in names))]
    never_used = set.intersection(*(set(inert_settings(settings)) for settings in drawn))  # refused below
    for settings in drawn:
        if settings.get("kd_loss") == "mse":
            settings.pop("temperature", None)  # as a trial samples it (`SearchSpace.sample`)
        for name in set(inert_settings(settings)) - never_used:  # as a trial leaves it out (`SearchSpace.sample`)
            del settings[name]
        try:
            TeacherStudentDistill(**settings)
        except DistillError as err:
            said = ", ".join(f"{name} {value!r}" for name, value in settings.items())
            raise DistillError(f"{source}: loss: a trial may draw {said}: {err}") from None


def load_space(space: str | Path | dict | None, task: str) -> SearchSpace:
    """The search space: `task`'s default (None), a mapping, or a YAML or JSON file (``.json`` read as JSON)."""
    if space is None:
        return parse_space(DEFAULT_SPACES[task], task, f"the default {task} space")
    if isinstance(space, dict):
        return parse_space(space, task)
    if not isinstance(space, (str, os.PathLike)):  # a list or a number read as a path was a TypeError
        raise DistillError(f"space must be a YAML or JSON file's path, a mapping, or None (the {task} default), got "
                           f"{type(space).__name__} {space!r:.40}")
    from distill.config import read_settings_file
    given = read_settings_file(space, "search space")  # a key given twice refused: YAML keeps the last in silence
    return parse_space(given, task, str(space))
