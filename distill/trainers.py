"""The Python API's ways to train, all through the one loop of `distill.training.fit_tasks`:

* `train_teacher`: fine-tune the transformer teacher on labelled data;
* `train_multitask_teacher`: one encoder with a head per task, each batch from one task;
* `train_student`: a small student on gold labels alone (the baseline distillation must beat);
* `Distiller`: a student against a teacher's logits, with optional unlabeled text.

Data is a file path, a `datasets.Dataset` or examples in memory (see `distill.data.labelled_examples`).
With `output_dir` a run writes there exactly as ``nlp-train`` does (never over an input or another
model, locked, resumable, removed if it fails); without, nothing is written and the best epoch's
weights come back in memory. The CLI's commands are thin wrappers around these functions.
"""

from __future__ import annotations

import contextlib
import copy
import os
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from distill import distributed
from distill.callbacks import Callback, CallbackList
from distill.data import HUB_PREFIX, DataOptions, Examples, check_held_out, labelled_examples, memory_source
from distill.deprecation import renamed_arguments
from distill.distillation import TeacherStudentDistill
from distill.config import RUN_CONFIG, write_run_config
from distill.errors import DistillError, option, random_embeddings, require_type
from distill.io import check_folder, tensors_sha256, write_json
from distill.labels import LabelHierarchy, build_hierarchy, check_labels_known
from distill.metrics import select_metric
from distill.models import is_onnx_export, load_teacher
from distill.models.kinds import require_kind
from distill.models.base import LabelModel, pick_device
from distill.models.protocol import check_student
from distill.models.registry import student_entry
from distill.models.student_config import StudentConfig
from distill.models.students import student_default
from distill.models.multitask import MultiTaskTeacher, TaskSampling, check_head_names
from distill.models.teacher import Teacher, TeacherConfig, TeacherTraining
from distill.outputs import SUMMARY_FILE, TRACKING_FOLDER, check_written_folder
from distill.provenance import LEARNT_FROM_ROLES, RunState
from distill.runtime import Output, Runtime
from distill.settings import named
from distill.training import (FitSettings, FitTask, Objective, SupervisedObjective, TrainSettings, fit_tasks,
                              make_optimizer, optimizer_steps, runtime, training_run)
from distill.truncation import warn_if_truncated

LOG_FILE = "metrics.jsonl"


@dataclass
class TrainResult:
    """A finished run: the model as of its best dev epoch, and the run's summary (``best`` epoch
    record, ``history`` of every epoch, parameters and what the run was given)."""

    model: LabelModel
    summary: dict = field(default_factory=dict)

    @property
    def best(self) -> dict:
        return self.summary["best"]

    @property
    def history(self) -> list[dict]:
        return self.summary["history"]


def _check_arguments(teacher: bool = False, **arguments: Any) -> None:
    """The settings objects of an entry point, each of its class (a `teacher`'s settings: TeacherTraining):
    `output="runs/x"` fails here, named, not deep inside on a missing attribute."""
    expected = {"output": (Output, 'Output("runs/x")'), "env": (Runtime, "Runtime(threads=2)"),
                "data": (DataOptions, 'DataOptions(text_column="review")'),
                "settings": (TeacherTraining, "TeacherTraining(epochs=3)") if teacher
                else (TrainSettings, "TrainSettings(epochs=5)"),
                "config": (TeacherConfig, 'TeacherConfig(task="tagging")'),
                "sampling": (TaskSampling, 'TaskSampling("uniform")'),
                "loss": (TeacherStudentDistill, 'TeacherStudentDistill("kl", temperature=2)')}
    for name, value in arguments.items():
        require_type(name, value, *expected[name])


