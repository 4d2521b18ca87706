"""Train the DistilBERT + Linear teacher."""

from __future__ import annotations

import torch
from transformers import get_linear_schedule_with_warmup

from distill import distributed
from distill.io import write_json
from distill.models.base import pick_device
from distill.models.teacher import TeacherConfig, TransformerClassifier
from distill.training import FitSettings, SupervisedObjective, fit, seed_everything
from procedures.common import (SUMMARY_FILE, DataOptions, build_hierarchy, check_labels_known, read_split,
                               training_run)


def teacher_optimizer(model: TransformerClassifier, config: TeacherConfig, total_steps: int):
    """AdamW with two learning rates (encoder, head) and a linear warm-up then decay."""
    head = {id(p) for p in model.head_parameters()}
    groups = [
        {"params": [p for p in model.parameters() if id(p) not in head], "lr": config.encoder_lr},
        {"params": model.head_parameters(), "lr": config.classifier_lr},
    ]
    optimizer = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup * total_steps), total_steps)
    return optimizer, scheduler


def train_teacher(train_path: str, dev_path: str, output: str, config: TeacherConfig,
                  data: DataOptions = DataOptions(), progress: bool = True, device: str = "auto",
                  resume: bool = False, overwrite: bool = False) -> dict:
    """Fine-tune the teacher; the best-on-dev checkpoint is written to `output`."""
    with training_run(output, resume, overwrite, {"train": train_path, "dev": dev_path}, command="teacher",
                      config=config, data=data) as run:
        seed_everything(config.seed)
        train_x, train_y = read_split(train_path, config.task, data)
        dev_x, dev_y = read_split(dev_path, config.task, data)
        hierarchy = build_hierarchy(config.task, train_y, data, train_path)
        check_labels_known(dev_path, hierarchy, config.task, dev_y)
        weights = hierarchy.class_weights(config.class_weights)
        model = TransformerClassifier.from_pretrained_encoder(config, hierarchy).to(pick_device(device))
        steps = -(-len(train_x) // config.batch_size) * config.epochs
        optimizer, scheduler = teacher_optimizer(model, config, steps)
        output_dir = run.directory
        log = output_dir / "metrics.jsonl"
        log.unlink(missing_ok=True)
        settings = FitSettings(config.epochs, config.batch_size, config.patience, config.seed, progress=progress)
        result = fit(model, SupervisedObjective(weights), optimizer, scheduler, train_x, train_y, dev_x, dev_y,
                     settings, lambda record: model.save(output_dir, optimizer.state_dict()), log, run)
        summary = {"kind": "teacher", "parameters": model.parameter_count(), "train_examples": len(train_x),
                   "labels": hierarchy.labels, **result}
        if distributed.is_main():
            write_json(output_dir / SUMMARY_FILE, summary)
        return summary
