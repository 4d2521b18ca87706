"""`search`: which student, of which size, distilled how, scores best on dev within a latency or size budget.

An Optuna study (the ``search`` extra) whose trials are `kd` runs (`Distiller.fit`) from the shared teacher-logit
cache, each into ``OUTPUT/trials/NNNN``. The first trials are each student's defaults (what ``kd --model X``
trains), enqueued, so the search can only add to them. Each epoch's dev score is reported to the trial, and a
pruner that compares a trial only with trials of its own student family (`FamilyPruner`) stops those that fall
behind; defaults are never pruned. A finished trial's latency (a batch of `batch_size` dev examples at `threads`
torch threads) and size are measured on this machine with PyTorch and with ONNX Runtime (an ONNX export of the
trial's model): the faster runtime counts, and is recorded. Once the trials are done, the best few within the
budget (and the best default) are trained again with other seeds (enqueued trials too), and the one with the
best mean dev score is copied to ``OUTPUT/best`` (and exported to ``OUTPUT/best-onnx``): one seed's dev score
varies as much as the differences a search chases. Every trial's settings and scores go to ``trials.json``, a
table (``trials.md``) and a plot of dev score against latency and size with the Pareto front and the default
students (``trials.png``). A time budget counts every trial's seconds in the study (`spent_seconds`).

The search space is data (`SearchSpace`): students with some of their config fields, the loss's settings
(`TeacherStudentDistill`), the training settings (`TrainSettings`) and the Distiller's (`augment`,
`unlabeled_ratio`, `teacher_embeddings`); a field is checked against the class it sets, so a newly registered
student's fields can be searched without an edit here. `DEFAULT_SPACES` holds a space per task.

The study lives in a database (``sqlite:///OUTPUT/study.db`` unless `storage` names another): the same call
resumes an interrupted search (`trials` is the total wanted), and several processes, or machines, pointing at one
storage share the work, one trial per process at a time. A trial interrupted by Ctrl-C or SIGTERM is failed and
queued again with its settings, and its run continues from its last finished epoch; a process killed outright
leaves its trial running until its heartbeat goes stale (`GRACE_SECONDS`), then it is queued again the same way.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import inspect
import json
import math
import os
import shutil
import socket
import tempfile
import time
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

import torch

from distill.data import DataOptions
from distill.errors import DistillError, option
from distill.io import atomic_directory, check_folder, file_sha256, make_folder, write_json, write_text

SEARCH_EXTRA = "pip install 'distill[search]'"
TRIALS_FOLDER = "trials"
BEST_FOLDER = "best"
BEST_EXPORT_FOLDER = "best-onnx"
TRIALS_JSON, TRIALS_TABLE, TRIALS_PLOT = "trials.json", "trials.md", "trials.png"
STUDY_DB = "study.db"
LOCK_FILE = ".search.lock"
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

__all__ = ["DEFAULT_SPACES", "SearchResult", "SearchSpace", "load_space", "search"]


def optuna_module():
    """optuna, or a one-line error naming the extra that installs it."""
    if importlib.util.find_spec("optuna") is None:
        raise DistillError(f"the student search needs the optuna package: {SEARCH_EXTRA}")
    import optuna
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
    if group == "loss":
        return lambda value: TeacherStudentDistill(**{name: value})
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
            if key not in known:
                raise DistillError(f"{source}: {group} has no field {key!r} (its fields: {', '.join(known)})")
            where = f"{source}: {group}.{key}"
            groups[group][key] = param = _param(value, where)
            _check_values(param, where, _builder(group, key))
    return SearchSpace(parsed, groups["loss"], groups["training"], groups["distiller"], given, source)


def load_space(space: str | Path | dict | None, task: str) -> SearchSpace:
    """The search space: `task`'s default (None), a mapping, or a YAML or JSON file (``.json`` read as JSON)."""
    if space is None:
        return parse_space(DEFAULT_SPACES[task], task, f"the default {task} space")
    if isinstance(space, dict):
        return parse_space(space, task)
    path = Path(space)
    if not path.is_file():
        raise DistillError(f"{space}: search space file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            given = json.loads(text)
        else:
            import yaml
            given = yaml.safe_load(text)
    except (ValueError, ImportError) as err:
        raise DistillError(f"{space}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} "
                           f"({' '.join(str(err).split())[:120]})") from None
    except Exception as err:  # yaml's own errors
        raise DistillError(f"{space}: not valid YAML ({' '.join(str(err).split())[:120]})") from None
    return parse_space(given, task, str(space))


# -- one trial ---------------------------------------------------------------------------------------------------

class FamilyPruner:
    """An Optuna pruner that judges a trial only against trials of its own student family (the ``student``
    parameter): `inner` (by default the median of the family's finished trials at the same epoch, once two of
    them have finished, from epoch 2 on) sees the study as if it held that family alone. Epoch N of a static
    student and of a BiLSTM are neither the same cost nor the same point on their learning curves: a static
    student learns slower per epoch and ends higher on some data, and a median over all students cut it at
    epoch 1 (issue 42)."""

    def __init__(self, inner: Any = None):
        self.inner = inner if inner is not None else \
            optuna_module().pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2)

    def prune(self, study, trial) -> bool:
        return self.inner.prune(_FamilyView(study, trial.params.get("student")), trial)


