"""The multi-task teacher: one shared encoder, one head per named task.

Each head is a single-task `Teacher` over the shared encoder (`MultiTaskTeacher.head`): it trains,
evaluates, predicts and is distilled exactly as a teacher of its own, while a corpus is encoded once
for all heads (`forward` returns every head's logits). The checkpoint keeps the teacher schema
(docs/models/teacher.md) with its per-task parts keyed by head name:

* ``config``: ``{"heads": {name: a single-task teacher's config}, "sampling": ...}``;
* ``hierarchy``: ``{name: labels}``; ``classifier_state_dict``: ``{name: that head's weights}``;
* ``encoder_state_dict`` and ``optimizer_state_dict``: one each, shared.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from distill.cache import LogitStore, example_key
from distill.data import DataOptions
from distill.settings import named, setting
from distill.errors import DistillError, option, require_number
from distill.inference import ExampleLogits, decode_labels, prediction_records, readable_examples, score_examples
from distill.io import load_checkpoint, save_checkpoint
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel, ReadsSubWords
from distill.models.card import MULTITASK_KIND, card_version, folder_files, write_model_card
from distill.models.teacher import (CHECKPOINT, ENCODER_DIR, Teacher, TeacherConfig, TeacherTraining,
                                    load_encoder_folder, place_in_grid, pool, save_encoder_folder,
                                    split_checkpoint_config)

KIND = MULTITASK_KIND
SAMPLING = ("proportional", "temperature", "uniform")
SHARED_CONFIG = ("encoder", "max_length", "long_inputs", "window_overlap", "max_windows")  # one input for every head


@dataclass
class TaskSampling:
    """Which task each training batch comes from, and which dev score picks the best epoch.

    A task is drawn with probability proportional to its training examples (``proportional``), to
    their number to the power 1/`temperature` (``temperature``: > 1 flattens the mix towards small
    tasks), or equally (``uniform``). `select` is ``mean`` (the mean of the heads' dev scores, each
    in its own selection metric) or a head's name (that head's score alone).
    """

    sampling: str = setting("proportional", option="--task-sampling", choices=SAMPLING,
                            help="Multi-task: each batch's task drawn in proportion to its training examples, to their "
                                 "number to the power 1/--task-temperature, or uniformly.")
    temperature: float = setting(2.0, option="--task-temperature", low=0, low_open=True,
                                 help="Multi-task: the temperature of --task-sampling temperature (> 1 favours small "
                                      "tasks).")
    select: str = setting("mean", option="--select-task", help="Multi-task: the dev score that picks the best epoch: "
                          "mean (of the heads' scores) or a head name.")

    def check(self, names: Sequence[str]) -> None:
        if self.sampling not in SAMPLING:
            raise DistillError(f"unknown task sampling {self.sampling!r}: choose one of {', '.join(SAMPLING)}")
        require_number("task temperature", self.temperature, 0, math.inf, low_open=True)  # as --task-temperature
        if self.select != "mean" and self.select not in names:
            raise DistillError(f"cannot select on {self.select!r}: give mean or a head name ({', '.join(names)})")

    def weights(self, sizes: dict[str, int]) -> dict[str, float]:
        """Each task's probability of supplying a batch, from its number of training examples."""
        power = {"proportional": 1.0, "temperature": 1.0 / self.temperature, "uniform": 0.0}[self.sampling]
        raw = {name: float(size) ** power for name, size in sizes.items()}
        total = sum(raw.values())
        return {name: value / total for name, value in raw.items()}


def check_head_names(names: Sequence[str]) -> None:
    """Two or more distinct names fit for options, file names and metrics records."""
    if len(names) < 2:
        raise DistillError("a multi-task teacher needs at least two tasks; train a single task with "
                           f"{named(TeacherConfig, 'task', 'train_teacher')}")
    duplicate = next((n for n in names if list(names).count(n) > 1), None)
    if duplicate is not None:
        raise DistillError(f"task name {duplicate!r} is given twice; each head needs its own name")
    for name in names:
        # ASCII: a name is part of file names (eval_metrics.NAME.json), where Unicode has two spellings of é
        if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name) or name.lower() == "mean":
            raise DistillError(f"task name {name!r}: use ASCII letters, digits, - and _ (and not 'mean')")
    folded = [name.lower() for name in names]
    twin = next((n for n, f in zip(names, folded) if folded.count(f) > 1), None)
    if twin is not None:
        others = [n for n, f in zip(names, folded) if f == twin.lower() and n != twin]
        raise DistillError(f"task names {twin!r} and {others[0]!r} differ only in case: they name files, which "
                           "some file systems do not tell apart")


