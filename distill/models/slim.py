"""The slim teacher copy (`nlp-train export --format safetensors`): the teacher checkpoint's schema
without its optimizer state, tensors in safetensors and the rest in JSON.

A full teacher checkpoint carries Adam's two moments per weight, about twice the weights again;
inference needs none of it. The slim files load back into the very same checkpoint dictionary
(``config``, ``hierarchy``, ``encoder_state_dict``, ``classifier_state_dict`` and an empty
``optimizer_state_dict``), so `Teacher.from_checkpoint` reads either form.
"""

from __future__ import annotations

from pathlib import Path

from distill.errors import DistillError
from distill.io import load_tensors, read_json, save_tensors, write_json
from distill.models.card import SLIM_META, SLIM_WEIGHTS

TENSOR_PARTS = ("encoder_state_dict", "classifier_state_dict")

__all__ = ["SLIM_META", "SLIM_WEIGHTS", "load_slim_checkpoint", "save_slim_checkpoint", "write_slim_meta"]


def write_slim_meta(directory: str | Path, checkpoint: dict) -> str:
    """The checkpoint's JSON part (config and labels; no optimizer state); returns the file's name."""
    write_json(Path(directory) / SLIM_META, {"config": checkpoint["config"], "hierarchy": checkpoint["hierarchy"],
                                             "optimizer_state_dict": {}})
    return SLIM_META


def save_slim_checkpoint(directory: str | Path, checkpoint: dict) -> list[str]:
    """Write a teacher checkpoint's weights and metadata, dropping its optimizer state; returns the files' names."""
    tensors = {f"{part}.{name}": tensor for part in TENSOR_PARTS for name, tensor in checkpoint[part].items()}
    save_tensors(Path(directory) / SLIM_WEIGHTS, tensors)
    return [SLIM_WEIGHTS, write_slim_meta(directory, checkpoint)]


def load_slim_checkpoint(directory: str | Path) -> dict:
    """The checkpoint dictionary `save_slim_checkpoint` wrote, with an empty optimizer state."""
    directory = Path(directory)
    checkpoint = read_json(directory / SLIM_META)
    if not isinstance(checkpoint, dict) or not {"config", "hierarchy"} <= set(checkpoint):
        raise DistillError(f"{directory / SLIM_META}: not a slim teacher checkpoint (no config and labels)")
    checkpoint.update({part: {} for part in TENSOR_PARTS}, optimizer_state_dict={})
    for key, tensor in load_tensors(directory / SLIM_WEIGHTS).items():
        part, _, name = key.partition(".")
        if part not in TENSOR_PARTS:
            raise DistillError(f"{directory / SLIM_WEIGHTS}: unexpected tensor {key!r} in a slim teacher checkpoint")
        checkpoint[part][name] = tensor
    return checkpoint
