"""How much of its texts a classification transformer cuts, reported once per run as one warning.

A teacher reads `max_length` sub-tokens of a text (or `max_windows` overlapping windows of them,
`TeacherConfig.long_inputs`), and a transformer student its `max_length`; the rest of a longer text
never reaches it, which would otherwise go unnoticed. Teacher and student training, `evaluate`,
`predict`, `pseudo-label` and `kd` (over its transfer set, for the teacher and the student) count the
texts that are cut and the sub-tokens they lose before any batch runs, and warn on the main process.
Tagging cuts nothing: a long sentence is read in windows at word boundaries
(`distill.features.encode_words`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from distill import distributed
from distill.errors import option
from distill.features import content_ids, text_reach, window_frame
from distill.models.card import MULTITASK_KIND
from distill.settings import named

if TYPE_CHECKING:
    from distill.models.teacher import Teacher

logger = logging.getLogger("distill")


@dataclass
class Truncation:
    """Texts counted, those longer than the teacher reads, and the sub-tokens of those: all and lost."""

    texts: int = 0
    cut: int = 0
    cut_sub_tokens: int = 0
    lost_sub_tokens: int = 0

    def __add__(self, other: "Truncation") -> "Truncation":
        return Truncation(self.texts + other.texts, self.cut + other.cut,
                          self.cut_sub_tokens + other.cut_sub_tokens, self.lost_sub_tokens + other.lost_sub_tokens)


def classification_reader(model) -> Teacher | None:
    """The `Teacher` module that reads `model`'s text to classify: a teacher (or its ONNX export), a
    multi-task teacher whose heads all classify (they read the text alike), or a transformer student
    (one reads inside it); None for any other model. Told by the model's kind first, so that a word
    student's `predict` and `evaluate` never import the teacher's modules (and transformers)."""
    reader = getattr(model, "source", model)  # an OnnxModel prepares text with its source model
    if getattr(reader, "kind", None) == MULTITASK_KIND:
        reader = reader.head(reader.names[0]) if reader.task == "classification" else None
    reader = getattr(reader, "network", reader)  # a transformer student's
    if getattr(reader, "kind", None) != "teacher":
        return None
    from distill.models.hub_teacher import TransformersTeacher
    from distill.models.teacher import Teacher
    reads = isinstance(reader, (Teacher, TransformersTeacher))  # a transformers classifier reads as a teacher
    return reader if reads and reader.task == "classification" else None


def is_student(model) -> bool:
    """Whether `model` (or the model an ONNX export was made from) is a student, not a teacher."""
    return getattr(getattr(model, "source", model), "kind", None) == "student"


def reach(teacher: Teacher) -> int:
    """Sub-tokens of a text the teacher reads."""
    config = teacher.config
    capacity = window_frame(teacher.tokenizer, config.max_length)[2]
    return text_reach(capacity, config.window_overlap, config.windows_per_text)


def count_truncation(teacher: Teacher, texts: Sequence[str]) -> Truncation:
    """What `teacher` cuts of `texts`."""
    limit = reach(teacher)
    lengths = [len(ids) for ids in content_ids(teacher.tokenizer, texts)]
    cut = [n for n in lengths if n > limit]
    return Truncation(len(lengths), len(cut), sum(cut), sum(n - limit for n in cut))


def share(part: int, whole: int) -> str:
    """`part` of `whole` as a percentage that never reads as none or all when it is neither: 2 of 8,000 is
    <0.1%, not 0.0%, and 7,999 of 8,000 >99.9%, not 100.0%."""
    fraction = part / whole
    if 0 < fraction < 0.001:
        return "<0.1%"
    if 0.999 < fraction < 1:
        return ">99.9%"
    return f"{fraction:.1%}"


def truncation_message(teacher: Teacher, counted: Truncation, source: str, student: bool = False) -> str | None:
    """The warning for `counted` (None when nothing is cut): the share cut, the loss, what reads more of it
    (`student`: `teacher` reads inside a transformer student)."""
    if not counted.cut:
        return None
    from distill.models.teacher import TeacherConfig  # here: evaluating a word student reads no transformers
    config = teacher.config
    length, windows = option("--max-length", "max_length"), named(TeacherConfig, "max_windows", "max_windows")
    size = option(f"--max-length {config.max_length}", f"max_length={config.max_length}")
    if student:
        limit = size
        remedy = f"a transformer student with a larger {length} reads more of them, or a word student all"
    elif getattr(config, "fixed_length", False):  # a transformers classifier: its head reads one window
        limit = f"the model's {config.max_length}"
        remedy = "a transformers classifier is not read in windows: a teacher of distill's own, trained with " \
            f"{option('--long-inputs windows', 'long_inputs=' + repr('windows'))}, reads them whole"
    elif config.long_inputs == "windows":
        limit = option(f"--max-windows {config.max_windows}", f"max_windows={config.max_windows}") + f" of {size}"
        remedy = f"a teacher trained with a larger {windows} reads them whole"
    else:
        limit = size
        by_windows = option("--long-inputs windows", "long_inputs='windows'")
        remedy = f"a teacher trained with {by_windows} (or a larger {length}) reads them whole"
    return (f"warning: {source}: {counted.cut:,} of {counted.texts:,} texts ({share(counted.cut, counted.texts)}) "
            f"are longer than the {reach(teacher):,} sub-tokens the {'student' if student else 'teacher'} reads "
            f"({limit}) and lose {counted.lost_sub_tokens / counted.cut:.0f} sub-tokens each on average "
            f"({share(counted.lost_sub_tokens, counted.cut_sub_tokens)} of their sub-tokens); {remedy}")


def warn_truncation(model, counted: Truncation, source: str) -> None:
    """Log the warning for `counted` on the main process."""
    teacher = classification_reader(model)
    message = None if teacher is None else truncation_message(teacher, counted, source, is_student(model))
    if message and distributed.is_main():
        logger.warning(message)


def warn_if_truncated(model, texts: Sequence, source: str | Sequence[str]) -> None:
    """Warn once if `model` is a classification transformer that cuts some of `texts` (read from `source`).

    `source` may name each text's file instead (kd's training and unlabeled texts): then each file whose
    texts are cut gets its own warning, counted over its texts among `texts` alone, so that no file is named
    for texts that were not read from it."""
    warn_truncations(model, truncation_by_source(model, texts, source))


def truncation_by_source(model, texts: Sequence, source: str | Sequence[str]) -> dict[str, Truncation]:
    """What `model` cuts of `texts`, per file they were read from (`source`: one for all, or one per text); none
    for a model that cuts nothing. Counts of several calls add up, for one warning per file (`warn_truncations`)."""
    teacher = classification_reader(model)
    if teacher is None:
        return {}
    if isinstance(source, str):
        return {source: count_truncation(teacher, texts)}
    by_source: dict[str, list] = {}
    for text, name in zip(texts, source, strict=True):
        by_source.setdefault(name, []).append(text)
    return {name: count_truncation(teacher, some) for name, some in by_source.items()}


def warn_truncations(model, counted: dict[str, Truncation]) -> None:
    """One warning per file of `counted` whose texts `model` cuts."""
    for name, truncation in counted.items():
        warn_truncation(model, truncation, name)
