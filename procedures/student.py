"""Train a student without a teacher: the honest baseline that distillation must beat."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch

from distill import distributed
from distill.errors import DistillError
from distill.io import write_json
from distill.models.base import pick_device
from distill.models.students import STUDENT_TASKS, StudentConfig, StudentModel, build_student
from distill.training import FitSettings, Objective, RunState, SupervisedObjective, fit, seed_everything
from procedures.common import (SUMMARY_FILE, DataOptions, build_hierarchy, check_labels_known, read_split,
                               training_run)


def model_size_bytes(directory: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(directory).iterdir() if f.is_file() and f.suffix != ".jsonl")


def train_student_model(model: StudentModel, objective: Objective, train_x: list, train_y: list,
                        dev_x: list, dev_y: list, run: RunState, progress: bool = True,
                        extra_summary: dict | None = None) -> dict:
    """The student half of `student` and `kd` runs: Adam, the shared loop, best-on-dev saved."""
    config = model.config
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    output_dir = run.directory
    log = output_dir / "metrics.jsonl"
    log.unlink(missing_ok=True)
    settings = FitSettings(config.epochs, config.batch_size, config.patience, config.seed, progress=progress)
    result = fit(model, objective, optimizer, None, train_x, train_y, dev_x, dev_y, settings,
                 lambda record: model.save(output_dir), log, run)
    summary = {"kind": "student", "model": config.model, "parameters": model.parameter_count(),
               "size_bytes": model_size_bytes(output_dir), "train_examples": len(train_x),
               **(extra_summary or {}), **result}
    if distributed.is_main():
        write_json(output_dir / SUMMARY_FILE, summary)
    return summary


def read_student_data(config: StudentConfig, train_path: str, dev_path: str, data: DataOptions):
    """The student's task, label set, and (examples, labels) of its train and dev files."""
    if config.model not in STUDENT_TASKS:
        raise DistillError(f"unknown student model {config.model!r}: choose one of {', '.join(STUDENT_TASKS)}")
    task = STUDENT_TASKS[config.model]
    train_x, train_y = read_split(train_path, task, data)
    dev_x, dev_y = read_split(dev_path, task, data)
    hierarchy = build_hierarchy(task, train_y, data, train_path)
    check_labels_known(dev_path, hierarchy, task, dev_y)
    return hierarchy, (train_x, train_y), (dev_x, dev_y)


def new_student(config: StudentConfig, hierarchy, vocabulary_examples: Sequence,
                init_embeddings: Callable[[StudentModel], None] | None = None, device: str = "auto") -> StudentModel:
    """A seeded fresh student whose vocabularies cover every example it will train on.

    `kd` passes its whole transfer set (labelled and unlabelled), so words seen only in
    unlabelled text get their own embedding (and the teacher's, with `init_embeddings`).
    """
    seed_everything(config.seed)
    model = build_student(config, hierarchy, vocabulary_examples)
    if init_embeddings is not None:
        init_embeddings(model)
    return model.to(pick_device(device))


def train_student(config: StudentConfig, train_path: str, dev_path: str, output: str,
                  data: DataOptions = DataOptions(), class_weights=None, teacher_embeddings: str | None = None,
                  progress: bool = True, device: str = "auto", resume: bool = False,
                  overwrite: bool = False) -> dict:
    """Train a student on gold labels only."""
    inputs = {"train": train_path, "dev": dev_path, "embeddings_from_teacher": teacher_embeddings}
    with training_run(output, resume, overwrite, inputs, command="student", config=config, data=data,
                      class_weights=class_weights) as run:
        init = None
        if teacher_embeddings:
            from distill.embedding_init import init_from_teacher
            from distill.models import load_model
            teacher = load_model(teacher_embeddings, expect="teacher")
            init = lambda model: init_from_teacher(model, teacher)  # noqa: E731
        hierarchy, (train_x, train_y), (dev_x, dev_y) = read_student_data(config, train_path, dev_path, data)
        model = new_student(config, hierarchy, train_x, init, device)
        objective = SupervisedObjective(model.hierarchy.class_weights(class_weights))
        return train_student_model(model, objective, train_x, train_y, dev_x, dev_y, run, progress,
                                   {"embeddings_from_teacher": teacher_embeddings})