@contextlib.contextmanager
def _run(output: Output, inputs: dict[str, Examples | str | None], encoder: str | None = None,
         models: Sequence[Any] = (), callbacks: Sequence[Callback] = (), **settings) -> Iterator[RunState | None]:
    """The run's output (`training_run`); a local `encoder` folder it reads is an input too: the model
    is never written into it, nor moved aside with it by --overwrite, and a resume after its files
    changed (another tokenizer, other weights) is refused. Data `inputs` are the examples read: their
    source goes into the signature (`_input_of`), and a digest of what the model learns from into the
    summary (`learnt_from`). Of the `models` given (in memory, or as a directory or a config), the output
    never replaces the directory one in memory was loaded from; nor does a folder or store the `callbacks` write
    (their logs: `check_written_folder`)."""
    if isinstance(encoder, str) and os.path.isdir(encoder):
        inputs = {**inputs, "encoder": encoder}
    protected = [model.loaded_from for model in models if getattr(model, "loaded_from", None)]
    sources = [*(_input_of(value) if isinstance(value, Examples) else value for value in inputs.values()), *protected]
    for callback in CallbackList(callbacks).callbacks:
        for folder in callback.folders():
            check_folder(folder)  # a folder, or a path where one can be made: not under a file ('Not a directory')
            check_written_folder(folder, sources, output.directory, within=TRACKING_FOLDER)
        for store, shown_as in callback.stores().items():  # a file, or a store's own folder: the store judges it
            check_written_folder(store, sources, output.directory, within=TRACKING_FOLDER, shown_as=shown_as)
    if output.directory is None:
        if output.resume:
            raise DistillError("resume needs an output directory to resume from")
        yield None
        return
    learnt = {role: memory_source(value.inputs) for role, value in inputs.items()
              if isinstance(value, Examples) and role.split(":")[0] in LEARNT_FROM_ROLES}
    inputs = {role: _input_of(value) if isinstance(value, Examples) else value for role, value in inputs.items()}
    with training_run(output.directory, output.resume, output.overwrite, inputs, protected, **settings) as run:
        run.learnt = learnt
        run.sources = {role: str(value) for role, value in inputs.items() if value is not None}
        if output.config is not None and distributed.is_main():  # before any epoch: an interrupted run has it too
            write_run_config(run.directory / RUN_CONFIG, output.config, settings["command"])
        yield run


def _input_of(examples: Examples) -> str:
    """What a run's signature records of a split: its file (fingerprinted by content), the digest of data
    given in memory, or a hub dataset's spec with a digest of the rows it held, since a hub dataset can
    change under the same name (a new revision, an edited local dataset folder)."""
    if examples.source.startswith(HUB_PREFIX):
        return f"{examples.source} {memory_source(examples.inputs, examples.labels or [])}"
    return examples.source


def _refuse_ignored_weights(model: LabelModel, weights: Any) -> None:
    """Class weights given for a model whose loss would ignore them: a silent no-op otherwise."""
    if weights is not None and not model.takes_class_weights:
        raise DistillError("class weights do not apply to this model's loss (a CRF scores whole tag sequences): "
                           f"drop {option('--class-weights, or --crf', 'class_weights, or crf=True')}")


def _teacher_source(teacher: LabelModel | str | Path | None) -> str | None:
    """A teacher as a run's signature records it: its directory, or a digest of one in memory."""
    if teacher is None or isinstance(teacher, (str, Path)):
        return None if teacher is None else str(teacher)
    return f"memory:{teacher.fingerprint()}"


def _fit(model: LabelModel, objective: Objective, optimizer, scheduler, train: Examples, dev: Examples,
         settings: FitSettings, run: RunState | None, save: Callable[[Path], None], summary: dict,
         callbacks: Sequence[Callback] = ()) -> TrainResult:
    """`fit` of a single-task model (see `_fit_tasks`)."""
    task = FitTask(model, objective, train.inputs, train.labels, dev.inputs, dev.labels, settings.select_metric)
    return _fit_tasks(model, {"": task}, optimizer, scheduler, settings, run, save, summary, callbacks)


