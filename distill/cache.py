"""Teacher-logit cache: the teacher runs once over a transfer set; epochs and later runs reuse it.

A cache file is named by a fingerprint of the teacher checkpoint's bytes and the examples, so a
changed teacher or changed data is recomputed, never served stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from distill.inference import ExampleLogits, predict_logits
from distill.io import load_tensors, save_tensors

CACHE_ENV = "DISTILL_CACHE"


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "distill")) / "teacher-logits"


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(teacher_dir: str | Path, examples: Sequence) -> str:
    """Hash of the teacher's weights file, its max length and the exact examples, in order."""
    from distill.models.teacher import CHECKPOINT
    digest = hashlib.sha256(file_digest(Path(teacher_dir) / CHECKPOINT).encode())
    for example in examples:
        digest.update(json.dumps(example, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:40]


def cached_teacher_logits(teacher, teacher_dir: str | Path, examples: Sequence, cache_dir: str | Path | None = None,
                          batch_size: int = 64, progress: bool = True) -> tuple[ExampleLogits, Path, bool]:
    """Teacher logits for `examples` from the cache, computing and storing them on a miss.

    Returns (logits, cache file, whether it was a hit).
    """
    path = Path(cache_dir or default_cache_dir()) / f"{fingerprint(teacher_dir, examples)}.safetensors"
    if path.exists():
        results = ExampleLogits.from_dict(load_tensors(path))
        if len(results) == len(examples):
            return results, path, True
    results = predict_logits(teacher, examples, batch_size, progress, "teacher logits")
    save_tensors(path, results.to_dict())
    return results, path, False
