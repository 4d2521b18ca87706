"""Peak resident memory of `nlp-train kd --augment N` as N grows: it should stay flat.

Cuts the first `--sentences` examples of a training file (CoNLL blocks, or lines), then for each N runs
`nlp-train --threads 1 kd --augment N` on them in a fresh process with a fresh logit cache (so the
teacher scores every synthetic example, as a first run does) and reads that process's peak RSS from the
kernel (os.wait4's rusage), so nothing of this script's own memory is counted.

    python scripts/augment_memory.py --teacher runs/aug-conll/teacher --train data/conll2003/train.txt \
        --dev data/conll2003/valid.txt --model lstm-tagger --sentences 1000 --augment 0 5 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_examples(source: Path, count: int, path: Path) -> None:
    """The first `count` examples of `source`: blank-line separated blocks (CoNLL), else lines."""
    text = source.read_text(encoding="utf-8")
    if "\n\n" in text:
        blocks = [block for block in text.split("\n\n") if block.strip() and not block.startswith("-DOCSTART-")]
        path.write_text("\n\n".join(blocks[:count]) + "\n", encoding="utf-8")
    else:
        path.write_text("".join(line + "\n" for line in text.splitlines()[:count]), encoding="utf-8")


def measure(args: argparse.Namespace, train: Path, dev: Path, n: int, folder: Path) -> dict:
    """Run kd with `--augment n`; return its wall time, peak RSS and transfer-set size."""
    output = folder / f"kd-{n}"
    command = [sys.executable, "-m", "procedures.cli", "--threads", "1", "kd", "--teacher", args.teacher,
               "--model", args.model, "--train", str(train), "--dev", str(dev), "--epochs", str(args.epochs),
               "--augment", str(n), "--cache-dir", str(folder / f"cache-{n}"), "--output", str(output), "--quiet",
               "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as stderr:  # a file: no pipe to fill
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:  # kd's own line, once, naming the run: it was printed, then "kd --augment N failed" after it
            stderr.seek(0)
            said = next((line.strip() for line in reversed(stderr.read().splitlines()) if line.strip()), "")
            from distill.errors import DistillError
            raise DistillError(f"kd --augment {n}: {said.removeprefix('error: ')}" if said.startswith("error: ")
                               else f"kd --augment {n} failed with exit status {code}{f': {said}' if said else ''}")
        stderr.seek(0)
        sys.stderr.write(stderr.read())  # a finished run's warnings, as before
    summary = json.loads((output / "train_summary.json").read_text(encoding="utf-8"))
    # ru_maxrss is in KiB on Linux
    return {"augment": n, "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "synthetic_examples": summary.get("synthetic_examples", 0),
            "dev": summary.get("best")}


def check_inputs(args: argparse.Namespace) -> None:
    """The teacher, the student and the data before any run: kd's errors would name the cut copies."""
    from distill.data import DataOptions, labelled_examples
    from distill.errors import DistillError
    from distill.models.kinds import require_kind
    from distill.models.registry import student_entry
    task = require_kind(args.teacher, "kd").get("task")
    does = student_entry(args.model).task
    if does != task:
        raise DistillError(f"--model {args.model} does {does}, and the teacher {task}: give a student of its task")
    for role, path in (("train", args.train), ("dev", args.dev)):
        labelled_examples(str(path), task, DataOptions(), role)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--dev", type=Path, required=True)
    parser.add_argument("--model", default="lstm-tagger", help="The student (kd --model).")
    parser.add_argument("--sentences", type=int, default=1000, help="Labelled examples used (train and dev).")
    parser.add_argument("--augment", type=int, nargs="+", default=[0, 5, 20])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="Where data, caches and students go (default: a temporary "
                                                     "folder).")
    args = parser.parse_args()
    if args.workdir is not None and not args.workdir.is_dir():
        parser.error(f"--workdir {args.workdir}: no such folder")
    if args.sentences < 1 or args.epochs < 1 or min(args.augment) < 0:
        parser.error("--sentences and --epochs must be at least 1, --augment values 0 or more")
    check_inputs(args)
    with tempfile.TemporaryDirectory(dir=args.workdir) as name:
        folder = Path(name)
        train, dev = folder / f"train{args.train.suffix}", folder / f"dev{args.dev.suffix}"
        first_examples(args.train, args.sentences, train)
        first_examples(args.dev, args.sentences, dev)
        for n in args.augment:
            print(json.dumps({"sentences": args.sentences, "teacher": args.teacher, **measure(args, train, dev, n,
                                                                                               folder)}), flush=True)


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