def _fit_tasks(model: LabelModel, tasks: dict[str, FitTask], optimizer, scheduler, settings: FitSettings,
               run: RunState | None, save: Callable[[Path], None], summary: dict,
               callbacks: Sequence[Callback] = ()) -> TrainResult:
    """`fit_tasks` with the best epoch saved to the run's directory (if there is one) and kept in memory: the
    returned model is the best epoch's, not the last one's."""
    best_state: dict = {}

    def save_best(record: dict) -> None:
        if run is not None:
            save(run.directory)
        best_state.update(copy.deepcopy(model.state_dict()))

    log = None
    if run is not None:
        log = run.directory / LOG_FILE
        if distributed.is_main() and run.saved is None:  # rank 0 alone: another rank's unlink could follow its
            log.unlink(missing_ok=True)  # rewrite; a resume rewrites it from its state once that is loaded
    result = fit_tasks(model, tasks, optimizer, scheduler, settings, save_best, log, run, callbacks)
    if best_state:
        model.load_state_dict(best_state)
    # resumed, and no epoch since beat the best one: its weights are the folder's, read once the run is finished
    best_on_disk = not best_state and run is not None and run.saved is not None and result["best"] is not None
    model.eval()
    summary = {**summary, "parameters": model.parameter_count(),
               "train_examples": sum(len(task.train_examples) for task in tasks.values()), **result}
    if run is not None:
        summary["inputs"] = run.signature["inputs"]  # what it learnt from, by content: `learnt_from`
        summary["sources"] = run.sources  # and by name (the README model card names them)
        summary["example_digests"] = run.learnt
        if distributed.is_main():
            run.finish(lambda: _finish_files(model, run.directory, summary))
        # rank 0 alone writes the model and measures it; every rank's result says its size
        summary["size_bytes"] = distributed.broadcast_object(summary.get("size_bytes"))
        if best_on_disk:
            model.load_state_dict(type(model).from_pretrained(run.directory).state_dict())
    return TrainResult(model, summary)


def _finish_files(model: LabelModel, directory: Path, summary: dict) -> None:
    """A finished run's last files: the README model card again, now with the run's data and scores (and
    its checksum in the card), then the summary, whose size counts it."""
    from distill.models.card import rewrite_readme
    from distill.models.readme import about_run
    rewrite_readme(directory, {**model.card_about(), **about_run(summary)})
    summary["size_bytes"] = model_size_bytes(directory)
    write_json(directory / SUMMARY_FILE, summary)


def _labelled(train: Any, dev: Any, task: str, data: DataOptions,
              head: str | None = None) -> tuple[LabelHierarchy, Examples, Examples]:
    """The training and dev data, checked; given in memory, each is named by its role (``train``, ``dev``),
    and a multi-task teacher's by its head's too (``head ner's dev``)."""
    owner = "" if head is None else f"head {head}'s "
    train_set = labelled_examples(train, task, data, f"{owner}train")
    dev_set = labelled_examples(dev, task, data, f"{owner}dev")
    check_held_out(train_set, dev_set)
    hierarchy = build_hierarchy(task, train_set.labels, data.separator, train_set.where)
    check_labels_known(dev_set.where, hierarchy, task, dev_set.labels)
    return hierarchy, train_set, dev_set


def _selecting(settings: Any, task: str, hierarchy: LabelHierarchy) -> Any:
    """`settings` (TrainSettings or TeacherTraining) with its select_metric checked against what the
    task and tag scheme score, and the default filled in, so the run's signature and summary name it."""
    return replace(settings, select_metric=select_metric(settings.select_metric, task, hierarchy.scheme))


