"""One trial: a `kd` run with the trial's settings into ``OUTPUT/trials/NNNN``, pruned within its student family
(`FamilyPruner`), then its latency and size measured on this machine (`measure`, `Budget`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distill.data import DataOptions
from distill.errors import DistillError, ResumeRefused
from distill.student_search.space import TIMING_EXAMPLES, TRIALS_FOLDER, SearchSpace, optuna_module

logger = logging.getLogger("distill")


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


# A trial over a budget set by a model's latency (--as-fast-as) by less than this factor is timed again beside that
# model, in alternating rounds, and the two are compared on their best times: one model timed six times in a row
# here varied by up to 22% (a CoNLL BiLSTM tagger under load), more than a default student of the reference's own
# architecture differs from it, so such a trial was in or out of the budget by chance. Their best times are then
# compared with a tolerance, for a student that costs what the model costs: the best of three timings of one model,
# taken twice, differed by up to 1.2% in those six.
BESIDE_MARGIN = 1.5
BESIDE_ROUNDS = 2
BESIDE_TOLERANCE = 0.05


def student_architecture(model_dir: Path) -> dict | None:
    """A word or transformer student's settings as its folder's config.json records them (None for another model,
    an export say): two students of equal settings compute the same for a batch, whatever their weights."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config.get("config") if isinstance(config, dict) and isinstance(config.get("config"), dict) else None


def is_reference_architecture(architecture: dict | None, job: "Job") -> bool:
    """Whether a student of these settings (`student_architecture`) is the model that set the latency budget
    (--as-fast-as) in all but its weights, so within the budget by definition, however its timing came out."""
    return architecture is not None and job.reference is not None and \
        architecture == student_architecture(Path(job.reference["model"]))


def timed_beside_reference(measured: dict, folder: Path, job: "Job") -> dict:
    """`measured` (a trial's `measure`), with ``beside_reference`` where it is over the budget a reference model
    sets: a student of the reference's own settings is within it (``same_architecture``, untimed: on a loaded
    machine its timing alone put it out of its own model's budget); one up to `BESIDE_MARGIN` times over is timed
    `BESIDE_ROUNDS` more times alternately with the reference, and ``ratio`` of the trial's best time to the
    reference's is what `Budget` then judges (the budget holds at a ratio of 1 + `BESIDE_TOLERANCE` or less)."""
    budget, reference = job.budget.max_latency_ms, job.reference
    if reference is None or budget is None or measured["latency_ms"] <= budget:
        return measured
    if is_reference_architecture(student_architecture(folder), job):
        return {**measured, "beside_reference": {"same_architecture": True, "ratio": 1.0}}  # its latency, untimed
    if measured["latency_ms"] > BESIDE_MARGIN * budget:
        return measured
    trial_ms, reference_ms = [measured["latency_ms"]], [reference["latency_ms"]]
    for _ in range(BESIDE_ROUNDS):
        reference_ms.append(measure(Path(reference["model"]), job.dev_examples, job.batch_size, job.threads,
                                    scratch=job.output)["latency_ms"])
        trial_ms.append(measure(folder, job.dev_examples, job.batch_size, job.threads)["latency_ms"])
    return {**measured, "beside_reference": {"trial_ms": [round(ms, 3) for ms in trial_ms],
                                             "reference_ms": [round(ms, 3) for ms in reference_ms],
                                             "ratio": min(trial_ms) / min(reference_ms)}}


# A trial whose untrained student, in PyTorch, takes more than this many times the latency budget is pruned before
# it trains (a BiLSTM searched against a static student's latency): weights do not change what a forward pass
# costs, and ONNX Runtime, which may time the trained one, ran a BiLSTM in half its PyTorch time (Rotten Tomatoes,
# one thread: 12.1 against 23.6 ms a batch of 32), not in a quarter.
UNTRAINED_SLACK = 4.0


