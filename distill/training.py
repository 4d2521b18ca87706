"""The one training loop: teacher, student and kd runs differ only in model and objective.

A multi-task teacher's run is the same loop over several `FitTask`s (one per head, each a view of
the one model with its own data and objective): each batch is one task's, in a seeded sampled
order (`epoch_batches`), and every head is scored on dev after each epoch.

An `Objective` gives a batch's loss as terms, each a sum and the denominator that averages it
(`distill.losses.LossSum`); a batch holds the example ``indices`` (so a distiller can look up
teacher logits), the model's ``inputs``, the ``mask`` of scored words (tagging), the gold
``targets`` (IGNORE_INDEX where unlabeled) and ``labelled``, which rows have gold labels at all.

Under a launcher (torchrun) every rank draws the same global batches and trains on its share
of each through DistributedDataParallel; every term's sum is divided by its denominator over
the whole global batch (`distill.distributed.global_batch_part`), so the run follows the
one-process trajectory. Dev predictions are gathered across ranks and rank 0 alone saves, logs
and shows progress.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from distill import distributed, precision
from distill.errors import DistillError, require_number, require_whole
from distill.inference import evaluate, example_length, example_positions
from distill.io import appending, save_sealed, uninterrupted, write_text
from distill.losses import IGNORE_INDEX, LossSum, combine
from distill.metrics import SELECTABLE
from distill.progress import bars_shown, progress_bar, progress_message
from distill.provenance import RunState, input_fingerprints, restore_rng_state, rng_states, runtime_settings
from distill.runtime import MAX_THREADS
from distill.settings import setting

logger = logging.getLogger("distill")


class Objective:
    """A training loss as `LossSum` terms, so `fit` can average each over the whole global batch
    of a distributed run; called, it gives the loss of the batch on its own."""

    def terms(self, model: torch.nn.Module, logits: torch.Tensor, batch: dict) -> list[LossSum]:
        """The batch's loss terms: the loss is the sum of their means."""
        raise NotImplementedError

    def __call__(self, model: torch.nn.Module, logits: torch.Tensor, batch: dict) -> torch.Tensor:
        return combine(self.terms(model, logits, batch))

    def parameters(self) -> list[torch.nn.Parameter]:
        """Weights the objective trains beside the model's (the hidden-state term's width maps)."""
        return []

    def state_dict(self) -> dict:
        """Those weights, for the run's resume state."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` gave."""


class SupervisedObjective(Objective):
    """Plain supervised training: the model's class-weighted NLL (or CRF NLL) on gold labels."""

    def __init__(self, class_weights: Sequence[float] | None = None):
        self.class_weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float)

    def terms(self, model: torch.nn.Module, logits: torch.Tensor, batch: dict) -> list[LossSum]:
        weights = None if self.class_weights is None else self.class_weights.to(logits.device)
        return [model.supervised_loss(logits, batch["targets"], batch["mask"], weights).named("nll")]


LR_SCHEDULES = ("constant", "linear", "cosine")
# What the settings every training run has take on the command line (`distill.settings`), shared by a student's
# `TrainSettings` and a teacher's `TeacherTraining`: one help text and one set of bounds per setting.
OPTIONS: dict[str, dict] = {
    "lr": {"help": "AdamW learning rate (after the warm-up, before any decay).", "low": 0, "high": 1,
           "low_open": True},
    "batch_size": {"help": "Examples per batch.", "low": 1},
    "epochs": {"help": "Training epochs at most.", "low": 1},
    "patience": {"help": "Stop after this many epochs without dev improvement.", "low": 1},
    "seed": {"help": "Random seed (0 to 2^32-1): same data, seed and machine give the same result.", "low": 0,
             "high": 2**32 - 1},
    "select_metric": {"choices": SELECTABLE, "help": "Dev metric that picks the best epoch and drives --patience "
                      "[default: accuracy for classification, f1 (entity) for IOB/IOBES/BILOU tags, token_accuracy "
                      "for plain tags such as POS]."},
    "weight_decay": {"help": "AdamW's decoupled weight decay (0: none, which steps as Adam does).", "low": 0,
                     "high": 1},
    "lr_schedule": {"choices": LR_SCHEDULES, "help": "The learning rate after the warm-up: constant, or a linear or "
                    "half-cosine decay to 0 at the last step of --epochs."},
    "warmup": {"option": "--warmup-ratio", "low": 0, "high": 1,
               "help": "Fraction of the steps (of --epochs) with a linear learning-rate warm-up from 0."},
    "grad_accumulation": {"metavar": "N", "low": 1, "help": "Batches of --batch-size per optimizer step: the step of "
                          "one batch N times larger (each loss term averaged over all N; each batch also runs "
                          "forward once more without gradients for that) in the memory of one."},
    "max_grad_norm": {"help": "Clip the gradients' norm to this (0: no clipping).", "low": 0},
}