def student_settings(settings: TrainSettings, student: LabelModel | StudentConfig | str, task: str,
                     hierarchy: LabelHierarchy) -> TrainSettings:
    """The settings a run of `student` trains by: `settings` with the dev metric that selects the best epoch
    (`_selecting`), and the student's own defaults where `settings` leaves the learning rate, the
    epoch cap or the patience None (2e-3, 50 and 4 for the LSTMs and CNNs; a lower rate and shorter runs
    for pretrained transformer layers), so the run records the values."""
    settings = _selecting(settings, task, hierarchy)
    cls = type(student) if isinstance(student, LabelModel) else \
        student_entry(student if isinstance(student, str) else student.model).cls
    return replace(settings, **{name: student_default(cls, name) for name in ("lr", "epochs", "patience")
                                if getattr(settings, name) is None})


def teacher_optimizer(model: Teacher | MultiTaskTeacher, training: TeacherTraining, sizes: Sequence[int]):
    """`make_optimizer` with two learning rates (encoder, head) over the steps of `training` on tasks of
    `sizes` training examples (by default a linear warm-up then decay). The encoder's group is ``shared``: a
    multi-task head's steps scale its rate (`distill.training.shared_rate`)."""
    head = {id(p) for p in model.head_parameters()}
    groups = [
        {"params": [p for p in model.parameters() if id(p) not in head], "lr": training.encoder_lr, "shared": True,
         "name": "encoder"},
        {"params": model.head_parameters(), "lr": training.classifier_lr, "name": "head"},
    ]
    steps = optimizer_steps(sizes, training.batch_size, training.grad_accumulation, training.epochs)
    return make_optimizer(groups, training.weight_decay, training.lr_schedule, training.warmup, steps)


def teacher_fit_settings(training: TeacherTraining, select_metric: str, env: Runtime) -> FitSettings:
    """The loop's settings of a teacher's run."""
    return FitSettings(training.epochs, training.batch_size, training.patience, training.seed, select_metric,
                       training.max_grad_norm, progress=env.progress, grad_accumulation=training.grad_accumulation)


def check_pooling(task: str, pooling: str, what: str) -> None:
    """Refuse a pooling choice for a tagger, which would be stored and never used."""
    if task == "tagging" and pooling != "auto":
        raise DistillError(f"{what} is for classification: a tagger scores each word from its first sub-token, "
                           "and pools nothing")


@renamed_arguments(training="settings")
def train_teacher(train: Any, dev: Any, config: TeacherConfig = TeacherConfig(),
                  settings: TeacherTraining = TeacherTraining(), data: DataOptions = DataOptions(),
                  output: Output = Output(), env: Runtime = Runtime(),
                  callbacks: Sequence[Callback] = ()) -> TrainResult:
    """Fine-tune `config.encoder` + a Linear head on labelled `train`; the best epoch on `dev` wins.
    `callbacks` hear of its steps and epochs (`distill.callbacks`)."""
    _check_arguments(True, config=config, settings=settings, data=data, output=output, env=env)
    training = settings  # a TeacherTraining; `settings` below is the loop's FitSettings
    check_pooling(config.task, config.pooling,
                  named(TeacherConfig, "pooling", f"TeacherConfig(pooling={config.pooling!r})"))
    with runtime(env.precision, env.threads, env.progress):
        hierarchy, train_set, dev_set = _labelled(train, dev, config.task, data)
        config = config.resolved()
        training = _selecting(training.for_task(config.task), config.task, hierarchy)
        inputs = {"train": train_set, "dev": dev_set}
        with _run(output, inputs, config.encoder, callbacks=callbacks, command="teacher", config=config,
                  training=training, data=data) as run:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(training.seed)
                model = Teacher.from_encoder(config, hierarchy, training).to(pick_device(env.device))
            warn_if_truncated(model, train_set.inputs, train_set.where)
            optimizer, scheduler = teacher_optimizer(model, training, [len(train_set)])
            settings = teacher_fit_settings(training, training.select_metric, env)
            objective = SupervisedObjective(hierarchy.class_weights(training.class_weights))
            return _fit(model, objective, optimizer, scheduler, train_set, dev_set, settings, run,
                        lambda d: model.write_model(d, optimizer_state=optimizer.state_dict()),
                        {"kind": "teacher", "labels": hierarchy.labels, "training": asdict(training)}, callbacks)


