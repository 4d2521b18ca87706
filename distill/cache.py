"""Teacher-logit cache: the teacher runs once over a transfer set; epochs and later runs reuse it.

A cache file is named by a fingerprint of the teacher's weights and config, the examples and (when
not fp32) the precision, so a changed teacher or changed data is recomputed, never served stale.
Each file also carries a checksum of its values: a damaged file is recomputed, never trusted.
Under a launcher the ranks share the work of a miss and rank 0 alone writes the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from distill import distributed, precision
from distill.inference import ExampleLogits, predict_logits_across_ranks
from distill.io import cache_root, load_checked_tensors, save_checked_tensors


def default_cache_dir() -> Path:
    return cache_root() / "teacher-logits"


def fingerprint(teacher, examples: Sequence, bf16: bool = False) -> str:
    """Hash of the teacher (`Teacher.fingerprint`: weights and how it reads text), the precision and
    the exact examples, in order."""
    digest = hashlib.sha256(teacher.fingerprint().encode())
    if bf16:
        digest.update(b"bf16\n")
    for example in examples:
        digest.update(json.dumps(example, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:40]


def cached_teacher_logits(teacher, examples: Sequence, cache_dir: str | Path | None = None,
                          batch_size: int = 64, progress: bool = True) -> tuple[ExampleLogits, Path, bool]:
    """Teacher logits for `examples` from the cache, computing and storing them on a miss.

    Returns (logits, cache file, whether it was a hit).
    """
    bf16 = precision.uses_bf16(teacher.device)
    path = Path(cache_dir or default_cache_dir()) / f"{fingerprint(teacher, examples, bf16)}.safetensors"
    stored = load_checked_tensors(path) if distributed.is_main() and path.exists() else None
    if distributed.broadcast_object(stored is not None):  # every rank takes rank 0's view of the cache
        results = ExampleLogits.from_dict(stored if distributed.is_main() else load_checked_tensors(path))
        if len(results) == len(examples):
            return results, path, True
    # a miss, or a damaged file (its checksum no longer matches): computed afresh, never trusted
    results = predict_logits_across_ranks(teacher, examples, batch_size, progress, "teacher logits")
    if distributed.is_main():
        save_checked_tensors(path, results.to_dict())
    return results, path, False
