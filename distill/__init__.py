"""distill: knowledge distillation for NLP, from a transformer teacher into small fast students.

The public API, importable from here::

    from distill import Teacher, Distiller, TeacherStudentDistill, register_student

Names load on first use (PEP 562), so ``import distill`` stays light: no `datasets`, pandas,
scikit-learn or CLI until something needs them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "distill.models": ["load_model"],
    "distill.models.base": ["LabelModel"],
    "distill.models.teacher": ["Teacher", "TeacherConfig", "TeacherTraining"],
    "distill.models.multitask": ["MultiTaskTeacher", "TaskSampling"],
    "distill.models.hub_teacher": ["TransformersTeacher"],
    "distill.models.student_config": ["StudentConfig", "WordStudentConfig", "ClassifierConfig", "TaggerConfig",
                                      "LSTMClassifierConfig", "CNNClassifierConfig", "LSTMTaggerConfig",
                                      "IDCNNTaggerConfig", "option"],
    "distill.models.students": ["StudentModel", "LSTMClassifier", "CNNClassifier", "LSTMTagger", "IDCNNTagger"],
    "distill.models.zero_shot": ["ZeroShotConfig", "ZeroShotTeacher"],
    "distill.soft_labels": ["SoftLabels"],
    "distill.zero_shot": ["zero_shot_teacher"],
    "distill.models.transformer_student": ["TransformerStudent", "TransformerStudentConfig", "TransformerTagger"],
    "distill.models.registry": ["register_student", "student_config", "students"],
    "distill.losses": ["IGNORE_INDEX", "LossSum", "register_kd_loss"],
    "distill.distillation": ["TeacherStudentDistill"],
    "distill.loss_settings": ["LossSettings"],
    "distill.training": ["TrainSettings"],
    "distill.distiller": ["Distiller", "DistillSettings"],
    "distill.runtime": ["Output", "Runtime"],
    "distill.trainers": ["TaskData", "TrainResult", "train_multitask_teacher",
                         "train_student", "train_teacher"],
    "distill.data": ["DataOptions"],
    "distill.labels": ["LabelHierarchy"],
    "distill.inference": ["evaluate", "predict_logits", "prediction_records"],
    "distill.cache": ["LogitStore", "teacher_logits"],
    "distill.export": ["export_model"],
    "distill.student_search": ["SearchSettings", "search"],
    "distill.hf_model": ["to_transformers"],
    "distill.errors": ["DataError", "DistillError"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'distill' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
