"""The Python API's ways to train, all through the one loop of `distill.training.fit_tasks`:

* `train_teacher`: fine-tune the transformer teacher on labelled data;
* `train_multitask_teacher`: one encoder with a head per task, each batch from one task;
* `train_student`: a small student on gold labels alone (the baseline distillation must beat);
* `Distiller`: a student against a teacher's logits, with optional unlabelled text.

Data is a file path, a `datasets.Dataset` or examples in memory (see `distill.data.labelled_examples`).
With `output_dir` a run writes there exactly as ``nlp-train`` does (never over an input or another
model, locked, resumable, removed if it fails); without, nothing is written and the best epoch's
weights come back in memory. The CLI's commands are thin wrappers around these functions.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import time
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from distill import distributed
from distill.augment import check_methods, synthetic_examples
from distill.callbacks import Callback
from distill.data import (HUB_PREFIX, DataOptions, Examples, check_held_out, labelled_examples, memory_source,
                          unlabelled_examples)
from distill.deprecation import RenamedKeys, renamed_arguments
from distill.distillation import (CachedTeacherLogits, DistillObjective, EnsembleTeacherLogits, LayerObjective,
                                  OnlineTeacherLogits, TeacherStudentDistill, check_ensemble, ensemble_logits,
                                  ensemble_mixtures, ensemble_weights, refuse_unweighted_class_weights)
from distill.config import RUN_CONFIG, write_run_config
from distill.errors import DistillError, option, require_flag, require_number, require_type, require_whole
from distill.inference import ExampleLogits, decode_labels, model_crf, predict_logits
from distill.io import tensors_sha256, write_json
from distill.labels import LabelHierarchy, build_hierarchy, check_labels_known
from distill.metrics import class_f1, classes_beaten, select_metric, task_metrics
from distill.models import is_onnx_export, load_teacher, model_card
from distill.models.base import LabelModel, pick_device
from distill.models.protocol import check_student
from distill.models.registry import student_entry
from distill.models.students import StudentConfig, student_default
from distill.models.multitask import MultiTaskTeacher, TaskSampling, check_head_names, single_teacher
from distill.models.teacher import Teacher, TeacherConfig, TeacherTraining
from distill.outputs import SUMMARY_FILE
from distill.soft_labels import SoftLabels
from distill.spill import Concatenated
from distill.training import (LEARNT_FROM_ROLES, FitSettings, FitTask, Objective, RunState, SupervisedObjective,
                              TrainSettings, fit_tasks, make_optimizer, optimizer_steps, runtime, teacher_role,
                              training_run)
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


def _is_device_name(name: str) -> bool:
    try:
        torch.device(name)
    except RuntimeError:
        return False
    return True


@dataclass
class Runtime:
    """Where and how a run computes: device, precision (fp32, bf16, fp16 on CUDA, auto; None keeps the
    process's setting), torch threads (None keeps it) and whether to show progress bars."""

    device: str = "auto"
    precision: str | None = None
    threads: int | None = None
    progress: bool = True

    def __post_init__(self):
        require_whole("threads", self.threads, optional=True)
        if not isinstance(self.device, str) or (self.device != "auto" and not _is_device_name(self.device)):
            raise DistillError(f"unknown device {self.device!r}: use auto, cpu, cuda or cuda:N")


@dataclass
class Output:
    """Where a run writes: a model directory (None: nothing written), and the CLI's `--overwrite` /
    `--resume` for it; `config`: the run's options as a config file gives them (`distill.config`), written
    into the directory as run_config.yaml (the CLI's resolved options)."""

    directory: str | Path | None = None
    overwrite: bool = False
    resume: bool = False
    config: dict | None = None

    def __post_init__(self) -> None:
        require_flag("overwrite", self.overwrite)
        require_flag("resume", self.resume)
        if self.config is not None and not isinstance(self.config, dict):
            raise DistillError(f"config must be a dict of option names and values, got {type(self.config).__name__}")
        if self.overwrite and self.resume:
            raise DistillError(f"{option('--resume', 'resume=True')} continues the interrupted run and "
                               f"{option('--overwrite', 'overwrite=True')} starts over: give one of them")


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
         models: Sequence[Any] = (), **settings) -> Iterator[RunState | None]:
    """The run's output (`training_run`); a local `encoder` folder it reads is an input too: the model
    is never written into it, nor moved aside with it by --overwrite, and a resume after its files
    changed (another tokenizer, other weights) is refused. Data `inputs` are the examples read: their
    source goes into the signature (`_input_of`), and a digest of what the model learns from into the
    summary (`learnt_from`). Of the `models` given (in memory, or as a directory or a config), the output
    never replaces the directory one in memory was loaded from."""
    if output.directory is None:
        if output.resume:
            raise DistillError("resume needs an output directory to resume from")
        yield None
        return
    if isinstance(encoder, str) and os.path.isdir(encoder):
        inputs = {**inputs, "encoder": encoder}
    learnt = {role: memory_source(value.inputs) for role, value in inputs.items()
              if isinstance(value, Examples) and role.split(":")[0] in LEARNT_FROM_ROLES}
    inputs = {role: _input_of(value) if isinstance(value, Examples) else value for role, value in inputs.items()}
    protected = [model.loaded_from for model in models if getattr(model, "loaded_from", None)]
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
    from distill.models.readme import about_run, rewrite_readme
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