@dataclass
class TaskData:
    """One task of a multi-task teacher: its head's name, classification or tagging, its labelled
    data, and the head settings that differ from the shared ones (None: the shared setting)."""

    name: str
    task: str
    train: Any
    dev: Any
    pre_classifier: bool | None = None
    pooling: str | None = None
    class_weights: Any = None
    select_metric: str | None = None
    encoder_lr: float | None = None


@renamed_arguments(training="settings")
def train_multitask_teacher(tasks: list[TaskData], config: TeacherConfig = TeacherConfig(),
                            settings: TeacherTraining = TeacherTraining(), sampling: TaskSampling = TaskSampling(),
                            data: DataOptions = DataOptions(), output: Output = Output(),
                            env: Runtime = Runtime(), callbacks: Sequence[Callback] = ()) -> TrainResult:
    """Fine-tune one encoder with a head per task (docs/multitask.md): each batch is one task's, drawn
    as `sampling` says; the best epoch by the heads' dev scores (their mean by default) wins.

    `config` and `settings` hold the shared settings (`config.task` is each task's own), which a
    `TaskData` may override for its head. Each head's batches move the shared encoder at the head's
    own rate: its `encoder_lr`, else `settings.encoder_lr`, else its task's default (docs/multitask.md)."""
    if distributed.launched():
        raise DistillError("a multi-task teacher trains as one process: start it without torchrun")
    _check_arguments(True, config=config, settings=settings, sampling=sampling, data=data, output=output, env=env)
    training = settings  # a TeacherTraining; `settings` below is the loop's FitSettings
    if isinstance(tasks, (str, bytes)) or not all(isinstance(spec, TaskData) for spec in tasks):
        raise DistillError('tasks: give a list of TaskData (TaskData("sentiment", "classification", TRAIN, DEV))')
    check_head_names([spec.name for spec in tasks])
    for spec in tasks:
        check_pooling(spec.task, spec.pooling or "auto", f"head {spec.name}'s pooling")
    sampling.check([spec.name for spec in tasks])
    with runtime(env.precision, env.threads, env.progress):
        heads, train_sets, dev_sets = {}, {}, {}
        for spec in tasks:
            hierarchy, train_sets[spec.name], dev_sets[spec.name] = _labelled(spec.train, spec.dev, spec.task, data,
                                                                                spec.name)
            head_config = replace(config, task=spec.task, pooling=spec.pooling or config.pooling,
                                  pre_classifier=config.pre_classifier if spec.pre_classifier is None
                                  else spec.pre_classifier).resolved()
            head = replace(training, class_weights=training.class_weights if spec.class_weights is None
                           else spec.class_weights, select_metric=spec.select_metric or training.select_metric,
                           encoder_lr=training.for_task(spec.task).encoder_lr if spec.encoder_lr is None
                           else spec.encoder_lr)
            heads[spec.name] = (head_config, hierarchy, _selecting(head, spec.task, hierarchy))
        inputs = {f"{part}:{name}": sets[name] for name in heads
                  for part, sets in (("train", train_sets), ("dev", dev_sets))}
        signature = {name: {"config": asdict(c), "training": asdict(t)} for name, (c, _, t) in heads.items()}
        with _run(output, inputs, config.encoder, callbacks=callbacks, command="teacher", heads=signature,
                  sampling=sampling, data=data) as run:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(training.seed)
                model = MultiTaskTeacher.from_encoder(heads, sampling).to(pick_device(env.device))
            for name in heads:  # what a classification head cuts of its training texts, as train_teacher warns
                warn_if_truncated(model.head(name), train_sets[name].inputs, train_sets[name].where)
            weights = sampling.weights({name: len(train_sets[name]) for name in heads})
            top_rate = max(t.encoder_lr for _, _, t in heads.values())
            by_task = {name: FitTask(model.head(name), SupervisedObjective(hierarchy.class_weights(t.class_weights)),
                                     train_sets[name].inputs, train_sets[name].labels, dev_sets[name].inputs,
                                     dev_sets[name].labels, t.select_metric, weights[name], t.encoder_lr / top_rate)
                       for name, (_, hierarchy, t) in heads.items()}
            optimizer, scheduler = teacher_optimizer(model, replace(training, encoder_lr=top_rate),
                                                     [len(s) for s in train_sets.values()])
            settings = teacher_fit_settings(training, sampling.select, env)
            labels = {name: hierarchy.labels for name, (_, hierarchy, _) in heads.items()}
            return _fit_tasks(model, by_task, optimizer, scheduler, settings, run,
                              lambda d: model.write_model(d, optimizer_state=optimizer.state_dict()),
                              {"kind": MultiTaskTeacher.kind, "heads": labels, "sampling_weights": weights,
                               "training": {name: asdict(t) for name, (_, _, t) in heads.items()},
                               "sampling": asdict(sampling)}, callbacks)