class MultiTaskTeacher(ReadsSubWords, LabelModel):
    """One encoder, one head per task. `head(name)` is that task's teacher (sharing the encoder);
    `forward` runs every head on one encoder pass and returns their logits by name."""

    kind = KIND

    def __init__(self, heads: dict[str, tuple[TeacherConfig, LabelHierarchy, TeacherTraining]], encoder: nn.Module,
                 tokenizer: PreTrainedTokenizerBase, sampling: TaskSampling | None = None):
        super().__init__()
        check_head_names(list(heads))
        self.sampling = sampling or TaskSampling()
        self.sampling.check(list(heads))
        self.encoder, self.tokenizer = encoder, tokenizer
        # the views are single-task teachers over the one encoder; this model owns their head layers
        self._views = {name: Teacher(config, hierarchy, encoder, tokenizer, training)
                       for name, (config, hierarchy, training) in heads.items()}
        first = next(iter(self._views.values())).config
        for name, view in self._views.items():
            for key in SHARED_CONFIG:
                if getattr(view.config, key) != getattr(first, key):
                    raise DistillError(f"head {name}: {key} {getattr(view.config, key)!r} differs from the other "
                                       f"heads' {getattr(first, key)!r}; the heads share one encoder")
        self.heads = nn.ModuleDict({name: nn.ModuleDict({k: m for k, m in view.named_children() if k != "encoder"})
                                    for name, view in self._views.items()})

    @classmethod
    def from_encoder(cls, heads: dict[str, tuple[TeacherConfig, LabelHierarchy, TeacherTraining]],
                     sampling: TaskSampling | None = None) -> "MultiTaskTeacher":
        """A multi-task teacher to fine-tune: the pretrained encoder and a fresh head per task."""
        # a classification head's settings when there is one: the shared long-input settings are checked
        # for what reads text (a tagging head always reads words in windows), whatever the order of the heads
        config, hierarchy, _ = next((head for head in heads.values() if head[0].task == "classification"),
                                    next(iter(heads.values())))
        loaded = Teacher.from_encoder(config, hierarchy)  # the pretrained encoder, its max length checked
        return cls(heads, loaded.encoder, loaded.tokenizer, sampling)

    @property
    def names(self) -> list[str]:
        return list(self._views)

    @property
    def task(self) -> str:
        """What an input is: token lists when any head tags (the classification heads read the words
        joined), else texts."""
        return "tagging" if any(view.task == "tagging" for view in self._views.values()) else "classification"

    def head(self, name: str) -> Teacher:
        """The teacher of head `name`: it shares this model's encoder and head layers."""
        if name not in self._views:
            raise DistillError(f"no head {name!r}: this teacher's heads are {', '.join(self.names)}")
        return self._views[name]

    def train(self, mode: bool = True) -> "MultiTaskTeacher":
        super().train(mode)
        for view in self._views.values():
            view.training = mode  # the views' layers are this model's; their own flag follows
        return self

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.heads.parameters())

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """One encoder input for all heads: word windows when any head tags, else the texts."""
        reader = next((v for v in self._views.values() if v.task == self.task))
        return reader.prepare(examples)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                word_positions: torch.Tensor | None = None, word_slots: torch.Tensor | None = None,
                grid_shape: torch.Tensor | None = None, window_weights: torch.Tensor | None = None
                ) -> dict[str, torch.Tensor]:
        """Every head's logits from one encoder pass. Over word windows, a classification head pools
        each window and averages the windows of an example (one window: the same as the head alone);
        texts read in windows (`--long-inputs windows`) are averaged by `window_weights`, as by one head."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = {}
        for name, view in self._views.items():
            if view.task == "tagging":
                words = hidden.gather(1, word_positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
                logits[name] = place_in_grid(view.head_logits(words), word_slots, grid_shape)
                continue
            features = pool(hidden, attention_mask, view.config.pooling)
            if word_slots is not None:
                features = mean_per_example(features, word_slots, grid_shape)
            elif window_weights is not None:
                features = window_weights.to(features.dtype) @ features
            logits[name] = view.head_logits(features)
        return logits

    def head_fingerprint(self, name: str) -> str:
        """What keys head `name`'s cached logits from a one-pass run: the head's own fingerprint when
        it reads its input as it does alone, else one of its own (a classification head reading words)."""
        fingerprint = self.head(name).fingerprint()
        if self.head(name).task == self.task:
            return fingerprint
        return hashlib.sha256(f"{fingerprint}:words".encode()).hexdigest()[:40]

    def predict(self, examples: Sequence, batch_size: int = 64, data: DataOptions = DataOptions()) -> dict[str, list]:
        """Every head's labels for `examples` (token lists when a head tags, else texts; or a table, whose
        column `data` names), by name."""
        examples = readable_examples(self, examples, data)  # a text given to a tagging head would be read as characters
        if not examples:
            return {name: [] for name in self.names}
        results = predict_heads(self, examples, batch_size)
        return {name: decode_labels(self.head(name), results[name]) for name in self.names}

    def checkpoint(self, optimizer_state: dict | None = None) -> dict:
        """The teacher checkpoint schema, its per-task parts keyed by head name (module docstring)."""
        views = self._views.items()
        return {"config": {"heads": {name: view.checkpoint()["config"] for name, view in views},
                           **asdict(self.sampling)},
                "hierarchy": {name: view.hierarchy.to_dict() for name, view in views},
                "encoder_state_dict": self.encoder.state_dict(),
                "classifier_state_dict": {name: view.head_state_dict() for name, view in views},
                "optimizer_state_dict": optimizer_state or {}}

    def write_files(self, directory: Path, optimizer_state: dict | None = None) -> None:
        save_encoder_folder(directory, self.encoder, self.tokenizer)
        save_checkpoint(directory / CHECKPOINT, self.checkpoint(optimizer_state))
        write_model_card(directory, {"kind": KIND, "model": type(self).__name__, "task": self.task,
                                     "heads": self.card_heads()},
                         [CHECKPOINT, *folder_files(directory, ENCODER_DIR)], self.card_about())

    def card_heads(self) -> dict[str, dict]:
        """What the model card records of each head, its task and labels: written with the model, and checked
        against the loaded model (`distill.models.load_model`), as the card holds no checksum of itself."""
        return {name: {"task": view.task, "labels": list(view.hierarchy.labels)} for name, view in self._views.items()}

    def card_about(self) -> dict:
        return {**super().card_about(), "base_model": next(iter(self._views.values())).config.encoder}

    @classmethod
    def from_checkpoint(cls, directory: str | Path, card: dict) -> "MultiTaskTeacher":
        directory = Path(directory)
        checkpoint = load_checkpoint(directory / CHECKPOINT)
        config = checkpoint.get("config", {})
        heads = config.get("heads") if isinstance(config, dict) else None
        if not isinstance(heads, dict) or set(heads) != set(checkpoint.get("hierarchy", {})) \
                or set(heads) != set(checkpoint.get("classifier_state_dict", {})):
            raise DistillError(f"{directory / CHECKPOINT}: not a multi-task teacher checkpoint (heads, labels "
                               "and head weights do not match)")
        where = str(directory / CHECKPOINT)
        parts = {name: split_checkpoint_config(settings, where, card_version(card)) for name, settings in heads.items()}
        unknown = sorted(set(config) - {"heads"} - {f.name for f in fields(TaskSampling)})
        if unknown:
            raise DistillError(f"{where}: unknown teacher setting(s) {', '.join(unknown)}")
        sampling = TaskSampling(**{k: v for k, v in config.items() if k != "heads"})
        encoder, tokenizer = load_encoder_folder(directory)
        model = cls({name: (config_, LabelHierarchy.from_dict(checkpoint["hierarchy"][name]), training)
                     for name, (config_, training) in parts.items()}, encoder, tokenizer, sampling)
        try:
            model.encoder.load_state_dict(checkpoint["encoder_state_dict"])
            for name, state in checkpoint["classifier_state_dict"].items():
                model.heads[name].load_state_dict(state)
        except RuntimeError as err:
            raise DistillError(f"{directory}: weights do not fit the model ({str(err).splitlines()[0]})") from None
        model.eval()
        return model


def mean_per_example(features: torch.Tensor, word_slots: torch.Tensor, grid_shape: torch.Tensor) -> torch.Tensor:
    """(examples, hidden): the mean of each example's window features. A window's example is that of
    its first word slot; a window without words (an example with no sub-token) follows the one before."""
    width = int(grid_shape[1])
    owners, last = [], -1
    for first in word_slots[:, 0].tolist():
        last = first // width if first >= 0 else last + 1
        owners.append(last)
    index = torch.tensor(owners, device=features.device)
    sums = features.new_zeros((int(grid_shape[0]), features.size(-1))).index_add_(0, index, features)
    counts = torch.bincount(index, minlength=int(grid_shape[0])).clamp_min(1).unsqueeze(-1)
    return sums / counts.to(features.dtype)


def predict_heads(model: MultiTaskTeacher, examples: Sequence, batch_size: int = 64,
                  progress: bool = False) -> dict[str, ExampleLogits]:
    """Every head's logits for `examples` from one encoder pass per batch, in input order."""
    per_example = score_examples(model, examples, batch_size, progress, "all heads")
    return {name: ExampleLogits.from_examples([row[name] for row in per_example]) for name in model.names}