def check_controls(weight_decay: float, lr_schedule: str, warmup: float, grad_accumulation: int,
                   max_grad_norm: float, warmup_name: str = "warmup_ratio") -> None:
    """The training controls every run kind shares (`make_optimizer`, `fit_tasks`), checked."""
    require_number("weight_decay", weight_decay, 0, 1)
    if lr_schedule not in LR_SCHEDULES:
        raise DistillError(f"unknown lr schedule {lr_schedule!r}: choose one of {', '.join(LR_SCHEDULES)}")
    require_number(warmup_name, warmup, 0, 1)
    require_whole("grad_accumulation", grad_accumulation)
    require_number("max_grad_norm", max_grad_norm, 0, float("inf"))


@dataclass
class TrainSettings:
    """How a student trains (what it is lives in its config): AdamW at `lr` (with `weight_decay`, on the
    `lr_schedule` after a warm-up over `warmup_ratio` of the steps), batches of `batch_size`, each optimizer
    step over `grad_accumulation` of them (as one batch that many times larger), gradients clipped to
    `max_grad_norm` (0: not clipped), early stopping after `patience` epochs without dev improvement in
    `select_metric` (None: the task's default, `distill.metrics.default_metric`), and the seed. `epochs` is
    a safety cap: students train until dev stops improving (docs/results.md, "How long students train"), and
    a schedule spans it. `lr`, `epochs` and `patience` None are the student's own defaults: 2e-3, 50 and 4 for
    the LSTMs and CNNs; 5e-5 (8e-5 tagging), 20 and 2 for a transformer student. The defaults of the
    controls (no decay, a constant rate, one batch a step, clipping at 1) are the benchmark's: AdamW without
    decay steps exactly as Adam does."""

    lr: float | None = setting(None, **OPTIONS["lr"])
    batch_size: int = setting(32, **OPTIONS["batch_size"])
    epochs: int | None = setting(None, help="At most this many epochs: a safety cap, --patience normally stops first.",
                                 low=1)
    patience: int | None = setting(None, **OPTIONS["patience"])
    seed: int = setting(42, **OPTIONS["seed"])
    select_metric: str | None = setting(None, **OPTIONS["select_metric"])
    weight_decay: float = setting(0.0, **OPTIONS["weight_decay"])
    lr_schedule: str = setting("constant", **OPTIONS["lr_schedule"])
    warmup_ratio: float = setting(0.0, **OPTIONS["warmup"])
    grad_accumulation: int = setting(1, **OPTIONS["grad_accumulation"])
    max_grad_norm: float = setting(1.0, **OPTIONS["max_grad_norm"])

    def __post_init__(self):
        require_number("lr", self.lr, 0, 1, low_open=True, optional=True)
        require_whole("batch_size", self.batch_size)
        require_whole("epochs", self.epochs, optional=True)
        require_whole("patience", self.patience, optional=True)
        require_whole("seed", self.seed, 0, 2**32 - 1)
        if self.select_metric is not None and self.select_metric not in SELECTABLE:  # the task's own: at training
            raise DistillError(f"select_metric must be a metric's name ({', '.join(SELECTABLE)}), got "
                               f"{self.select_metric!r:.40}")
        check_controls(self.weight_decay, self.lr_schedule, self.warmup_ratio, self.grad_accumulation,
                       self.max_grad_norm)


