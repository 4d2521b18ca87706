"""`LossSettings`: the knobs of a kd run's loss as one settings group (`distill.settings`), which the command line,
a run's ``run_config.yaml`` and the API read alike; `LossSettings.loss` builds the `TeacherStudentDistill` they
describe, whose constructor checks them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from distill.distillation import (DEFAULT_DISTILL_WEIGHT, DEFAULT_KD_LOSS, DEFAULT_STUDENT_WEIGHT,
                                  DEFAULT_TEMPERATURE, TEACHER_MISTAKES, TeacherStudentDistill)
from distill.losses import KD_LOSSES
from distill.settings import setting


@dataclass
class LossSettings:
    """loss = w_s * NLL + w_d * distill(student, teacher) (+ w_h, w_a, w_c * the layer terms); see
    `TeacherStudentDistill` for each setting."""

    kd_loss: str = setting(DEFAULT_KD_LOSS, choices=lambda: list(KD_LOSSES),
                           help="kl: T^2 * KL(teacher || student) at temperature T; mse: MSE between raw logits; or a "
                                "loss registered with distill.losses.register_kd_loss.")
    temperature: float | None = setting(None, low=0, low_open=True, cli_default=DEFAULT_TEMPERATURE,
                                        help="Softening temperature T for kl (not for mse, which compares raw "
                                             "logits).")
    student_weight: float = setting(DEFAULT_STUDENT_WEIGHT, low=0,
                                    help="w_s: weight of the student's NLL on gold / pseudo labels.")
    distill_weight: float = setting(DEFAULT_DISTILL_WEIGHT, low=0, help="w_d: weight of the distillation term.")
    hidden_weight: float = setting(0.0, low=0, help="w_h: weight of the hidden-state term, the MSE between mapped "
                                   "layers' states of a transformer teacher and student (0: off; on, the teacher runs "
                                   "every batch instead of the logit cache).")
    attention_weight: float = setting(0.0, low=0, help="w_a: weight of the attention term, the KL between mapped "
                                      "layers' attention distributions, for a transformer student reading the "
                                      "teacher's tokens (cut from it) with as many heads (0: off; on, the teacher runs "
                                      "every batch).")
    cosine_weight: float = setting(0.0, low=0, help="w_c: weight of the cosine term, 1 - cos between the last layers' "
                                   "states (sentence or word) of a transformer teacher and student (0: off; on, the "
                                   "teacher runs every batch).")
    teacher_layers: str | Sequence[int] = setting(
        "uniform", metavar="uniform|N,N,...", help="With a layer term: the teacher layer each student layer learns "
        "from, counted from 0 as --layer-map counts. uniform: student layer i of k from teacher layer (i+1)*n/k - 1 "
        "of n, the last from the last; or one number per student layer, e.g. 0,2,4 for a student cut from the "
        "teacher's layers 0,2,4.")
    min_confidence: float = setting(0.0, low=0, high=1, help="Unlabeled examples (tokens) below this teacher "
                                    "confidence get no hard-label loss.")
    teacher_mistakes: str = setting("keep", choices=TEACHER_MISTAKES, help="Labelled examples (words) whose gold "
                                    "label is not the teacher's top class: keep (distil the teacher as it is), shift "
                                    "(swap the teacher's logits of its top class and the gold label, TextBrewer's "
                                    "probability shift: the gold label on top, the other classes as they were) or "
                                    "drop (no distillation term there; the loss on the gold label stays). Unlabeled "
                                    "text is not judged.")

    def __post_init__(self) -> None:
        if self.kd_loss == "mse" and self.temperature == DEFAULT_TEMPERATURE:  # kl's default, as a run config lists it
            self.temperature = None

    def loss(self, class_weights: Sequence[float] | None = None) -> TeacherStudentDistill:
        """The loss these settings describe (checked by its constructor)."""
        return TeacherStudentDistill(**asdict(self), class_weights=class_weights)