def untrained_latency(settings, job: "Job") -> float | None:
    """Milliseconds a batch of `job.batch_size` takes a fresh word student of the trial's `settings` (vocabulary from
    the training texts, random weights) in PyTorch, at `job.threads`; None for a transformer student, whose build
    reads a pretrained encoder."""
    from distill.models.registry import student_config, student_entry
    from distill.models.students import StudentModel, build_student
    from distill.training import runtime
    if not issubclass(student_entry(settings.student).cls, StudentModel):
        return None
    model = build_student(student_config(settings.student, **settings.config), job.hierarchy, job.train_inputs)
    with runtime(None, job.threads):
        return _latency(model.eval(), job.dev_examples[:TIMING_EXAMPLES], job.batch_size)


def _prune_if_far_over_budget(trial, settings, job: "Job", started: float) -> None:
    """Prune the trial before it trains when its untrained student misses the latency budget by more than
    `UNTRAINED_SLACK` times (`untrained_latency`), unless it has the settings of the model that set the budget.
    A first timing over that is taken again `BESIDE_ROUNDS` times, alternately with the reference model in PyTorch
    where there is one, and the best times judged: one timing on a busy machine misses by far. The full CoNLL
    benchmark's search pruned its default BiLSTM tagger so: 139 ms a batch untrained, where the trained one takes
    8-10 ms in PyTorch, and chose without the default student it was to beat."""
    from distill.models.registry import student_config
    from distill.models import load_model
    from distill.training import runtime
    if job.budget.max_latency_ms is None or job.hierarchy is None:
        return
    config = student_config(settings.student, **settings.config)
    if dataclasses.is_dataclass(config) and is_reference_architecture(dataclasses.asdict(config), job):
        return  # the reference's own settings: within the budget it sets, whatever one timing says
    times, limit = [untrained_latency(settings, job)], UNTRAINED_SLACK * job.budget.max_latency_ms
    if times[0] is None or times[0] <= limit:
        return
    reference = load_model(job.reference["model"]).eval() if job.reference is not None else None
    reference_ms = []
    for _ in range(BESIDE_ROUNDS):
        if reference is not None:  # like with like: its PyTorch time, now
            with runtime(None, job.threads):
                reference_ms.append(_latency(reference, job.dev_examples[:TIMING_EXAMPLES], job.batch_size))
        times.append(untrained_latency(settings, job))
    if reference_ms:
        limit = UNTRAINED_SLACK * max(min(reference_ms), job.budget.max_latency_ms)
    latency = min(times)
    if latency <= limit:
        return
    trial.set_user_attr("untrained_ms", round(latency, 3))
    trial.set_user_attr("seconds", round(time.perf_counter() - started, 1))
    raise optuna_module().TrialPruned(f"pruned before training: untrained, {latency:.1f} ms a batch in PyTorch, over "
                                      f"{UNTRAINED_SLACK:g}x the budget's {limit / UNTRAINED_SLACK:.1f} ms")


@dataclass
class Budget:
    """Latency (ms a batch) and size (MB) limits; None: no limit."""

    max_latency_ms: float | None = None
    max_mb: float | None = None

    def excess(self, record: dict) -> float:
        """How far over the budget a measured trial is, relatively (0: within; TPE's constraint)."""
        over = [0.0]
        beside = record.get("beside_reference")  # timed again beside the model that set the budget
        if self.max_latency_ms is not None:
            over.append(beside["ratio"] - 1 - BESIDE_TOLERANCE if beside else
                        record["latency_ms"] / self.max_latency_ms - 1)
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
    hierarchy: Any = None  # the teacher's labels and the training inputs: an untrained student is built of them
    train_inputs: list = field(default_factory=list)  # (`untrained_latency`)


def _folder(trial, job: Job) -> Path:
    """A trial's run folder, by its number; a retried trial inherits the interrupted one's (its user attributes
    are copied), and continues that run."""
    return job.output / trial.user_attrs.get("folder", f"{TRIALS_FOLDER}/{trial.number:04d}")