class _FamilyView:
    """`study` as a pruner reads it (its trials, its direction), holding only the trials of `student`."""

    def __init__(self, study, student: str | None):
        self._study, self._student = study, student

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list:
        return [t for t in self._study.get_trials(deepcopy=deepcopy, states=states)
                if t.params.get("student") == self._student]


def _pruning_callback(trial):
    """A Callback reporting each epoch's dev score (the selection metric) to `trial`, and stopping the run when
    the pruner says the trial has fallen behind; a default student's or a reseeded run is never stopped (they
    are what the search is measured against, and the spread of a setting over seeds)."""
    optuna = optuna_module()
    from distill.callbacks import Callback
    protected = "default" in trial.user_attrs or "reseed_of" in trial.user_attrs

    class ReportToTrial(Callback):
        def on_epoch_end(self, epoch) -> None:
            trial.report(epoch.score, epoch.epoch)
            if not protected and trial.should_prune():
                trial.set_user_attr("pruned_at", epoch.epoch)
                raise optuna.TrialPruned(f"pruned at epoch {epoch.epoch}: dev {epoch.select_metric} "
                                         f"{epoch.score:.4f}")

    return ReportToTrial()


def _latency(model, examples: list, batch_size: int) -> float:
    """Milliseconds a batch of `batch_size` takes: the mean over the length-sorted batches of `examples`."""
    from distill.inference import throughput
    return 1000 * batch_size / throughput(model, examples, batch_size, repeats=2)


def measure(model_dir: Path, examples: list, batch_size: int, threads: int, scratch: Path | None = None) -> dict:
    """A trained model's latency and size on this machine at `threads`, in PyTorch and in ONNX Runtime (an ONNX
    export in a temporary folder in `scratch`, by default beside it): the faster runtime counts (``runtime``,
    ``latency_ms``, ``size_mb``: the bytes of the model folder it loads); without the export extra, or for a
    model that cannot be exported, PyTorch alone (``onnx_error`` says why)."""
    from distill.export import export_model
    from distill.models import load_model
    from distill.trainers import model_size_bytes
    from distill.training import runtime
    examples = examples[:TIMING_EXAMPLES]
    record: dict = {"batch_size": batch_size, "threads": threads}
    with runtime(None, threads):
        record["pytorch_ms"] = _latency(load_model(model_dir), examples, batch_size)
        record["pytorch_mb"] = model_size_bytes(model_dir) / 1e6
        with tempfile.TemporaryDirectory(prefix=f".{model_dir.name}-onnx.", dir=scratch or model_dir.parent) as folder:
            exported = Path(folder) / "onnx"
            try:
                export_model(str(model_dir), str(exported), "onnx")
                record["onnx_ms"] = _latency(load_model(exported), examples, batch_size)
                record["onnx_mb"] = model_size_bytes(exported) / 1e6
            except DistillError as err:
                record["onnx_error"] = str(err)
    onnx = record.get("onnx_ms") is not None and record["onnx_ms"] < record["pytorch_ms"]
    record["runtime"] = "onnxruntime" if onnx else "pytorch"
    record["latency_ms"] = record["onnx_ms" if onnx else "pytorch_ms"]
    record["size_mb"] = record["onnx_mb" if onnx else "pytorch_mb"]
    return record


@dataclass
class Budget:
    """Latency (ms a batch) and size (MB) limits; None: no limit."""

    max_latency_ms: float | None = None
    max_mb: float | None = None

    def excess(self, record: dict) -> float:
        """How far over the budget a measured trial is, relatively (0: within; TPE's constraint)."""
        over = [0.0]
        if self.max_latency_ms is not None:
            over.append(record["latency_ms"] / self.max_latency_ms - 1)
        if self.max_mb is not None:
            over.append(record["size_mb"] / self.max_mb - 1)
        return max(over)

    def holds(self, record: dict) -> bool:
        return record.get("latency_ms") is not None and self.excess(record) <= 0

    def text(self) -> str:
        parts = ([f"{self.max_latency_ms:g} ms a batch"] if self.max_latency_ms is not None else []) + \
            ([f"{self.max_mb:g} MB"] if self.max_mb is not None else [])
        return " and ".join(parts) or "none"


@dataclass
class Job:
    """What every trial of one search shares."""

    teacher: str
    train: Any
    dev: Any
    unlabeled: Any
    data: DataOptions
    output: Path
    space: SearchSpace
    budget: Budget
    batch_size: int
    threads: int
    seed: int
    cache_dir: str | Path | None
    device: str
    progress: bool
    reseed_top: int = 0  # the best trials re-trained with `seeds` other seeds, chosen among on the mean
    seeds: int = 0
    time_budget: float | None = None  # trial-seconds for the whole study (`spent_seconds`)
    dev_examples: list = field(default_factory=list)
    reference: dict | None = None  # the model whose latency is the budget (as_fast_as), as measured


def _folder(trial, job: Job) -> Path:
    """A trial's run folder, by its number; a retried trial inherits the interrupted one's (its user attributes
    are copied), and continues that run."""
    return job.output / trial.user_attrs.get("folder", f"{TRIALS_FOLDER}/{trial.number:04d}")