def _student_settings(settings: TrainSettings, student: LabelModel | StudentConfig | str, task: str,
                      hierarchy: LabelHierarchy) -> TrainSettings:
    """`_selecting`, and the student's own defaults where `settings` leaves the learning rate, the
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
    check_pooling(config.task, config.pooling, option("--pooling", f"TeacherConfig(pooling={config.pooling!r})"))
    with runtime(env.precision, env.threads, env.progress):
        hierarchy, train_set, dev_set = _labelled(train, dev, config.task, data)
        config = config.resolved()
        training = _selecting(training.for_task(config.task), config.task, hierarchy)
        inputs = {"train": train_set, "dev": dev_set}
        with _run(output, inputs, config.encoder, command="teacher", config=config, training=training,
                  data=data) as run:
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
        with _run(output, inputs, config.encoder, command="teacher", heads=signature, sampling=sampling,
                  data=data) as run:
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
    if is_onnx_export(teacher):  # its embedding table from the graph; a transformer's layers from its source model
        from distill.models.transformer_student import FROM_TEACHER
        layers = getattr(config, "encoder", None) == FROM_TEACHER or getattr(entry.cls, "runs_teacher_encoder", False)
        teacher = teacher.initialising_teacher(layers=layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if teacher is None:
            return entry.cls.build(config, hierarchy, examples)
        if not callable(getattr(entry.cls, "build_from_teacher", None)):
            random = option("--random-embeddings", "teacher_embeddings=False (Distiller) or no teacher_embeddings "
                            "(train_student)")
            raise DistillError(f"student {config.model!r} lacks build_from_teacher(config, hierarchy, examples, "
                               f"teacher) to start from the teacher's weights: use {random}")
        return entry.cls.build_from_teacher(config, hierarchy, examples, teacher)


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
            inputs, mask = model.prepare(sample)
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
    lists (a teacher's `encoder/` too), not the run's log, summary or resume state (deleted at its end)."""
    from distill.models.card import MODEL_CARD, read_model_card
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
        settings = _student_settings(settings, student, task, hierarchy)
        teacher_source = _teacher_source(teacher_embeddings)
        inputs = {"train": train_set, "dev": dev_set, "embeddings_from_teacher": teacher_source}
        with _run(output, inputs, getattr(student, "encoder", None), (student, teacher_embeddings), command="student",
                  config=_config_of(student), settings=settings, data=data, class_weights=class_weights) as run:
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