@dataclass
class FitSettings:
    """What `fit_tasks` needs of a run's settings: `batch_size` examples a forward pass, `grad_accumulation`
    of those batches an optimizer step, gradients clipped to `max_grad_norm` (0: not clipped)."""

    epochs: int = 3
    batch_size: int = 32
    patience: int = 2
    seed: int = 42
    select_metric: str = "accuracy"
    max_grad_norm: float = 1.0
    progress: bool = True
    eval_batch_size: int = 64
    grad_accumulation: int = 1


def optimizer_steps(sizes: Sequence[int], batch_size: int, grad_accumulation: int, epochs: int) -> int:
    """The optimizer steps of a run of `epochs` over tasks of `sizes` training examples (what a schedule
    spans): one per `batch_size` x `grad_accumulation` examples of each task, as `epoch_batches` draws."""
    return sum(-(-size // (batch_size * grad_accumulation)) for size in sizes) * epochs


def lr_factor(step: int, schedule: str, warmup_steps: int, total_steps: int) -> float:
    """The learning rate at optimizer step `step` as a fraction of the set one: a linear warm-up from 0
    over `warmup_steps`, then constant, a linear decay to 0 at `total_steps`, or a half cosine to 0 (the
    formulas of transformers' get_*_schedule_with_warmup, so a teacher steps as it always has)."""
    if step < warmup_steps:
        return float(step) / float(max(1, warmup_steps))
    if schedule == "constant":
        return 1.0
    span = float(max(1, total_steps - warmup_steps))
    if schedule == "linear":
        return max(0.0, float(total_steps - step) / span)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(step - warmup_steps) / span)))


def make_optimizer(groups: list[dict], weight_decay: float, lr_schedule: str, warmup: float,
                   total_steps: int) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the parameter `groups` (each with its ``lr``; a ``name`` names its rate in reports) and
    its `lr_schedule` over `total_steps`, the first `warmup` of them (a fraction) warming up: every run
    kind's optimizer, stepped by `fit_tasks`."""
    optimizer = torch.optim.AdamW(groups, weight_decay=weight_decay)
    factor = functools.partial(lr_factor, schedule=lr_schedule, warmup_steps=int(warmup * total_steps),
                               total_steps=total_steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def runtime(precision_name: str | None = None, threads: int | None = None, progress: bool = True) -> Iterator[None]:
    """Run with this precision and torch thread count, then restore the process's settings (None: keep);
    progress bars drawn only if `progress` (`distill.progress.bars_shown`)."""
    saved_precision, saved_threads = precision.current(), torch.get_num_threads()
    if precision_name is not None:
        precision.set_precision(precision_name)
    if threads is not None:
        require_whole("threads", threads, high=MAX_THREADS)
        torch.set_num_threads(threads)
    try:
        with bars_shown(progress):
            yield
    finally:
        precision.set_precision(saved_precision)
        if torch.get_num_threads() != saved_threads:
            torch.set_num_threads(saved_threads)


def label_targets(model: torch.nn.Module, labels: Sequence, width: int | None) -> torch.Tensor:
    """Gold label indices: (batch,) or (batch, words) padded with IGNORE_INDEX; None = unlabeled."""
    hierarchy = model.hierarchy
    if width is None:
        return torch.tensor([IGNORE_INDEX if y is None else hierarchy.encode(y) for y in labels])
    targets = torch.full((len(labels), width), IGNORE_INDEX, dtype=torch.long)
    for row, tags in enumerate(labels):
        if tags is not None:
            targets[row, : len(tags)] = torch.tensor([hierarchy.encode(t) for t in tags])
    return targets


def training_batches(examples: Sequence, batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """Shuffled batches of similar-length examples: sort within pools of 50 batches, shuffle batches."""
    order = torch.randperm(len(examples), generator=generator).tolist()
    pool = batch_size * 50
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: example_length(examples[i]))
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    permutation = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in permutation]