def run_trial(trial, job: Job) -> float:
    """Train (or continue, or find finished) the trial's student, measure it, record it on the trial; returns
    its best dev score."""
    from distill.distillation import TeacherStudentDistill
    from distill.models.card import RESUME_FILE
    from distill.models.registry import student_config
    from distill.outputs import SUMMARY_FILE
    from distill.distiller import Distiller, DistillSettings
    from distill.trainers import Output, Runtime
    from distill.training import TrainSettings
    optuna = optuna_module()
    started = time.perf_counter()
    settings = job.space.sample(trial)
    folder = _folder(trial, job)
    trial.set_user_attr("settings", settings.record())
    trial.set_user_attr("folder", str(folder.relative_to(job.output)))
    trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")  # the machine its latency is of
    if not (folder / SUMMARY_FILE).is_file():  # an interrupted trial's run may have finished before its measuring
        training = {"seed": job.seed, **settings.training}
        if "reseed_of" in trial.user_attrs:
            training["seed"] = trial.user_attrs["seed"]
        distiller = Distiller(job.teacher, student_config(settings.student, **settings.config),
                              TeacherStudentDistill(**settings.loss), TrainSettings(**training),
                              distill=DistillSettings(cache_dir=job.cache_dir, **settings.distiller),
                              env=Runtime(job.device, progress=job.progress))
        resume = (folder / RESUME_FILE).is_file()
        try:
            distiller.fit(job.train, job.dev, job.unlabeled, job.data, Output(folder, resume=resume),
                          callbacks=[_pruning_callback(trial)])
        except optuna.TrialPruned:
            shutil.rmtree(folder, ignore_errors=True)  # its resume state: a pruned trial is not continued
            trial.set_user_attr("seconds", round(time.perf_counter() - started, 1))
            raise
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    metric = summary["settings"]["select_metric"]
    score = float(summary["best"]["dev"][metric])
    # a reseeded run is the same model as its trial's, timed then
    measured = trial.user_attrs["measured"] if "reseed_of" in trial.user_attrs else \
        measure(folder, job.dev_examples, job.batch_size, job.threads)
    trial.set_user_attr("measured", measured)
    trial.set_user_attr("dev", {"metric": metric, "score": score, "best_epoch": summary["best"]["epoch"],
                                "epochs": len(summary["history"]), "parameters": summary["parameters"]})
    trial.set_constraint("budget", job.budget.excess(measured))  # TPE then favours settings within the budget
    trial.set_user_attr("seconds", round(time.perf_counter() - started, 1))
    return score


# -- the study ---------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(output: Path) -> Iterator[None]:
    """The search folder's lock: one process at a time warms the logit cache, opens the study or writes the
    reports, so processes joining one search neither score the teacher twice nor interleave their files."""
    import fcntl
    with open(output / LOCK_FILE, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _storage(url: str):
    optuna = optuna_module()
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from sqlalchemy.exc import SQLAlchemyError  # optuna's storage layer: a database it cannot reach or open
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the retry callback is "experimental"
        try:
            return RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {},
                              heartbeat_interval=HEARTBEAT_SECONDS, grace_period=GRACE_SECONDS,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback())
        except (ImportError, ValueError, optuna.exceptions.StorageInternalError, SQLAlchemyError) as err:
            raise DistillError(f"{url}: cannot open the study's storage ({' '.join(str(err).split())[:160]})") \
                from None


def _retry(study, trial) -> None:
    """Queue an interrupted trial's settings again (its run continues from its last finished epoch)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RetryHeartbeatStaleTrialCallback()(study, frozen)


@contextlib.contextmanager
def _heartbeat(study, trial) -> Iterator[None]:
    """The trial's heartbeat in the storage while it runs, as `Study.optimize` keeps one."""
    from optuna.storages._heartbeat import get_heartbeat_thread  # optimize's own; the ask-and-tell API has none
    with get_heartbeat_thread(trial._trial_id, study._storage):
        yield


def _counts(study) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    return counts


def _identity(teacher: str, train: Any, dev: Any, unlabeled: Any, space: SearchSpace, batch_size: int,
              threads: int) -> dict:
    """What a study's trials depend on, recorded with it: a search resumed or joined with other data, teacher,
    space or latency settings would mix trials that cannot be compared."""
    from distill.training import input_fingerprints
    inputs = {role: str(value) for role, value in (("teacher", teacher), ("train", train), ("dev", dev),
                                                    ("unlabeled", unlabeled)) if isinstance(value, (str, Path))}
    return {"inputs": input_fingerprints(inputs), "space": space.given, "latency_batch_size": batch_size,
            "latency_threads": threads}


def _open_study(job: Job, storage: str | None, study_name: str, identity: dict, pruner):
    optuna = optuna_module()
    url = storage or f"sqlite:///{(job.output / STUDY_DB).resolve()}"
    study = optuna.create_study(storage=_storage(url), study_name=study_name, direction="maximize", pruner=pruner,
                                load_if_exists=True)
    recorded = study.user_attrs.get("search")
    if recorded is None:
        study.set_user_attr("search", identity)
    elif recorded != identity:
        differs = next(key for key in identity if recorded.get(key) != identity[key])
        raise DistillError(f"{url}: study {study_name!r} searched with another {differs.replace('_', ' ')}; "
                           f"resume it with the same one, or give another {option('--output', 'output')} "
                           f"(or {option('--storage', 'storage')})")
    return study, url