def _train(distiller, trial, job: Job, folder: Path) -> None:
    """The trial's kd run, continued where an interrupted one stopped; started over, in an emptied folder, where
    this process cannot continue it exactly (retried by a process of other torch threads, its resume state or its
    best epoch's model damaged or removed) or there is no state to continue (a run killed before its first one,
    or between its model and its state): the folder is the study's own, so neither what is left there nor an
    option a search does not take (kd's overwrite) stops the trial on every rerun."""
    from distill.models.card import RESUME_FILE
    from distill.trainers import Output

    def fit(output: Output) -> None:
        distiller.fit(job.train, job.dev, job.unlabeled, job.data, output, callbacks=[_pruning_callback(trial)])
    if (folder / RESUME_FILE).is_file():
        try:
            return fit(Output(folder, resume=True))
        except ResumeRefused as refused:
            logger.warning(f"warning: trial {trial.number}: its interrupted run cannot be continued exactly here "
                           f"({refused}); it starts over")
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    fit(Output(folder))


def run_trial(trial, job: Job) -> float:
    """Train (or continue, or find finished) the trial's student, measure it, record it on the trial; returns
    its best dev score."""
    from distill.distillation import TeacherStudentDistill
    from distill.models.registry import student_config
    from distill.outputs import SUMMARY_FILE
    from distill.distiller import Distiller, DistillSettings
    from distill.trainers import Runtime
    from distill.training import TrainSettings
    optuna = optuna_module()
    started = time.perf_counter()
    settings = job.space.sample(trial)
    folder = _folder(trial, job)
    if "folder" not in trial.user_attrs and (folder.exists() or folder.is_symlink()):
        # a new trial's folder (a retried one inherits its own): what is there no trial of the study wrote, and
        # starting the trial over there would remove it
        raise DistillError(f"{folder}: holds what no trial of this search wrote (another command's output?), where "
                           f"its trial {trial.number} trains: move it out of {folder.parent}")
    trial.set_user_attr("settings", settings.record())
    trial.set_user_attr("folder", str(folder.relative_to(job.output)))
    trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")  # the machine its latency is of
    if not (folder / SUMMARY_FILE).is_file():  # an interrupted trial's run may have finished before its measuring
        # its own seed, recorded: a reseeded run's was drawn for it; a retried trial keeps its first process's
        training = {**settings.training, "seed": trial.user_attrs.get("seed", job.seed)}
        trial.set_user_attr("seed", training["seed"])
        try:
            if "reseed_of" not in trial.user_attrs:  # (a reseeded run's trial was within reach)
                _prune_if_far_over_budget(trial, settings, job, started)
            distiller = Distiller(job.teacher, student_config(settings.student, **settings.config),
                                  TeacherStudentDistill(**settings.loss), TrainSettings(**training),
                                  distill=DistillSettings(cache_dir=job.cache_dir, **settings.distiller),
                                  env=Runtime(job.device, progress=job.progress))
            _train(distiller, trial, job, folder)
        except optuna.TrialPruned:  # before training (an interrupted run's, under a smaller budget) or during it:
            shutil.rmtree(folder, ignore_errors=True)  # its resume state, as a pruned trial is not continued
            trial.set_user_attr("seconds", round(time.perf_counter() - started, 1))
            raise
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    metric = summary["settings"]["select_metric"]
    score = float(summary["best"]["dev"][metric])
    # a reseeded run is the same model as its trial's, timed then
    measured = trial.user_attrs["measured"] if "reseed_of" in trial.user_attrs else \
        timed_beside_reference(measure(folder, job.dev_examples, job.batch_size, job.threads), folder, job)
    trial.set_user_attr("measured", measured)
    trial.set_user_attr("dev", {"metric": metric, "score": score, "best_epoch": summary["best"]["epoch"],
                                "epochs": len(summary["history"]), "parameters": summary["parameters"]})
    trial.set_constraint("budget", job.budget.excess(measured))  # TPE then favours settings within the budget
    trial.set_user_attr("seconds", round(time.perf_counter() - started, 1))
    return score