@dataclass
class FitTask:
    """One task of a run: the model that scores it (a multi-task teacher's head), its loss, its data,
    the dev metric that scores it, its sampling weight (relative; see `epoch_batches`), and the
    factor on the shared parameters' learning rate for its steps (see `shared_rate`)."""

    model: torch.nn.Module
    objective: Objective
    train_examples: Sequence
    train_labels: Sequence
    dev_examples: Sequence
    dev_labels: Sequence
    select_metric: str
    weight: float = 1.0
    shared_lr_scale: float = 1.0


@contextlib.contextmanager
def shared_rate(optimizer: torch.optim.Optimizer, scale: float) -> Iterator[None]:
    """The learning rate of the optimizer's ``shared`` parameter groups times `scale` for one step:
    each head of a multi-task teacher moves the shared encoder at its own rate. The scheduled rate
    is restored afterwards, so the schedule and a resumed run's state are untouched."""
    shared = [group for group in optimizer.param_groups if group.get("shared")]
    rates = [group["lr"] for group in shared]
    for group in shared:
        group["lr"] *= scale
    try:
        yield
    finally:
        for group, rate in zip(shared, rates):
            group["lr"] = rate


def epoch_batches(tasks: dict[str, FitTask], batch_size: int, generator: torch.Generator) -> list[tuple[str, list[int]]]:
    """An epoch's (task, example indices) batches: each batch from one task.

    One task: its `training_batches`, drawing exactly what a single-task run always drew. Several:
    as many steps as all tasks have batches, each step's task drawn with probability proportional to
    its weight (seeded by `generator`); a task drawn more often than it has batches starts another
    shuffled pass over its data, one drawn less often leaves some unseen this epoch.
    """
    queues = {name: training_batches(task.train_examples, batch_size, generator) for name, task in tasks.items()}
    if len(tasks) == 1:
        [(name, batches)] = queues.items()
        return [(name, batch) for batch in batches]
    names = list(tasks)
    weights = torch.tensor([tasks[name].weight for name in names], dtype=torch.float64)
    steps = sum(len(batches) for batches in queues.values())
    order = torch.multinomial(weights, steps, replacement=True, generator=generator).tolist()
    used = dict.fromkeys(names, 0)
    drawn = []
    for name in (names[i] for i in order):
        if used[name] == len(queues[name]):
            queues[name] += training_batches(tasks[name].train_examples, batch_size, generator)
        drawn.append((name, queues[name][used[name]]))
        used[name] += 1
    return drawn


def dev_score(dev: dict, select: str, tasks: dict[str, FitTask]) -> float:
    """The number that picks the best epoch: `select` of the one task's metrics; with several tasks,
    the mean of their scores (``"mean"``) or one task's score (its name)."""
    if len(tasks) == 1:
        return dev[select]
    return dev["mean"] if select == "mean" else dev[select][tasks[select].select_metric]


def make_batch(model: torch.nn.Module, examples: Sequence, labels: Sequence | None, indices: list[int]) -> dict:
    """The batch of `examples` at positions `indices`: the model's inputs and mask, the label indices of `labels`
    (one per example; None, or a None among them: unlabeled) and which rows are labelled. Public, as a
    transformers `Trainer`'s data collator (docs/trainer.md): what does not fit is one `DistillError`."""
    if labels is None:
        labels = [None] * len(examples)
    if len(labels) != len(examples):
        raise DistillError(f"make_batch: {len(examples):,} examples and {len(labels):,} labels: give one label (or "
                           "None) per example, or labels=None for none")
    indices = example_positions(indices, len(examples), "given to make_batch").tolist()
    inputs, mask = model.prepare_on_device([examples[i] for i in indices])
    width = None if mask is None else mask.size(1)
    targets = label_targets(model, [labels[i] for i in indices], width).to(model.device)
    labelled = torch.tensor([labels[i] is not None for i in indices], device=model.device)
    return {"indices": indices, "inputs": inputs, "mask": mask, "targets": targets, "labelled": labelled}