def _warm_cache(job: Job, task: str) -> None:
    """The teacher's logits of the training and unlabelled text into the logit cache, once for the study: each
    trial then reads them (scored in the trial only for what the space adds, such as augmented text)."""
    from distill.cache import LogitStore, teacher_logits
    from distill.data import labelled_examples, unlabelled_examples
    from distill.models import load_teacher
    teacher = load_teacher(job.teacher, device=job.device)
    examples = list(labelled_examples(job.train, task, job.data, "train").inputs)
    if job.unlabeled is not None:
        examples += list(unlabelled_examples(job.unlabeled, task, job.data, "unlabeled").inputs)
    teacher_logits(teacher, examples, LogitStore(teacher, job.cache_dir), progress=job.progress)


def spent_seconds(trials: list) -> float:
    """The time-budget's count: the seconds of every trial the study holds (finished, pruned, failed, and the
    running ones so far), over every process and every resume; two processes spend it twice as fast."""
    now = datetime.datetime.now()  # optuna's own clock: naive local time
    return sum(((t.datetime_complete or now) - t.datetime_start).total_seconds()
               for t in trials if t.datetime_start is not None)


def _reseeding(trial) -> bool:
    return "reseed_of" in trial.user_attrs


def _next_trial(study, job: Job, trials: int, records: list[dict]) -> tuple[str, Any]:
    """What this process does next: ("ask", None) after queuing what the study should run next (a default
    student not yet tried, or a reseeded run), ("wait", None) while other processes finish the search trials
    that reseeding needs, or ("stop", why)."""
    held = study.get_trials(deepcopy=False)
    searched = [t for t in held if not _reseeding(t)]
    states = [t.state.name for t in searched]
    finished, running = states.count("COMPLETE") + states.count("PRUNED"), states.count("RUNNING")
    spent = spent_seconds(held)
    if job.time_budget is not None and spent >= job.time_budget:
        return "stop", "time budget"
    if finished + running < trials:
        # the budget's last part is kept for reseeding the best trials so far
        if job.time_budget is None or spent + _reseed_estimate(records, job) < job.time_budget:
            tried = {t.user_attrs["default"] for t in searched if "default" in t.user_attrs}
            student = next((name for name in job.space.students if name not in tried), None)
            if student is not None:  # the defaults first, one at a time: the search can only add to them
                study.enqueue_trial(job.space.default_params(student), user_attrs={"default": student})
            return "ask", None
    if not job.reseed_top or not job.seeds:
        return "stop", "trials"
    if running:
        return "wait", None
    queued = {(t.user_attrs["reseed_of"], t.user_attrs["seed"]) for t in held if _reseeding(t)}
    for record in reseed_candidates(records, job.reseed_top):
        trial = next(t for t in searched if t.number == record["number"])
        for offset in range(1, job.seeds + 1):
            seed = (job.seed + offset) % 2**32
            if (record["number"], seed) not in queued:
                attrs = {"reseed_of": record["number"], "seed": seed, "measured": trial.user_attrs["measured"],
                         **({"default": trial.user_attrs["default"]} if "default" in trial.user_attrs else {})}
                study.enqueue_trial(trial.params, user_attrs=attrs)
                return "ask", None
    return "stop", "trials"


def _reseed_estimate(records: list[dict], job: Job) -> float:
    """Seconds reseeding the current candidates would take: each one's time, `seeds` times."""
    if not job.reseed_top or not job.seeds:
        return 0.0
    return job.seeds * sum(r["seconds"] or 0.0 for r in reseed_candidates(records, job.reseed_top))


def _run_trials(study, job: Job, trials: int, timeout: float | None, started: float) -> str:
    """Ask the study for trials and run them until it holds `trials` finished or running search trials and the
    reseeded runs of the best (`Job.reseed_top`), or `timeout` (this process's seconds), or the time budget is
    spent; returns why it stopped."""
    optuna = optuna_module()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage")  # ours is kept as optimize keeps it
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        while timeout is None or time.monotonic() - started < timeout:
            with _locked(job.output):  # processes sharing the folder count and ask one at a time: none overshoots
                optuna.storages.fail_stale_trials(study)  # a killed process's trial: failed, and queued again
                records = [trial_record(t, job.budget) for t in study.get_trials(deepcopy=False)]
                step, why = _next_trial(study, job, trials, records)
                if step == "stop":
                    return why
                if step == "ask":
                    # seeded by the trials held: a resumed or joining process draws anew, not the first trials'
                    study.sampler = optuna.samplers.TPESampler(seed=(job.seed + len(records)) % 2**32)
                    trial = study.ask()
            if step == "wait":
                time.sleep(WAIT_SECONDS)
                continue
            with _heartbeat(study, trial):
                try:
                    value = run_trial(trial, job)
                except optuna.TrialPruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    continue
                except Exception as err:  # a bug or bad settings: recorded, and the search stops with it
                    trial.set_user_attr("error", f"{type(err).__name__}: {err}"[:500])
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    raise
                except BaseException:  # Ctrl-C, SIGTERM: the trial runs again, from its last epoch, on resume
                    _retry(study, trial)
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    raise
            study.tell(trial, value)
    return "timeout"


