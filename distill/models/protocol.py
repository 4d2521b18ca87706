"""The student protocol: what the training loop, `predict_logits`, `save_pretrained` and the `Distiller` call
on a student, checked once where a student is given or registered, so that a module missing a part is refused
in one line naming it, not with an AttributeError in the middle of a run (docs/python-api.md#student-protocol).

A student given in memory (to `Distiller` or `train_student`) is a `LabelModel` (an `nn.Module`; the base
class gives `decode`, `supervised_loss`, `predict` and `save_pretrained`) with

* ``hierarchy``: its labels (a `LabelHierarchy`), in the order of its logits;
* ``task``: ``"classification"`` or ``"tagging"``;
* ``prepare(examples) -> (inputs, mask)``: a batch as the keyword arguments of `forward` and, for tagging,
  the (examples, words) mask of the scored words (None for classification); its tensors may be on the CPU
  (the training loop and inference move them to the model's device);
* ``forward(**inputs) -> logits``: (examples, labels), or (examples, words, labels) for tagging (checked on
  two training examples before the first step);
* to be written to a run's output: ``write_files(directory)``.

A registered student class (`register_student`, a ``--model`` choice) is built and loaded by the registry
too: it also has a `StudentConfig` as ``config_class``, ``build(config, hierarchy, examples)`` and
``from_checkpoint(directory, card)`` (`StudentModel` and `StudentFiles` give them from smaller parts).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from distill.errors import DistillError

SEE = "see docs/python-api.md#student-protocol"
TASKS = ("classification", "tagging")
PREPARE = "prepare(examples) -> (inputs, mask)"
FORWARD = "forward(**inputs) -> logits"
WRITE_FILES = "write_files(directory) (to write the run's output)"


def _own(cls: type, name: str, base: type) -> bool:
    """Whether `cls` has its own `name`, not `base`'s placeholder (which raises NotImplementedError)."""
    unwrap = lambda method: getattr(method, "__func__", method)  # noqa: E731 (a classmethod's function)
    found = getattr(cls, name, None)
    return callable(found) and unwrap(found) is not unwrap(getattr(base, name, None))


def missing_parts(student: Any, output: bool = False) -> list[str]:
    """The parts of the protocol a student given in memory lacks (an empty list: none)."""
    from distill.labels import LabelHierarchy
    from distill.models.base import LabelModel
    cls = type(student)
    missing = []
    if not isinstance(getattr(student, "hierarchy", None), LabelHierarchy):
        missing.append("hierarchy (its labels, a LabelHierarchy)")
    if getattr(student, "task", None) not in TASKS:
        missing.append("task ('classification' or 'tagging')")
    if not _own(cls, "prepare", LabelModel):
        missing.append(PREPARE)
    if not _own(cls, "forward", nn.Module):
        missing.append(FORWARD)
    if not isinstance(student, LabelModel):
        missing.append("LabelModel's decode, supervised_loss, predict and save_pretrained (subclass "
                       "distill.LabelModel)")
    elif output and not _own(cls, "write_files", LabelModel):
        missing.append(WRITE_FILES)
    return missing


def check_student(student: Any, output: bool = False) -> None:
    """Refuse a student given in memory that does not follow the protocol, in one line naming what it lacks;
    `output`: the run writes the student into its output directory."""
    from distill.models.student_config import StudentConfig
    if isinstance(student, (str, StudentConfig)):
        return  # a name or a config: the registry's class, checked when it registered
    if not isinstance(student, nn.Module):
        raise DistillError(f"student: give a student model, a StudentConfig or a registered name, "
                           f"not {type(student).__name__}")
    missing = missing_parts(student, output)
    if missing:
        raise DistillError(f"student {type(student).__name__} lacks {'; '.join(missing)}: {SEE}")


def check_student_class(cls: type, name: str) -> None:
    """Refuse, at `register_student`, a class the registry could not build, train, save or load."""
    from distill.models.base import LabelModel
    missing = [part for attribute, part in [("prepare", PREPARE), ("write_files", "write_files(directory)"),
                                            ("from_checkpoint", "from_checkpoint(directory, card)")]
               if not _own(cls, attribute, LabelModel)]
    if not _own(cls, "forward", nn.Module):
        missing.insert(1, FORWARD)
    if not callable(getattr(cls, "build", None)):
        missing.append("build(config, hierarchy, examples)")
    # a class whose write_files and from_checkpoint are built on other methods (`StudentFiles`) names them
    missing += [part for attribute, part in getattr(cls, "files_built_on", {}).items()
                if not callable(getattr(cls, attribute, None))]
    if missing:
        raise DistillError(f"student {name!r}: {cls.__name__} lacks {'; '.join(missing)}: {SEE}")
