"""Models: the transformer teacher and the small students. None of them knows about distillation."""

from __future__ import annotations

from pathlib import Path

from distill.errors import DistillError
from distill.models.base import LabelModel, pick_device
from distill.models.card import MODEL_CARD, read_model_card, verify_model_files

__all__ = ["MODEL_CARD", "load_model", "read_model_card"]

def load_model(directory: str | Path, expect: str | None = None, device: str = "cpu") -> LabelModel:
    """Load a teacher or student directory onto `device`; `expect` ('teacher'/'student') rejects the other kind."""
    return _load(directory, expect).to(pick_device(device))


def _load(directory: str | Path, expect: str | None) -> LabelModel:
    card = read_model_card(directory)
    if expect is not None and card["kind"] != expect:
        raise DistillError(f"{directory}: is a {card['kind']} directory, expected a {expect}")
    verify_model_files(directory, card)
    if card["kind"] == "teacher":
        from distill.models.teacher import Teacher
        return Teacher.from_checkpoint(directory, card)
    from distill.models.registry import entry_of_saved
    try:
        entry = entry_of_saved(str(card.get("model")), card.get("class"))
    except DistillError as err:
        raise DistillError(f"{directory}: {err}") from None
    return entry.cls.from_checkpoint(directory, card)