# -- the reports -------------------------------------------------------------------------------------------------

def trial_record(trial, budget: Budget) -> dict:
    """A trial as trials.json holds it."""
    attrs = trial.user_attrs
    measured = attrs.get("measured") or {}
    dev = attrs.get("dev") or {}
    record = {"number": trial.number, "state": trial.state.name.lower(),
              "retry_of": (trial.system_attrs.get("retry_history") or [None])[-1],
              "folder": attrs.get("folder"), "settings": attrs.get("settings"),
              "dev_score": dev.get("score"), "metric": dev.get("metric"), "best_epoch": dev.get("best_epoch"),
              "epochs": dev.get("epochs") if dev else (max(trial.intermediate_values) if trial.intermediate_values
                                                       else None),
              "parameters": dev.get("parameters"), "process": attrs.get("process"), **measured,
              "within_budget": budget.holds(measured) if measured else None,
              "seconds": attrs.get("seconds"), "default": attrs.get("default"),
              "reseed_of": attrs.get("reseed_of"), "seed": attrs.get("seed")}
    if "pruned_at" in attrs:
        record["pruned_at"] = attrs["pruned_at"]
    if "error" in attrs:
        record["error"] = attrs["error"]
    return record


def pareto_front(records: list[dict], key: str) -> list[int]:
    """The numbers of the trials no other beats on both dev score and `key` (latency_ms or size_mb)."""
    done = sorted((r for r in records if r["state"] == "complete" and r.get(key) is not None
                   and r["reseed_of"] is None),
                  key=lambda r: (r[key], -r["dev_score"]))
    front, best = [], -math.inf
    for record in done:
        if record["dev_score"] > best:
            front.append(record["number"])
            best = record["dev_score"]
    return front


def _fits(records: list[dict]) -> list[dict]:
    """The completed search trials (not reseeded runs) within the budget, best dev score first (the faster of
    a tie)."""
    return sorted((r for r in records if r["state"] == "complete" and r["within_budget"] and r["reseed_of"] is None),
                  key=lambda r: (-r["dev_score"], r["latency_ms"]))


def reseed_candidates(records: list[dict], top: int) -> list[dict]:
    """The trials re-trained with other seeds and chosen among: the `top` best within the budget, and the best
    default student's trial within it (added when it is not among them, so the choice is never a trial that
    one lucky seed put above the defaults)."""
    fits = _fits(records)
    chosen = fits[:top]
    best_default = next((r for r in fits if r["default"] is not None), None)
    if best_default is not None and best_default not in chosen:
        chosen.append(best_default)
    return chosen


def add_seed_means(records: list[dict]) -> None:
    """Each search trial's ``dev_scores`` (its own run's, then its reseeded runs' finished so far) and their
    ``mean_dev``."""
    for record in records:
        if record["reseed_of"] is None and record["dev_score"] is not None:
            record["dev_scores"] = [record["dev_score"]] + [
                r["dev_score"] for r in records if r["reseed_of"] == record["number"] and r["state"] == "complete"]
            record["mean_dev"] = sum(record["dev_scores"]) / len(record["dev_scores"])


def _best_mean(pool: list[dict]) -> dict | None:
    return max(pool, key=lambda r: (r.get("mean_dev", r["dev_score"]), -r["latency_ms"]), default=None)


def choose_best(records: list[dict], reseed_top: int = 0) -> dict | None:
    """The trial within the budget with the highest mean dev score over its seeds (`add_seed_means`) among
    `reseed_candidates`, or, without reseeding, the highest dev score; the faster of a tie."""
    return _best_mean(reseed_candidates(records, reseed_top) if reseed_top else _fits(records))


def best_default(records: list[dict], reseed_top: int = 0) -> dict | None:
    """The default student's trial that `choose_best` weighs against the others (with reseeding: the one
    reseeded, so both means are over as many seeds): what the search must beat."""
    pool = reseed_candidates(records, reseed_top) if reseed_top else _fits(records)
    return _best_mean([r for r in pool if r["default"] is not None])