class Distiller:
    """Distil `teacher` into `student` (a built model, a config, or a registered name such as ``"lstm"``).
    The teacher is a `Teacher`, a trained student (the next stage of a teacher-assistant chain), or
    either's directory.

    `loss` composes the student's NLL and the distillation term (`TeacherStudentDistill`); teacher
    logits are computed once over the transfer set (labelled + unlabelled) and cached on disk by
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
    task's defaults; `distill.augment`), join the transfer set as unlabelled text does; they and the logits of the
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

    def __init__(self, teacher: LabelModel | str | Path | Sequence[LabelModel | str | Path] | SoftLabels,
                 student: LabelModel | StudentConfig | str,
                 loss: TeacherStudentDistill | None = None, settings: TrainSettings = TrainSettings(),
                 class_weights: Any = None, teacher_embeddings: bool = True, unlabeled_ratio: float | None = None,
                 online_teacher: bool = False, cache_dir: str | Path | None = None, teacher_batch_size: int = 64,
                 env: Runtime = Runtime(), head: str | None = None, augment: int = 0,
                 augment_methods: Sequence[str] | None = None, teacher_weights: Sequence[float] | None = None):
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
        require_flag("teacher_embeddings", teacher_embeddings)
        require_flag("online_teacher", online_teacher)
        require_whole("teacher_batch_size", teacher_batch_size)
        require_number("unlabeled_ratio", unlabeled_ratio, 0, float("inf"), low_open=True, optional=True)
        self.teacher_sources = [str(one) if isinstance(one, (str, Path)) else one.path if one is self.soft_labels
                                else None for one in teachers]
        self.teacher_source = self.teacher_sources[0]
        self.given = (*teachers, student) if self.soft_labels is None else (student,)  # models in memory: the
        # output must not replace their directories
        self.head = head
        self._check_ensemble(teachers, loss, online_teacher)
        self.teacher_weights = ensemble_weights(teacher_weights, len(teachers))
        self.teachers = [one if source else self._single(one, "teacher")
                         for one, source in zip(teachers, self.teacher_sources)]
        self.teacher = self.teachers[0]
        self.student, self.loss, self.settings = student, loss or TeacherStudentDistill(), settings
        if class_weights is not None and self.loss.class_weights is not None:
            raise DistillError("class weights given twice: to the Distiller and to its loss")
        refuse_unweighted_class_weights(self.loss.student_weight, class_weights)
        self.class_weights = class_weights
        self.teacher_embeddings, self.unlabeled_ratio = teacher_embeddings, unlabeled_ratio
        self.online_teacher, self.cache_dir, self.teacher_batch_size = online_teacher, cache_dir, teacher_batch_size
        self.env = env
        require_whole("augment", augment, low=0)
        if augment_methods is not None and not augment:
            raise DistillError(f"{option('--augment-methods', 'augment_methods')} choose how synthetic examples are "
                               f"made, and {option('--augment', 'augment')} is 0: give "
                               f"{option('--augment N', 'augment=N')}")
        self.augment = augment
        self.augment_methods = check_methods(augment_methods, _student_task(student)) if augment else None
        self._check_soft_labels(online_teacher, cache_dir, teacher_weights, augment)
        if cache_dir is not None and online_teacher:
            raise DistillError("an online teacher scores every batch and keeps no logit cache: give the online "
                               "teacher or a cache folder, not both")
        if cache_dir is not None:
            from distill.cache import check_cache_dir
            check_cache_dir(cache_dir)

    def _check_soft_labels(self, online_teacher: bool, cache_dir: str | Path | None,
                           teacher_weights: Sequence[float] | None, augment: int) -> None:
        """What soft labels cannot do: they are distributions for the texts of a file, not a model that runs (on
        every batch, on synthetic text, on the layers), keeps a cache, or has heads, weights or tags."""
        if self.soft_labels is None:
            return
        refused = [option("--online-teacher", "online_teacher=True") if online_teacher else None,
                   option("--hidden-weight, --attention-weight or --cosine-weight", "a layer term (hidden_weight, "
                          "attention_weight, cosine_weight)") if self.loss.uses_layers else None,
                   option("--head", "head") if self.head is not None else None,
                   option("--cache-dir", "cache_dir") if cache_dir is not None else None,
                   option("--teacher-weights", "teacher_weights") if teacher_weights is not None else None,
                   option("--augment", "augment") if augment else None]
        if any(refused):
            raise DistillError(f"soft labels give the teacher's distributions for the texts of "
                               f"{self.soft_labels.path}, and no teacher model runs: drop {next(filter(None, refused))}")
        if _student_task(self.student) != "classification":
            raise DistillError(f"soft labels give one distribution per text: a tagging student cannot learn from "
                               f"{self.soft_labels.path}")

    def _check_ensemble(self, teachers: list, loss: TeacherStudentDistill | None, online_teacher: bool) -> None:
        """What an ensemble of teachers cannot do: it teaches through each teacher's cached logits alone."""
        if len(teachers) == 1:
            return
        refused = [option("--online-teacher", "online_teacher=True") if online_teacher else None,
                   option("--hidden-weight, --attention-weight or --cosine-weight", "a layer term (hidden_weight, "
                          "attention_weight, cosine_weight)") if loss is not None and loss.uses_layers else None,
                   option("--head", "head") if self.head is not None else None]
        if any(refused):
            raise DistillError(f"an ensemble of teachers teaches through each teacher's cached logits only, with "
                               f"single-task teachers: drop {next(filter(None, refused))}, or give one teacher")

    def _single(self, model: LabelModel, where: str) -> LabelModel:
        """The teacher `model` as the student learns from it: a multi-task teacher's head `head`; an
        ensemble's teachers as they are (`check_ensemble` takes single-task ones only)."""
        return model if len(self.teacher_sources) > 1 else single_teacher(model, self.head, where)

    def _teacher_name(self, number: int) -> str:
        """Teacher `number` (from 0) as messages name it: its directory, or which one in memory."""
        return self.teacher_sources[number] or ("(in memory)" if len(self.teachers) == 1
                                                 else f"{number + 1} (in memory)")

    def options(self) -> dict:
        """The distillation settings as a run's signature and summary record them."""
        return {**self.loss.settings(), "class_weights": self.class_weights, "unlabeled_ratio": self.unlabeled_ratio,
                "online_teacher": self.online_teacher, "embeddings_from_teacher": self.teacher_embeddings,
                **({"head": self.head} if self.head is not None else {}),
                **({"augment": self.augment, "augment_methods": list(self.augment_methods)} if self.augment else {}),
                **({"teacher_weights": self.teacher_weights} if self.teacher_weights else {})}

    @renamed_arguments(unlabelled="unlabeled")
    def fit(self, train: Any, dev: Any, unlabeled: Any = None, data: DataOptions = DataOptions(),
            output: Output = Output(), callbacks: Sequence[Callback] = ()) -> TrainResult:
        """Train the student on `train` (+ `unlabeled`, pseudo-labelled by the teacher's argmax; soft labels: the
        file's other texts, and `train` may be None); the best epoch on `dev` wins. Returns the trained student and the run's summary. `callbacks` hear of
        its steps and epochs (`distill.callbacks`), as those of every call that trains."""
        _check_arguments(data=data, output=output)
        if self.soft_labels is None:
            self._refuse_unlabelled_settings_without_text(unlabeled)
        env = self.env
        with runtime(env.precision, env.threads, env.progress):
            task = _student_task(self.student)
            if self.soft_labels is not None:
                hierarchy, train_set, dev_set, extra = self._soft_labelled(train, dev, unlabeled, data)
            else:
                hierarchy, train_set, dev_set = _labelled(train, dev, task, data)
                extra = unlabelled_examples(unlabeled, task, data, "unlabeled") if unlabeled is not None else None
            settings = _student_settings(self.settings, self.student, task, hierarchy)
            if extra is not None:  # the dev set taught as transfer text would pick the epoch that fits it best
                check_held_out(extra, dev_set, "the unlabelled data" if self.soft_labels is None
                               else f"the soft-labelled texts of {self.soft_labels.path}")
            self._refuse_for_an_export()
            teachers = {teacher_role(number): source or _teacher_source(model)
                        for number, (model, source) in enumerate(zip(self.teachers, self.teacher_sources))}
            inputs = {**teachers, "train": train_set if train is not None else None, "dev": dev_set, "unlabeled": extra}
            if not self.online_teacher and self.soft_labels is None and output.directory is not None:  # the default
                from distill.cache import check_cache_dir
                check_cache_dir(self.cache_dir, output.directory)
            with _run(output, inputs, getattr(self.student, "encoder", None), self.given, command="kd",
                      config=_config_of(self.student), settings=settings, data=data, kd=self.options()) as run:
                result = self._fit(task, hierarchy, train_set, dev_set, extra, settings, run, callbacks)
                self._compare_with_teacher(result, dev_set, run)
        result.summary = RenamedKeys(result.summary, {"unlabelled_examples": "unlabeled_examples"})
        return result

    def _soft_labelled(self, train: Any, dev: Any, unlabelled: Any, data: DataOptions
                       ) -> tuple[LabelHierarchy, Examples, Examples, Examples | None]:
        """The label set, training and dev data of a run that learns from soft labels, and the file's texts that
        are not training texts: the transfer set's unlabelled part. The file is read against the training data's
        labels, or without training data its own (or those `SoftLabels` names)."""
        soft = self.soft_labels
        if unlabelled is not None:
            raise DistillError(f"the texts of {soft.path} are the unlabelled text that soft labels teach on: drop "
                               f"{option('--unlabeled', 'unlabeled')}, or add its texts with their soft labels to "
                               "the file")
        if train is not None:
            hierarchy, train_set, dev_set = _labelled(train, dev, "classification", data)
            soft.read(hierarchy.labels, data.text_column)
        else:
            soft.read(None, data.text_column)
            best = [soft.hierarchy.labels[max(range(len(row)), key=row.__getitem__)]
                    for row in soft.records.probabilities]  # what `inverse` class weights count
            hierarchy = LabelHierarchy(soft.hierarchy.labels, None, {label: best.count(label) for label in set(best)})
            dev_set = labelled_examples(dev, "classification", data, "dev")
            check_labels_known(dev_set.where, hierarchy, "classification", dev_set.labels)
            train_set = Examples([], [], "none", "train")
        seen = set(train_set.inputs)
        texts = [text for text in soft.records.texts if text not in seen]
        return hierarchy, train_set, dev_set, Examples(texts, None, soft.path, "soft labels") if texts else None

    def _refuse_unlabelled_settings_without_text(self, unlabelled: Any) -> None:
        """`unlabeled_ratio` samples the unlabelled text and `min_confidence` filters its pseudo-labels: without
        unlabelled text either would be accepted and change nothing."""
        if unlabelled is not None:
            return
        named = [option("--unlabeled-ratio", "unlabeled_ratio") if self.unlabeled_ratio is not None else None,
                 option("--min-confidence", "TeacherStudentDistill(min_confidence=...)")
                 if self.loss.min_confidence > 0 and not self.augment else None]
        if any(named):
            name = next(filter(None, named))
            raise DistillError(f"{name} applies to unlabelled text, and none was given: give "
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
        if card.get("format") != "onnx" or not (self.online_teacher or self.loss.uses_layers):
            return
        source = card.get("export", {}).get("source")
        what = option("--online-teacher", "online_teacher=True") if self.online_teacher else \
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
        if (extra or self.augment) and crf is not None:
            raise DistillError(f"teacher {self._teacher_name(crf)} is a CRF tagger: its labels are "
                               "Viterbi paths, which kd's per-word pseudo-labels of unlabelled text would not "
                               "reproduce: distil it on labelled data only, or distil a teacher without "
                               f"{option('--crf', 'crf=True')}")
        unlabelled = list(extra.inputs) if extra else []
        if extra and self.unlabeled_ratio is not None:
            keep = int(self.unlabeled_ratio * len(train))
            if keep == 0:
                raise DistillError(f"unlabeled ratio {self.unlabeled_ratio} keeps none of the {len(unlabelled)} "
                                   f"unlabelled examples ({self.unlabeled_ratio} per each of {len(train)} labelled "
                                   "ones): raise it, or give no unlabelled text")
            unlabelled = random.Random(settings.seed).sample(unlabelled, min(keep, len(unlabelled)))
        # the vocabulary covers the whole transfer set: words seen only in unlabelled text are not <unk>
        synthetic = synthetic_examples(train, dev, self.augment, self.augment_methods, settings.seed, teacher,
                                       hierarchy.scheme) if self.augment else []
        examples = list(train.inputs) + unlabelled
        if synthetic:  # kept on disk, as their logits will be: memory stays flat as --augment grows
            examples = Concatenated([examples, synthetic])
        made = f"{len(synthetic)} synthetic examples of {train.where}"
        sources = train.where + (f" and {extra.where}" if extra else "") + (f" and {made}" if synthetic else "")
        read_from = [train.where] * len(train.inputs) + [extra.where if extra else ""] * len(unlabelled) + \
            [made] * len(synthetic) if extra or synthetic else train.where  # as messages name them
        # the labels of the training data (the teacher's, in its order: checked above) with their counts there,
        # which `inverse` class weights come from, and its --label-separator
        model = new_student(self.student, hierarchy, examples, settings.seed,  # soft labels have no embeddings
                            teacher if self.teacher_embeddings and self.soft_labels is None else None)
        if model.hierarchy.labels != teacher.hierarchy.labels:  # a student given in memory: its own order
            raise DistillError(f"the student's labels {model.hierarchy.labels} are in another order than the "
                               f"teacher's {teacher.hierarchy.labels}: its logits would be compared with the "
                               "wrong labels; start from a new student")
        unlabelled_count = len(unlabelled) + len(synthetic)
        transfer = Examples(examples, list(train.labels) + [None] * unlabelled_count, sources)  # named, not keyed
        loss = self._loss(model, as_given)
        summary = {"teacher": self.teacher_source, "kd": self.options(), "unlabeled_examples": len(unlabelled),
                   **({"teachers": [{"teacher": source, "weight": weight} for source, weight
                                    in zip(self.teacher_sources, self.teacher_weights)]}
                      if self.teacher_weights else {}),
                   **({"synthetic_examples": len(synthetic)} if self.augment else {}),
                   **({"teacher_export": teacher.teacher_record()}
                      if is_onnx_export(teacher) and not self.teacher_weights else {})}  # an ensemble's: per teacher
        summary["teacher_dev"] = soft_dev_scores(self.soft_labels, dev) if self.soft_labels is not None else \
            teacher_dev_scores(teachers, dev, self.teacher_weights, self.teacher_batch_size, env.progress,
                               not (self.online_teacher or loss.uses_layers), self.cache_dir)
        if loss.uses_layers:  # the teacher's states as well as its logits: it runs on every batch
            warn_if_truncated(teacher, examples, read_from)
            with LayerObjective(loss, teacher, model, examples, settings.seed) as objective:
                return _student_run(model, objective, transfer, dev, settings, run, env, summary, callbacks)
        started = time.perf_counter()
        cache_info: dict = {}
        if self.online_teacher:
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
        stores = [LogitStore(model, self.cache_dir) for model in teachers]  # each teacher's own cache
        labels = [model.hierarchy.labels for model in teachers]

        def combine(results: list[ExampleLogits]) -> list:
            """What the student learns from the teachers' logits: one's as they are, an ensemble's mixtures."""
            return results if len(teachers) == 1 else \
                ensemble_mixtures(results, labels, self.teacher_weights, loss)
        if self.augment:  # N times the labelled data: scored a part at a time and kept on disk
            kept, hits = spilled_teacher_logits(teachers, stores, examples, combine, self.teacher_batch_size,
                                                self.env.progress, read_from)
        else:  # each teacher warns of what it cuts among those it reads
            scored = [teacher_logits(model, examples, store, self.teacher_batch_size, self.env.progress,
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

    def _loss(self, model: LabelModel, as_given: LabelHierarchy | None = None) -> TeacherStudentDistill:
        """The loss, with the Distiller's class weights in it: numbers are in the order of the training data's
        labels (`as_given`: sorted, the outside tag first), which a teacher saved before that order, and so
        the student, may not follow; they are put in the student's order by label."""
        loss = self.loss
        if self.class_weights is not None:
            loss = copy.deepcopy(self.loss)  # a shallow copy of a Module shares its buffers
            given = as_given or model.hierarchy
            weights = given.class_weights(self.class_weights)
            if weights is not None:
                weights = [weights[given.index[label]] for label in model.hierarchy.labels]
            loss.class_weights = None if weights is None else torch.tensor(weights, dtype=torch.float)
        _refuse_ignored_weights(model, loss.class_weights)
        return loss
