"""The model card, ``distill.json``: what a model directory holds, and checksums of its weights.

It is written last, so a directory with a card is complete; loading checks each weights file
against the sha256 recorded here, so a truncated or corrupted file is reported, never half-loaded.
"""

from __future__ import annotations

from pathlib import Path

from distill.errors import DistillError
from distill.io import file_sha256, read_json, write_json

MODEL_CARD = "distill.json"

__all__ = ["MODEL_CARD", "read_model_card", "verify_weights", "weights_sha256", "write_model_card"]


def write_model_card(directory: str | Path, card: dict, weights: list[str]) -> None:
    """Write the card with the sha256 of each weights file (call after the weights are saved)."""
    directory = Path(directory)
    write_json(directory / MODEL_CARD, {**card, "sha256": {name: file_sha256(directory / name) for name in weights}})


def read_model_card(directory: str | Path) -> dict:
    directory = Path(directory)
    if not directory.is_dir():
        raise DistillError(f"{directory}: model directory not found")
    if not (directory / MODEL_CARD).exists():
        raise DistillError(f"{directory}: not a model directory (missing {MODEL_CARD})")
    card = read_json(directory / MODEL_CARD)
    if not isinstance(card, dict) or card.get("kind") not in ("teacher", "student"):
        raise DistillError(f"{directory / MODEL_CARD}: unknown model kind")
    return card


def weights_sha256(directory: str | Path, name: str) -> str:
    """The sha256 of a weights file: the card's record (checked when the model was loaded), else computed."""
    recorded = read_model_card(directory).get("sha256", {}).get(name)
    return recorded or file_sha256(Path(directory) / name)


def verify_weights(directory: str | Path, card: dict) -> None:
    """Refuse weights whose checksum differs from the card's (truncated, corrupted or swapped files)."""
    directory = Path(directory)
    for name, expected in card.get("sha256", {}).items():
        path = directory / name
        if not path.is_file():
            raise DistillError(f"{directory}: missing {name}")
        if file_sha256(path) != expected:
            raise DistillError(f"{path}: corrupted or truncated (sha256 differs from {MODEL_CARD}); "
                               "restore it from a good copy or retrain")