def _describe(settings: dict | None) -> str:
    if not settings:
        return ""
    config = ", ".join(f"{k}={v}" for k, v in settings["config"].items())
    others = ", ".join(f"{k}={_short(v)}" for group in ("loss", "training", "distiller")
                       for k, v in settings[group].items())
    return f"{settings['student']}({config}) {others}".strip()


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def table(records: list[dict], best: dict | None, budget: Budget) -> str:
    """The markdown table of every trial."""
    lines = ["| trial | state | settings | dev | mean dev (runs) | epochs | latency ms | runtime | MB | within budget "
             "| s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        mark = (" (best)" if best is not None and r["number"] == best["number"] else "") + \
            (f" (default {r['default']})" if r["default"] is not None and r["reseed_of"] is None else "")
        state = r["state"] + (f" at epoch {r['pruned_at']}" if r.get("pruned_at") else "") + \
            (f", retry of {r['retry_of']}" if r.get("retry_of") is not None else "") + \
            (f", reseed of {r['reseed_of']} (seed {r['seed']})" if r["reseed_of"] is not None else "")
        mean = f"{r['mean_dev']:.4f} ({len(r['dev_scores'])})" if "mean_dev" in r else ""
        cells = [f"{r['number']}{mark}", state, _describe(r["settings"]),
                 "" if r["dev_score"] is None else f"{r['dev_score']:.4f}", mean,
                 "" if r["epochs"] is None else r["epochs"],
                 "" if r.get("latency_ms") is None else f"{r['latency_ms']:.2f}", r.get("runtime", ""),
                 "" if r.get("size_mb") is None else f"{r['size_mb']:.2f}",
                 "" if r["within_budget"] is None else ("yes" if r["within_budget"] else "no"),
                 "" if r["seconds"] is None else f"{r['seconds']:.0f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines.append(f"Budget: {budget.text()}. Dev score: the selection metric at the best epoch; mean dev: over the "
                 "trial's run and its reseeded runs (other seeds), what the choice is made on; latency: a batch of "
                 "the dev set in the faster runtime; (default X): `kd --model X` with its defaults.")
    return "\n".join(lines) + "\n"


def plot(records: list[dict], best: dict | None, budget: Budget, path: Path) -> None:
    """Dev score against latency and against size, each with its Pareto front and the budget's line."""
    if importlib.util.find_spec("matplotlib") is None:
        raise DistillError(f"the search's plot needs matplotlib: {SEARCH_EXTRA}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [r for r in records if r["state"] == "complete" and r.get("latency_ms") is not None
            and r["reseed_of"] is None]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label, limit in ((axes[0], "latency_ms", "latency (ms a batch)", budget.max_latency_ms),
                                  (axes[1], "size_mb", "size (MB)", budget.max_mb)):
        for student in dict.fromkeys(r["settings"]["student"] for r in done):
            mine = [r for r in done if r["settings"]["student"] == student]
            ax.scatter([r[key] for r in mine], [r["dev_score"] for r in mine], label=student, alpha=0.8)
        front = {r["number"]: r for r in done}
        points = [front[n] for n in pareto_front(records, key)]
        ax.step([r[key] for r in points], [r["dev_score"] for r in points], where="post", color="black",
                linewidth=1, label="Pareto front")
        if limit is not None:
            ax.axvline(limit, color="red", linestyle="--", linewidth=1, label="budget")
        defaults = [r for r in done if r["default"] is not None]
        ax.scatter([r[key] for r in defaults], [r["dev_score"] for r in defaults], marker="*", s=150, color="black",
                   label="default students", zorder=3)
        for r in defaults:
            ax.annotate(f"kd --model {r['default']}", (r[key], r["dev_score"]), fontsize=7,
                        textcoords="offset points", xytext=(4, -10))
        if best is not None:
            ax.scatter([best[key]], [best["dev_score"]], s=160, facecolors="none", edgecolors="red", label="chosen")
        ax.set_xlabel(label)
        ax.set_ylabel(f"dev {done[0]['metric']}" if done else "dev score")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    from distill.io import atomic_path
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)
    plt.close(figure)


def _copy_best(trial_folder: Path, best: Path) -> None:
    """The chosen trial's model as a normal model folder, checked (every file against its card) once copied."""
    from distill.models import load_model
    from distill.models.card import RESUME_FILE
    with atomic_directory(best) as tmp:
        for item in trial_folder.iterdir():
            if item.name != RESUME_FILE and not item.name.startswith("."):
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
        load_model(tmp)


def _test_score(model_dir: Path, test: Any, job: Job) -> dict:
    from distill.inference import evaluate
    from distill.metrics import headline
    from distill.models import load_model
    model = load_model(model_dir)
    metrics = evaluate(model, test, data=job.data)
    return {"data": str(test), "score": headline(model.task, metrics), "metrics": metrics}


def _default_summary(record: dict | None, test: Any, job: Job, previous: dict, chosen: dict | None) -> dict | None:
    """The best default student within the budget as the report holds it, scored on `test` too (a fixed
    rule picked it, not the test set: the comparison the search is for), once when it is the chosen one."""
    if record is None:
        return None
    summary = {"trial": record["number"], "student": record["default"], "dev_score": record["dev_score"],
               "mean_dev": record["mean_dev"], "dev_scores": record["dev_scores"],
               "latency_ms": record["latency_ms"], "size_mb": record["size_mb"]}
    if chosen is not None and chosen["trial"] == record["number"] and "test" in chosen:
        summary["test"] = chosen["test"]
    elif test is not None:
        summary["test"] = _test_score(job.output / record["folder"], test, job)
    elif previous.get("trial") == record["number"] and "test" in previous:
        summary["test"] = previous["test"]
    return summary