def step_denominators(task: FitTask, batches: list[dict], counted: list[bool]) -> torch.Tensor:
    """Each loss term's denominator over every micro-batch of an accumulated step (and every rank), which
    each micro-batch's sum must be divided by before its backward pass: it is known only from the terms,
    so each micro-batch runs forward once more first, without gradients and in eval mode (no dropout: no
    random numbers drawn, so the run stays as seeded; a term's denominator counts what is scored, not how)."""
    model = task.model
    model.eval()
    try:
        with torch.no_grad():
            parts = []
            for batch, counts in zip(batches, counted):
                with precision.autocast(model.device):
                    logits = model(**batch["inputs"])
                parts.append((task.objective.terms(model, logits.float(), batch), counts))
    finally:
        model.train()
    return distributed.global_denominators(parts)


def accumulate_gradients(task: FitTask, indices: list[int], micro_batch: int,
                         step_model: torch.nn.Module | None = None, scaler: torch.amp.GradScaler | None = None,
                         epoch: int = 0) -> tuple[float, dict[str, torch.Tensor]]:
    """Add to the parameters' gradients those of the loss of the (global) batch `indices`, in micro-batches
    of `micro_batch` examples (each shared out to the ranks: `distributed.batch_share`), every term's sum
    divided by its denominator over the whole batch (`step_denominators`): the gradients of one batch of
    them all, to float noise. Returns the batch's loss (this rank's part) and each term's part by name
    (detached; a name given twice is numbered). `step_model`: how the forward pass calls `task.model`
    (DistributedDataParallel); `scaler`: fp16's gradient scaler."""
    step_model = step_model or task.model
    shares = [distributed.batch_share(indices[start:start + micro_batch])
              for start in range(0, len(indices), micro_batch)]
    batches = [make_batch(task.model, task.train_examples, task.train_labels, share) for share, _ in shares]
    denominators = step_denominators(task, batches, [counted for _, counted in shares]) if len(batches) > 1 else None
    total, parts = 0.0, {}
    for number, (batch, (_, counted)) in enumerate(zip(batches, shares), 1):
        # DDP averages gradients across ranks once, at the step's last micro-batch
        syncing = number == len(batches) or not hasattr(step_model, "no_sync")
        with contextlib.nullcontext() if syncing else step_model.no_sync():
            with precision.autocast(task.model.device):
                logits = step_model(**batch["inputs"])
            terms = task.objective.terms(task.model, logits.float(), batch)
            values = distributed.global_batch_terms(terms, counted, denominators)
            loss = sum(values)
            value = loss.item()
            if not math.isfinite(value):
                raise DistillError(f"loss became {value} at epoch {epoch}: lower the learning rate (or an "
                                   "extreme temperature, loss weight or class weight)")
            backward = loss * distributed.world_size()  # DDP averages gradients over the ranks
            (backward if scaler is None else scaler.scale(backward)).backward()
        total += value
        for name, part in zip(term_names(terms), values):
            parts[name] = parts.get(name, 0.0) + part.detach()
    return total, parts


def term_names(terms: Sequence[LossSum]) -> list[str]:
    """The terms' names, a name given twice numbered (``loss``, ``loss_2``), so that reports keep both."""
    names: list[str] = []
    for term in terms:
        name, number = term.name, 1
        while name in names:
            number += 1
            name = f"{term.name}_{number}"
        names.append(name)
    return names


