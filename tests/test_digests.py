"""Default runs give bit-identical weights and outputs across refactors of the code: tiny runs of `teacher`,
`student`, `kd` (classification and tagging) and `pseudo-label`, each output's sha256 against those recorded before
the restructuring of issue 39 (commit 568d4dd).

Floating-point kernels differ between processors (AVX2 or AVX-512 paths round differently), so digests are kept per
machine kind (`machine_kind`); on a kind with none recorded the test skips and says so. Record them on a new kind,
from a checkout of the recorded commit, with ``DISTILL_RECORD_DIGESTS=1 pytest tests/test_digests.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES

RECORDED = Path(__file__).parent / "data" / "digests.json"


def machine_kind() -> str:
    import platform

    import torch
    import transformers
    return f"{platform.machine()}-{torch.backends.cpu.get_cpu_capability()}-torch{torch.__version__}-" \
           f"transformers{transformers.__version__}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args) -> None:
    """`nlp-train ARGS` in a process of its own, as a user runs it: nothing another test left in this process (a
    setting, a cached module state) can change its numbers."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "procedures.cli", "--threads", "1", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def default_runs(root: Path, encoder: str) -> dict[str, str]:
    """Each default run's output digest: its weights (a model) or its file (pseudo-label)."""
    from distill.io import tensors_sha256
    cls = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--quiet"]
    tag = ["--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--quiet"]
    cache = ["--cache-dir", root / "cache"]
    cli("teacher", "--task", "classification", "--encoder", encoder, "--epochs", "1", "--max-length", "64",
        *cls, "--output", root / "teacher")
    cli("teacher", "--task", "tagging", "--encoder", encoder, "--epochs", "1", "--max-length", "16",
        *tag, "--output", root / "teacher-tag")
    cli("student", "--model", "lstm", "--epochs", "2", *cls, "--output", root / "student")
    cli("kd", "--teacher", root / "teacher", "--model", "lstm", "--epochs", "2", *cls, *cache,
        "--unlabeled", SAMPLES / "unlabeled_movies.txt", "--output", root / "kd")
    cli("kd", "--teacher", root / "teacher-tag", "--model", "lstm-tagger", "--epochs", "2", *tag, *cache,
        "--output", root / "kd-tag")
    cli("pseudo-label", "--teacher", root / "teacher", "--input", SAMPLES / "unlabeled_movies.txt", *cache,
        "--output", root / "pseudo.jsonl", "--quiet")
    from distill.models import load_model
    digests = {name: tensors_sha256(load_model(root / name).state_dict())
               for name in ("teacher", "teacher-tag", "student", "kd", "kd-tag")}
    return {**digests, "pseudo.jsonl": sha256(root / "pseudo.jsonl")}


def test_default_runs_are_bit_identical_to_the_recorded_ones(tiny_encoder_dir, tmp_path):
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    kind = machine_kind()
    if os.environ.get("DISTILL_RECORD_DIGESTS") != "1" and kind not in recorded:
        pytest.skip(f"no digests recorded for this machine kind ({kind}); floating-point kernels differ between "
                    "processors")
    digests = default_runs(tmp_path, tiny_encoder_dir)
    if os.environ.get("DISTILL_RECORD_DIGESTS") == "1":
        RECORDED.write_text(json.dumps({**recorded, kind: digests}, indent=1, sort_keys=True) + "\n")
    assert digests == recorded.get(kind, digests)