def write_reports(study, job: Job, test: Any, wall_seconds: float, stopped: str | None = None) -> dict:
    """trials.json, trials.md, trials.png and the best model (copied and exported; scored on `test`, alone
    with the best default student); `stopped`: why this process started no more trials."""
    from distill.export import export_model
    output = job.output
    held = study.get_trials(deepcopy=False)
    records = [trial_record(t, job.budget) for t in held]
    add_seed_means(records)
    best = choose_best(records, job.reseed_top)
    previous: dict = {}
    if (output / TRIALS_JSON).is_file():
        with contextlib.suppress(ValueError, OSError):
            previous = json.loads((output / TRIALS_JSON).read_text(encoding="utf-8"))
    previous_default = previous.get("default") or {}
    previous = previous.get("best") or {}
    chosen: dict | None = None
    if best is not None:
        chosen = {"trial": best["number"], "folder": BEST_FOLDER, "settings": best["settings"],
                  "dev_score": best["dev_score"], "mean_dev": best["mean_dev"], "dev_scores": best["dev_scores"],
                  "latency_ms": best["latency_ms"], "runtime": best["runtime"], "size_mb": best["size_mb"]}
        source = output / best["folder"]
        same = previous.get("trial") == best["number"] and (output / BEST_FOLDER).is_dir() and \
            previous.get("card_sha256") == file_sha256(source / "distill.json")
        if not same:
            _copy_best(source, output / BEST_FOLDER)
            try:
                export_model(str(output / BEST_FOLDER), str(output / BEST_EXPORT_FOLDER), "onnx", overwrite=True)
            except DistillError as err:
                chosen["export_error"] = str(err)
        chosen["card_sha256"] = file_sha256(source / "distill.json")
        chosen["export"] = BEST_EXPORT_FOLDER if (output / BEST_EXPORT_FOLDER).is_dir() else None
        if test is not None:
            chosen["test"] = _test_score(output / BEST_FOLDER, test, job)
        elif same and "test" in previous:
            chosen["test"] = previous["test"]
    counts = _counts(study)
    finished = [r["seconds"] for r in records if r["seconds"] is not None]
    default = _default_summary(best_default(records, job.reseed_top), test, job, previous_default, chosen)
    report = {"search": {"teacher": job.teacher, "train": str(job.train), "dev": str(job.dev),
                         "unlabeled": None if job.unlabeled is None else str(job.unlabeled),
                         "space": job.space.given, "space_source": job.space.source,
                         "budget": {"max_latency_ms": job.budget.max_latency_ms, "max_mb": job.budget.max_mb,
                                    **({"as_fast_as": job.reference} if job.reference else {})},
                         "latency": {"batch_size": job.batch_size, "threads": job.threads,
                                     "examples": len(job.dev_examples[:TIMING_EXAMPLES])},
                         "cpu": _cpu(), "date": datetime.date.today().isoformat()},
              "states": {k.lower(): v for k, v in counts.items()},
              "wall_seconds": round(wall_seconds, 1), "trial_seconds": round(sum(finished), 1),
              "time_budget": {"seconds": job.time_budget, "spent": round(spent_seconds(held), 1)},
              "stopped": stopped,
              "reseeding": {"top": job.reseed_top, "seeds": [(job.seed + i) % 2**32 for i in range(1, job.seeds + 1)],
                            "candidates": [r["number"] for r in reseed_candidates(records, job.reseed_top)]
                            if job.reseed_top and job.seeds else []},
              "best": chosen, "default": default,
              "pareto_latency": pareto_front(records, "latency_ms"),
              "pareto_size": pareto_front(records, "size_mb"), "trials": records}
    write_json(output / TRIALS_JSON, report)
    write_text(output / TRIALS_TABLE, table(records, best, job.budget))
    plot(records, best, job.budget, output / TRIALS_PLOT)
    return report


def _cpu() -> str:
    from distill.export_speed import cpu_model
    return cpu_model()


# -- the entry point ---------------------------------------------------------------------------------------------

@dataclass
class SearchResult:
    """A search's outcome: ``report`` is trials.json's content; `best` the chosen model's folder (None when no
    completed trial fits the budget)."""

    report: dict
    output: Path

    @property
    def best(self) -> Path | None:
        return self.output / BEST_FOLDER if self.report["best"] else None

    @property
    def trials(self) -> list[dict]:
        return self.report["trials"]


def check_search_output(output: Path, inputs: list) -> None:
    """A search's folder (its study, trials and best model) is none of its inputs, holds none, lies in none,
    and is no model's directory: a search started there would write its files among the model's."""
    from distill.outputs import check_directory_output, is_model_folder
    check_folder(output)
    check_directory_output(output, [item for item in inputs if isinstance(item, (str, os.PathLike))])
    if output.is_dir() and is_model_folder(output):
        raise DistillError(f"{output}: is a model directory; a search writes a folder of its own (its study, "
                           "trials and best model): choose another output")