def learning_rates(optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """The optimizer's current rates as reports name them: ``lr``, or one ``lr/NAME`` per named group."""
    groups = optimizer.param_groups
    if len(groups) == 1:
        return {"lr": groups[0]["lr"]}
    return {f"lr/{group.get('name', index)}": group["lr"] for index, group in enumerate(groups)}


def fit_tasks(model: torch.nn.Module, tasks: dict[str, FitTask], optimizer: torch.optim.Optimizer, scheduler,
              settings: FitSettings, save_best: Callable[[dict], None], log_path: str | Path | None = None,
              run: RunState | None = None, callbacks: Sequence = ()) -> dict:
    """Train for up to `settings.epochs`, evaluating on dev after each epoch.

    The best-on-dev model by `settings.select_metric` is handed to `save_best` (not the last one);
    training stops early after `patience` epochs without improvement in it. Returns the best
    epoch's record. Each optimizer step takes the gradients of `settings.grad_accumulation` batches
    (`accumulate_gradients`: as of one batch that many times larger), clips them to
    `settings.max_grad_norm` (0: no clipping), scales them under fp16 (`precision.grad_scaler`), then
    steps the `scheduler`. With `run`, the model, optimizer, scheduler, scaler, RNG streams and data
    order are saved after every epoch, and a resumed run continues from there exactly as if it had
    never stopped; the caller ends the run with `RunState.finish`. With several `tasks` (the heads of
    a multi-task teacher, each a view of `model`), each batch is one task's (`epoch_batches`), every
    task is scored on its dev data, and the best epoch is picked by `dev_score`. `callbacks`
    (`distill.callbacks.Callback`) hear of the run's steps and epochs, on rank 0 alone.
    """
    from distill.callbacks import CallbackList, EpochEnd, Step
    seed_everything(settings.seed)
    generator = torch.Generator().manual_seed(settings.seed)
    main = distributed.is_main()
    progress = settings.progress and main
    reports = CallbackList(callbacks)
    scaler = precision.grad_scaler(model.device)
    best, history, stale, first_epoch, step = None, [], 0, 1, 0
    saved = run.saved if run is not None else None
    best_print = saved.get("best_model") if saved is not None else None  # the folder's model as last saved
    improved_since = False
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        for name, task in tasks.items():
            task.objective.load_state_dict(saved.get("objectives", {}).get(name, {}))
        if scheduler is not None:
            scheduler.load_state_dict(saved["scheduler"])
        scaler.load_state_dict(saved.get("scaler", {}))
        restore_rng_state(saved["rng"], generator)
        best, history, stale = json.loads(saved["best"]), json.loads(saved["history"]), saved["stale"]
        first_epoch, step = len(history) + 1, saved.get("step", 0)
        reports.load_state_dict(json.loads(saved.get("callbacks", "{}")))
        if log_path is not None and main:
            write_text(log_path, "".join(json.dumps(record) + "\n" for record in history))
        if progress:
            progress_message(f"resuming after epoch {len(history)} (best so far: epoch {best['epoch']})")
    step_model = distributed.wrap_for_training(model)
    step_size = settings.batch_size * settings.grad_accumulation
    reports.on_train_begin({"epochs": settings.epochs, "first_epoch": first_epoch, "step": step, "tasks": list(tasks),
                            "steps_per_epoch": optimizer_steps([len(t.train_examples) for t in tasks.values()],
                                                               settings.batch_size, settings.grad_accumulation, 1),
                            "settings": {k: v for k, v in asdict(settings).items() if k != "progress"},
                            "directory": None if run is None else str(run.directory), "model": model})
    try:  # a run stopped by an error, Ctrl-C or SIGTERM is closed in every tracker that opened it
        for epoch in range(first_epoch, settings.epochs + 1):
            if stale >= settings.patience:
                break
            model.train()
            batches = epoch_batches(tasks, step_size, generator)
            seen = sum(len(indices) for _, indices in batches)
            bar = progress_bar(total=seen, desc=f"epoch {epoch}/{settings.epochs}", unit="ex", disable=not progress)
            started, total_loss, steps = time.perf_counter(), 0.0, 0
            for name, indices in batches:
                task = tasks[name]
                optimizer.zero_grad(set_to_none=True)
                loss, terms = accumulate_gradients(task, indices, settings.batch_size,
                                                   step_model if task.model is model else None, scaler, epoch)
                rates = learning_rates(optimizer)  # the rates this step takes, before the scheduler moves them
                if settings.max_grad_norm > 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_([*model.parameters(), *task.objective.parameters()],
                                                   settings.max_grad_norm)
                with shared_rate(optimizer, task.shared_lr_scale):
                    scaler.step(optimizer)
                scaler.update()
                if scheduler is not None:
                    scheduler.step()
                total_loss, steps, step = total_loss + loss, steps + 1, step + 1
                bar.update(len(indices))
                # rank 0's estimate; shown at the bar's next redraw, not as a redraw of its own
                bar.set_postfix(loss=f"{total_loss * distributed.world_size() / steps:.4f}", refresh=False)
                if reports:
                    values = distributed.all_reduce_sum(torch.stack(list(terms.values()))).tolist()
                    losses = {**dict(zip(terms, values)), "total": sum(values)}
                    reports.on_step(Step(step, epoch, losses, rates, name))
            bar.close()
            seconds = time.perf_counter() - started
            total_loss = float(distributed.all_reduce_sum(torch.tensor(total_loss, dtype=torch.float64)))
            train_loss = total_loss / max(steps, 1)
            dev = {name: evaluate(task.model, task.dev_examples, task.dev_labels, settings.eval_batch_size)
                   for name, task in tasks.items()}
            if len(tasks) == 1:
                [dev] = dev.values()
            else:
                dev["mean"] = sum(dev[name][task.select_metric] for name, task in tasks.items()) / len(tasks)
            record = {"epoch": epoch, "train_loss": train_loss, "epoch_seconds": round(seconds, 2),
                      "train_examples_per_second": round(seen / seconds, 1), "dev": dev}
            if len(tasks) > 1:
                record["task_batches"] = {name: sum(drawn == name for drawn, _ in batches) for name in tasks}
            # every rank's random streams (a collective: outside the block below, where SIGTERM is held)
            streams = rng_states(generator) if run is not None else None
            with uninterrupted():  # the log, the best model and the resume state agree after any interrupt
                history.append(record)
                if log_path is not None and main:
                    with appending(log_path) as log:
                        log.write(json.dumps(record) + "\n")
                score = dev_score(dev, settings.select_metric, tasks)
                improved = best is None or score > dev_score(best["dev"], settings.select_metric, tasks)
                if progress:
                    progress_message(f"epoch {epoch}: loss {record['train_loss']:.4f}  dev {settings.select_metric} "
                                     f"{score:.4f}{'  (best)' if improved else ''}  {seconds:.1f}s")
                ended = EpochEnd(epoch, step, train_loss, dev, settings.select_metric, score, improved)
                reports.on_epoch_end(ended)
                if improved:
                    best, stale, improved_since = record, 0, True
                    if main:
                        save_best(record)
                        best_print = run.model_print() if run is not None else None
                        reports.on_best_saved(ended)
                else:
                    stale += 1
                if run is not None and main:
                    save_sealed(run.path, {
                        "signature": json.dumps(run.signature, sort_keys=True), "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "objectives": {name: task.objective.state_dict() for name, task in tasks.items()},
                        "scheduler": scheduler.state_dict() if scheduler is not None else {},
                        "scaler": scaler.state_dict(), "step": step,
                        "rng": streams, "best": json.dumps(best), "history": json.dumps(history),
                        "stale": stale, "callbacks": json.dumps(reports.state_dict()), "best_model": best_print})
        if saved is not None and not improved_since:  # it ends on the model in the folder: the best epoch's?
            run.check_best_kept(best, best_print)
        distributed.barrier()  # no rank returns before rank 0 has saved
        result = {"best": best, "history": history}
        reports.on_train_end({**result, "steps": step})
    except BaseException as err:
        reports.on_train_stop(err)
        raise
    return result


@contextlib.contextmanager
def training_run(output: str | Path, resume: bool, overwrite: bool, inputs: dict[str, str | None],
                 protected: Sequence[str] = (), **settings) -> Iterator[RunState]:
    """The run's output directory (checked, locked, cleaned up on failure: `distill.outputs`) and its
    resume bookkeeping. `protected`: directories of models given in memory, which the output must not
    replace or lie in, as it must not for `inputs`.

    The resume signature holds every setting that changes the result, the runtime (precision,
    threads, processes) and a content fingerprint of every input, so a resume after any of them
    changed is refused, never continued with a mix.
    """
    from distill.outputs import model_output
    with model_output(output, [*inputs.values(), *protected], overwrite, resume) as directory:
        signature = {k: asdict(v) if is_dataclass(v) else v for k, v in settings.items()}
        signature.update(inputs=input_fingerprints(inputs), runtime=runtime_settings())
        yield RunState(directory, signature, resume)
