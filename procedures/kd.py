"""Distill a teacher into a student: labelled data plus optional unlabelled text."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from distill.cache import cached_teacher_logits
from distill.data import read_unlabelled
from distill.distillation import (DEFAULT_DISTILL_WEIGHT, DEFAULT_KD_LOSS, DEFAULT_STUDENT_WEIGHT,
                                  DEFAULT_TEMPERATURE, CachedTeacherLogits, OnlineTeacherLogits,
                                  TeacherStudentDistill)
from distill.errors import DistillError
from distill.models import load_model
from distill.models.students import STUDENT_TASKS, StudentConfig
from procedures.common import DataOptions, training_run
from procedures.student import new_student, read_student_data, train_student_model


@dataclass
class KDOptions:
    """The distillation knobs; defaults are shared with `TeacherStudentDistill` and the CLI."""

    kd_loss: str = DEFAULT_KD_LOSS
    temperature: float = DEFAULT_TEMPERATURE
    student_weight: float = DEFAULT_STUDENT_WEIGHT
    distill_weight: float = DEFAULT_DISTILL_WEIGHT
    min_confidence: float = 0.0
    unlabeled_ratio: float | None = None
    online_teacher: bool = False
    cache_dir: str | None = None
    teacher_batch_size: int = 64


def train_kd(teacher_dir: str, config: StudentConfig, train_path: str, dev_path: str, output: str,
             data: DataOptions = DataOptions(), unlabeled_path: str | None = None,
             options: KDOptions = KDOptions(), class_weights=None, teacher_embeddings: bool = True,
             progress: bool = True, device: str = "auto", resume: bool = False, overwrite: bool = False) -> dict:
    """Train `config`'s student against the teacher's logits; returns the run summary."""
    inputs = {"teacher": teacher_dir, "train": train_path, "dev": dev_path, "unlabeled": unlabeled_path}
    with training_run(output, resume, overwrite, inputs, command="kd", config=config, data=data, kd=options,
                      class_weights=class_weights, embeddings_from_teacher=teacher_embeddings) as run:
        teacher = load_model(teacher_dir, expect="teacher", device=device)
        task = STUDENT_TASKS.get(config.model)
        if task is not None and task != teacher.task:
            raise DistillError(f"student {config.model!r} does {task} but teacher {teacher_dir} does {teacher.task}")
        init = None
        if teacher_embeddings:
            from distill.embedding_init import init_from_teacher
            init = lambda model: init_from_teacher(model, teacher)  # noqa: E731
        hierarchy, (train_x, train_y), (dev_x, dev_y) = read_student_data(config, train_path, dev_path, data)
        teacher.hierarchy.check_same(hierarchy, f"teacher {teacher_dir} vs training data {train_path}")
        unlabelled: list = []
        if unlabeled_path:
            column = "text" if task == "classification" else "tokens"
            unlabelled = list(read_unlabelled(unlabeled_path, task)[column])
            if options.unlabeled_ratio is not None:
                keep = int(options.unlabeled_ratio * len(train_x))
                unlabelled = random.Random(config.seed).sample(unlabelled, min(keep, len(unlabelled)))
        # the vocabulary covers the whole transfer set: words seen only in unlabelled text are not <unk>
        examples = list(train_x) + unlabelled
        model = new_student(config, teacher.hierarchy, examples, init, device)
        labels = list(train_y) + [None] * len(unlabelled)
        started = time.perf_counter()
        cache_info = {}
        if options.online_teacher:
            source = OnlineTeacherLogits(teacher, examples)
        else:
            results, path, hit = cached_teacher_logits(teacher, teacher_dir, examples, options.cache_dir,
                                                       options.teacher_batch_size, progress)
            source = CachedTeacherLogits(results)
            cache_info = {"cache_file": str(path), "cache_hit": hit}
            del teacher
        teacher_seconds = time.perf_counter() - started
        objective = TeacherStudentDistill(source, options.kd_loss, options.temperature, options.student_weight,
                                          options.distill_weight, model.hierarchy.class_weights(class_weights),
                                          options.min_confidence)
        extra = {"teacher": str(teacher_dir), "kd": vars(options), "unlabelled_examples": len(unlabelled),
                 "embeddings_from_teacher": teacher_embeddings,
                 "teacher_logits_seconds": round(teacher_seconds, 2), **cache_info}
        return train_student_model(model, objective, examples, labels, dev_x, dev_y, run, progress, extra)