def with_head(model: LabelModel, head: str | None, where: str) -> LabelModel:
    """`model`, or head `head` of it (a multi-task teacher; without `head`: all its heads)."""
    if head is None:
        return model
    if not isinstance(model, MultiTaskTeacher):
        raise DistillError(f"{where}: {option(f'--head {head}', f'head={head!r}')}: not a multi-task teacher, it has "
                           "no heads")
    return model.head(head)


def all_head_logits(model: MultiTaskTeacher, examples: Sequence, stores: dict[str, LogitStore] | None,
                    batch_size: int = 64) -> tuple[dict[str, ExampleLogits], int]:
    """Every head's logits for `examples`, in order, and how many examples came wholly from the cache.

    An example any head's store lacks goes through the encoder once, for all heads; each head's
    logits go to that head's store (`head_fingerprint` names it)."""
    keys = [example_key(example) for example in examples]
    found = {name: stores[name].lookup(set(keys)) if stores else {} for name in model.names}
    missing: dict[bytes, int] = {}
    for index, key in enumerate(keys):
        if any(key not in found[name] for name in model.names):
            missing.setdefault(key, index)
    hits = sum(key not in missing for key in keys)
    if missing:
        computed = predict_heads(model, [examples[index] for index in missing.values()], batch_size)
        for name, results in computed.items():
            if stores:
                stores[name].add(list(missing), results)
            found[name].update(zip(missing, (results.example(row) for row in range(len(missing)))))
    return {name: ExampleLogits.from_examples([found[name][key] for key in keys]) for name in model.names}, hits