def refuse_teacher_settings(config: StudentConfig, cls: type) -> None:
    """A student started without a teacher reads none of the settings that say how a teacher's weights are read
    (`teacher_settings`, the static student's word vectors): one set away from its default is refused, not dropped."""
    defaults = {spec.name: spec.default for spec in fields(config)}
    unread = [name for name in getattr(cls, "teacher_settings", ()) if getattr(config, name) != defaults[name]]
    if unread:
        names = ", ".join(option("--" + name.replace("_", "-"), f"{name}={getattr(config, name)!r}") for name in unread)
        start = option("kd --teacher DIR without --random-embeddings, or student --embeddings-from-teacher DIR",
                       "Distiller with a teacher, or train_student's teacher_embeddings")
        many = len(unread) > 1
        raise DistillError(f"{names} {'say' if many else 'says'} how a {config.model} student reads its teacher's "
                           f"word vectors, and this one starts without a teacher: drop {'them' if many else 'it'}, "
                           f"or start it from a teacher ({start})")


def new_student(student: LabelModel | StudentConfig | str, hierarchy: LabelHierarchy, examples: list,
                seed: int, teacher: LabelModel | None = None) -> LabelModel:
    """A student ready to train: `student` itself if built already, else built from its config (or
    registered name, with default settings) with vocabularies covering `examples` and, given a
    `teacher`, started from its weights (`build_from_teacher`: word embeddings from its sub-word
    embeddings; a transformer student's layers and head). Seeded, without touching the global RNG."""
    if isinstance(student, LabelModel):
        student.hierarchy.check_same(hierarchy, "student vs training data")
        return student
    config = student_entry(student).cls.config_class(model=student) if isinstance(student, str) else student
    if not isinstance(config, StudentConfig):
        raise DistillError(f"student: give a student model, a StudentConfig or a registered name, "
                           f"not {type(student).__name__}")
    entry = student_entry(config.model)
    if not isinstance(config, entry.cls.config_class):
        raise DistillError(f"student {config.model!r} needs a {entry.cls.config_class.__name__}, "
                           f"got a {type(config).__name__}")
    teacher = _initialising(teacher, config, entry.cls)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if teacher is None:
            refuse_teacher_settings(config, entry.cls)
            return entry.cls.build(config, hierarchy, examples)
        if not callable(getattr(entry.cls, "build_from_teacher", None)):
            raise DistillError(f"student {config.model!r} lacks build_from_teacher(config, hierarchy, examples, "
                               f"teacher) to start from the teacher's weights: use {random_embeddings()}")
        return entry.cls.build_from_teacher(config, hierarchy, examples, teacher)