def search(teacher: str | Path, train: Any, dev: Any, output: str | Path, trials: int = 20,
           unlabeled: Any = None, space: str | Path | dict | None = None, max_latency_ms: float | None = None,
           batch_size: int = 32, threads: int | None = None, max_mb: float | None = None, storage: str | None = None,
           study_name: str = "distill-search", timeout: float | None = None, test: Any = None, prune: bool = True,
           pruner: Any = None, seed: int = 42, cache_dir: str | Path | None = None, device: str = "cpu",
           data: DataOptions = DataOptions(), progress: bool = False,
           as_fast_as: str | Path | None = None, reseed_top: int = 3, seeds: int = 2,
           time_budget: float | None = None) -> SearchResult:
    """Search students and distillation settings for the best dev score within a budget (module docstring).

    `trials`: how many trials the study should hold finished (trained to the end, or pruned), counted over
    every process and every resume, the default students' first (one trial each, as `kd --model X` trains them
    within the space's fixed settings); `timeout` seconds: this process starts no trial after that;
    `time_budget` seconds: the study starts no trial once its trials have taken that long in all
    (`spent_seconds`), keeping the time the reseeding needs. `reseed_top`: the best trials within the budget (and
    the best default student's) are trained again with `seeds` other seeds, and the one with the best mean dev
    score is chosen (0: the best single run). The budget: `max_latency_ms`
    for a batch of `batch_size` dev examples at `threads` torch threads (None: this process's), or `as_fast_as`: a
    model directory whose latency, measured here when the search starts or resumes, is `max_latency_ms` (a budget
    that holds on a loaded machine as on an idle one); and/or `max_mb`.
    `space`: a file, a mapping or None (the task's `DEFAULT_SPACES`). `storage`: an Optuna storage URL shared by
    several processes or machines (default: ``sqlite:///OUTPUT/study.db``). `pruner`: an Optuna pruner
    (default: `FamilyPruner`, the median of the same student's other trials at the same epoch); `prune` False:
    none; a default student's or a reseeded run is never pruned. `test`: labelled data the chosen model and the
    best default student alone are scored on. Returns trials.json's content.
    """
    from distill.data import labelled_examples, unlabelled_examples
    from distill.errors import require_flag, require_number, require_whole
    from distill.models import model_card
    from distill.models.kinds import require_kind
    optuna = optuna_module()
    require_whole("trials", trials)
    require_whole("batch_size", batch_size)
    require_whole("threads", threads, optional=True)
    require_whole("seed", seed, 0, 2**32 - 1)
    require_flag("prune", prune)
    require_number("max_latency_ms", max_latency_ms, 0, math.inf, low_open=True, optional=True)
    require_number("max_mb", max_mb, 0, math.inf, low_open=True, optional=True)
    if as_fast_as is not None and max_latency_ms is not None:
        raise DistillError(f"{option('--as-fast-as', 'as_fast_as')} sets the latency budget from a model's own "
                           f"latency: give it or {option('--max-latency-ms', 'max_latency_ms')}, not both")
    require_number("timeout", timeout, 0, math.inf, low_open=True, optional=True)
    require_number("time_budget", time_budget, 0, math.inf, low_open=True, optional=True)
    require_whole("reseed_top", reseed_top, 0)
    require_whole("seeds", seeds, 0)
    task = require_kind(str(teacher), "search").get("task")  # the teacher-kind table: a kind the search takes
    job_space = load_space(space, task)
    if as_fast_as is not None:  # a model directory of the search's task, before anything is written
        timed = model_card(str(as_fast_as)).get("task")
        if timed != task:
            raise DistillError(f"{as_fast_as}: {option('--as-fast-as', 'as_fast_as')} is timed on the search's dev "
                               f"data, and this model does {timed}, the teacher {task}: give a model of the "
                               f"teacher's task")
    output = Path(output)
    check_search_output(output, [teacher, as_fast_as, train, dev, unlabeled, test, space])
    threads = threads or torch.get_num_threads()
    job = Job(str(teacher), train, dev, unlabeled, data, output, job_space, Budget(max_latency_ms, max_mb),
              batch_size, threads, seed, cache_dir, device, progress, reseed_top, seeds, time_budget)
    labelled_examples(train, task, data, "train")  # read now: a bad file must not leave an output behind,
    if test is not None:  # nor stop the search once its trials are done
        labelled_examples(test, task, data, "test")
    if unlabeled is not None:
        unlabelled_examples(unlabeled, task, data, "unlabeled")
    job.dev_examples = list(labelled_examples(dev, task, data, "dev").inputs)
    if storage is not None:
        if storage.startswith("sqlite:///"):  # the study's file is written where the output rule allows
            from distill.outputs import check_written_folder
            inputs = [item for item in (teacher, as_fast_as, train, dev, unlabeled, test, space)
                      if isinstance(item, (str, os.PathLike))]
            check_written_folder(Path(storage[len("sqlite:///"):]), inputs, output)
        _storage(storage)  # a database it cannot open: said before the output folder is made
    make_folder(output / TRIALS_FOLDER)
    if as_fast_as is not None:  # timed now, as the trials will be: the same machine in the same state
        job.reference = {"model": str(as_fast_as), **measure(Path(as_fast_as), job.dev_examples, batch_size, threads,
                                                             scratch=output)}
        job.budget.max_latency_ms = job.reference["latency_ms"]
    if pruner is None:
        pruner = FamilyPruner() if prune else optuna.pruners.NopPruner()
    started = time.monotonic()
    with _locked(output):
        study, _ = _open_study(job, storage, study_name, _identity(str(teacher), train, dev, unlabeled, job_space,
                                                                  batch_size, threads), pruner)
        _warm_cache(job, task)
    stopped = _run_trials(study, job, trials, timeout, started)
    with _locked(output):
        report = write_reports(study, job, test, time.monotonic() - started, stopped)
    return SearchResult(report, output)