def head_records(model: MultiTaskTeacher, examples: Sequence, results: dict[str, ExampleLogits],
                 with_logits: bool = False, exact: bool = False) -> list[dict]:
    """One JSON-able record per example: its text (and tokens when a head tags), each head's
    prediction record under ``heads``, and ``confidence``, the lowest of the heads'; confidences
    rounded as `prediction_records` rounds them unless `exact` (a filter compares the exact ones)."""
    per_head = {name: list(prediction_records(model.head(name), list(examples), with_logits=with_logits,
                                              results=results[name], exact=exact)) for name in model.names}
    records = []
    for index, example in enumerate(examples):
        heads = {name: {k: v for k, v in rows[index].items() if k not in ("text", "tokens")}
                 for name, rows in per_head.items()}
        shown = {"text": example} if model.task == "classification" else {"text": " ".join(example),
                                                                         "tokens": list(example)}
        records.append({**shown, "heads": heads, "confidence": min(h["confidence"] for h in heads.values())})
    return records


def single_teacher(model: LabelModel, head: str | None, where: str) -> LabelModel:
    """The one teacher a student learns from: `model`, or its head `head`, which a multi-task teacher needs."""
    if isinstance(model, MultiTaskTeacher) and head is None:
        raise DistillError(f"{where}: is a multi-task teacher: name the head to distil with "
                           f"{option('--head', 'head=')} (one of {', '.join(model.names)})")
    return with_head(model, head, where)