def _initialising(teacher: LabelModel | None, config: StudentConfig, cls: type) -> LabelModel | None:
    """The model a student of `config` starts from: an ONNX export's embedding table from its graph, a
    transformer's layers from its source model; any other teacher as it is."""
    if not is_onnx_export(teacher):
        return teacher
    from distill.models.transformer_student import FROM_TEACHER
    runs_encoder = getattr(cls, "runs_teacher_encoder", None)  # the static student's 'encoder' word vectors
    layers = getattr(config, "encoder", None) == FROM_TEACHER or (runs_encoder is not None and runs_encoder(config))
    return teacher.initialising_teacher(layers=layers)


def check_student_fits(config: StudentConfig, teacher: LabelModel) -> None:
    """Refuse now what starting a student of `config` from `teacher` would (a transformer student of more
    layers than the teacher's): a student class says so with ``check_teacher(config, teacher)``."""
    cls = student_entry(config.model).cls
    check = getattr(cls, "check_teacher", None)
    if callable(check):
        check(config, _initialising(teacher, config, cls))


def _student_task(student: LabelModel | StudentConfig | str) -> str:
    if isinstance(student, LabelModel):
        return student.task
    return student_entry(student if isinstance(student, str) else student.model).task


def _student_run(model: LabelModel, objective: Objective, train: Examples, dev: Examples, settings: TrainSettings,
                 run: RunState | None, env: Runtime, summary: dict, callbacks: Sequence[Callback] = ()) -> TrainResult:
    """The student half of `train_student` and `Distiller.fit`: AdamW on its schedule, the shared loop, best
    on dev."""
    warn_if_truncated(model, train.inputs, train.where)  # a transformer student cuts long texts too
    model.to(pick_device(env.device))
    check_student(model, output=run is not None)
    check_student_outputs(model, train.inputs)
    steps = optimizer_steps([len(train.inputs)], settings.batch_size, settings.grad_accumulation, settings.epochs)
    optimizer, scheduler = make_optimizer([{"params": [*model.parameters(), *objective.parameters()],
                                            "lr": settings.lr}], settings.weight_decay, settings.lr_schedule,
                                          settings.warmup_ratio, steps)
    fit_settings = FitSettings(settings.epochs, settings.batch_size, settings.patience, settings.seed,
                               settings.select_metric, settings.max_grad_norm, progress=env.progress,
                               grad_accumulation=settings.grad_accumulation)
    name = getattr(getattr(model, "config", None), "model", type(model).__name__)  # a class of the API's: its name
    summary = {"kind": "student", "model": name, "settings": asdict(settings), **summary}
    return _fit(model, objective, optimizer, scheduler, train, dev, fit_settings, run,
                lambda d: model.write_model(d), summary, callbacks)


def check_student_outputs(model: LabelModel, examples: list) -> None:
    """Run a student once on two training examples before it trains, so that a plugin whose output
    cannot be scored against the label set fails now, naming the shape, and not after an epoch."""
    name = getattr(getattr(model, "config", None), "model", type(model).__name__)
    if not any(p.requires_grad for p in model.parameters()):
        raise DistillError(f"student {name!r} has no trainable parameters: nothing would learn")
    sample = examples[:2]
    training = model.training
    model.eval()  # no dropout: the check draws no random numbers, so the run stays as seeded
    try:
        with torch.no_grad():
            inputs, mask = model.prepare_on_device(sample)
            logits = model(**inputs)
    except DistillError:
        raise
    except Exception as error:  # a plugin's own bug: named, with its cause chained for the API user
        raise DistillError(f"student {name!r} fails on its first training examples: "
                           f"{type(error).__name__}: {error}") from error
    finally:
        model.train(training)
    labels = len(model.hierarchy)
    widths = (labels, 1) if model.task == "classification" and labels == 2 else (labels,)
    leading = (len(sample),) if model.task == "classification" else (len(sample), mask.size(1))
    fits = (isinstance(logits, torch.Tensor) and logits.dim() == len(leading) + 1
            and tuple(logits.shape[:-1]) == leading and logits.size(-1) in widths)
    if not fits:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        axes = "examples, labels" if model.task == "classification" else "examples, words, labels"
        needed = ", ".join([*map(str, leading), " or ".join(map(str, widths))])
        raise DistillError(f"student {name!r} returns logits of shape {got} for {len(sample)} examples; "
                           f"{model.task} with {labels} labels needs ({axes}) = ({needed})")
    if not torch.isfinite(logits).all():
        raise DistillError(f"student {name!r} returns nan or infinite logits before any training step")


