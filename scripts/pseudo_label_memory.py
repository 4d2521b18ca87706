"""Peak resident memory of `nlp-train pseudo-label` as the corpus grows: it should stay flat.

For each N, writes a corpus of N lines by cycling through a source file's lines, runs
`nlp-train --threads 1 pseudo-label` on it in a fresh process and reads that process's peak RSS
from the kernel (os.wait4's rusage), so nothing of this script's own memory is counted.

    python scripts/pseudo_label_memory.py --teacher runs/demo/teacher --lines 1000 100000 1000000
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_corpus(source: Path, lines: int, path: Path) -> None:
    texts = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(f"{text}\n" for text in itertools.islice(itertools.cycle(texts), lines))


def measure(teacher: str, corpus: Path, output: Path, extra: list[str]) -> dict:
    """Run pseudo-label on `corpus`; return its wall time and peak RSS."""
    command = [sys.executable, "-m", "procedures.cli", "--threads", "1", *extra, "pseudo-label",
               "--teacher", teacher, "--input", str(corpus), "--output", str(output), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if process.returncode != 0:
        raise SystemExit(f"pseudo-label failed with exit status {process.returncode}")
    with open(output, "rb") as handle:
        written = sum(1 for _ in handle)
    # ru_maxrss is in KiB on Linux
    return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "records": written}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", required=True, help="Teacher directory (a tiny one makes 1M lines quick).")
    parser.add_argument("--lines", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    parser.add_argument("--source", type=Path, default=ROOT / "data" / "unlabeled" / "news.txt",
                        help="Lines to repeat into the corpus.")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"])
    parser.add_argument("--workdir", type=Path, help="Where corpora and outputs go (default: a temporary folder).")
    args = parser.parse_args()
    if args.workdir is not None and not args.workdir.is_dir():
        parser.error(f"--workdir {args.workdir}: no such folder")
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        for lines in args.lines:
            corpus, output = Path(folder) / f"corpus-{lines}.txt", Path(folder) / f"labels-{lines}.jsonl"
            write_corpus(args.source, lines, corpus)
            result = measure(args.teacher, corpus, output, ["--precision", args.precision])
            print(json.dumps({"lines": lines, "teacher": args.teacher, "precision": args.precision, **result}),
                  flush=True)
            corpus.unlink()
            output.unlink()


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