def model_size_bytes(directory: str | Path) -> int:
    """Bytes on disk of the model a run leaves in `directory`, what a user ships: its card and the files it
    lists (a teacher's `encoder/` too), not the run's log, summary or resume state (deleted at its end); of a
    transformers classifier's folder (no card; `search --as-fast-as` times one), the files it is loaded from."""
    from distill.models.card import MODEL_CARD, read_model_card
    from distill.models.hub_files import is_transformers_source, local_folder, model_files
    if is_transformers_source(directory):
        folder = local_folder(directory)
        return sum((folder / name).stat().st_size for name in model_files(folder) if (folder / name).is_file())
    directory = Path(directory)
    names = [MODEL_CARD, *read_model_card(directory, unfinished=True).get("sha256", {})]
    return sum((directory / name).stat().st_size for name in names)


def train_student(student: LabelModel | StudentConfig | str, train: Any, dev: Any,
                  settings: TrainSettings = TrainSettings(), class_weights: Any = None,
                  teacher_embeddings: LabelModel | str | None = None, data: DataOptions = DataOptions(),
                  output: Output = Output(), env: Runtime = Runtime(),
                  callbacks: Sequence[Callback] = ()) -> TrainResult:
    """Train a student on gold labels alone; `teacher_embeddings` (a teacher or its directory) starts
    its word embeddings from the teacher's (a transformer student: its layers and head). `callbacks` hear
    of its steps and epochs (`distill.callbacks`)."""
    _check_arguments(settings=settings, data=data, output=output, env=env)
    check_student(student)
    with runtime(env.precision, env.threads, env.progress):
        task = _student_task(student)
        hierarchy, train_set, dev_set = _labelled(train, dev, task, data)
        settings = student_settings(settings, student, task, hierarchy)
        if teacher_embeddings is not None and not isinstance(teacher_embeddings, LabelModel):  # the teacher-kind
            # table, before an output is set up: a folder of a kind it takes (an ensemble's list, soft labels refused)
            require_kind(str(teacher_embeddings) if isinstance(teacher_embeddings, Path) else teacher_embeddings,
                         "embeddings-from-teacher")
        teacher_source = _teacher_source(teacher_embeddings)
        inputs = {"train": train_set, "dev": dev_set, "embeddings_from_teacher": teacher_source}
        with _run(output, inputs, getattr(student, "encoder", None), (student, teacher_embeddings), callbacks,
                  command="student", config=_config_of(student), settings=settings, data=data,
                  class_weights=class_weights) as run:
            teacher = load_teacher(teacher_embeddings) if isinstance(teacher_embeddings, (str, Path)) \
                else teacher_embeddings
            model = new_student(student, hierarchy, train_set.inputs, settings.seed, teacher)
            weights = model.hierarchy.class_weights(class_weights)
            _refuse_ignored_weights(model, weights)
            objective = SupervisedObjective(weights)
            return _student_run(model, objective, train_set, dev_set, settings, run, env,
                                {"embeddings_from_teacher": teacher_source}, callbacks)


def _config_of(student: LabelModel | StudentConfig | str) -> dict:
    """The student as a run's signature sees it: its config, or a digest of a built model's weights."""
    if isinstance(student, LabelModel):
        config = getattr(student, "config", None)
        cls = type(student)
        described = asdict(config) if is_dataclass(config) else f"{cls.__module__}:{cls.__qualname__}"
        return {"config": described, "weights": tensors_sha256(student.state_dict())}
    if isinstance(student, str):
        return {"model": student}
    return asdict(student)
