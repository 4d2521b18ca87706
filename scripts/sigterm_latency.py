"""Seconds from SIGTERM to the exit of `nlp-train student`, with busy processes spinning beside it.

    python scripts/sigterm_latency.py BUSY ROUNDS TREE [TREE ...]

Each round starts, in each source TREE in turn (a checkout: before and after a change), a student run of
batches of 2 on samples/, sends it SIGTERM 0.5 s after its output folder appears, and times the exit;
BUSY processes (``while True: pass``) load the machine throughout (issue 40: 4 beside a test).
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(busy_count: int, rounds: int, trees: list[str]) -> None:
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy_count)]
    times: dict[str, list[float]] = {tree: [] for tree in trees}
    try:
        for round_number in range(rounds):
            for tree in trees:
                samples, out = Path(tree) / "samples", Path(tempfile.mkdtemp()) / "fresh"
                env = {**os.environ, "PYTHONPATH": tree, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
                run = subprocess.Popen(
                    [sys.executable, "-m", "procedures.cli", "--threads", "1", "student", "--model", "lstm",
                     "--embedding-dim", "16", "--hidden-dim", "16", "--quiet", "--batch-size", "2", "--train",
                     samples / "sentiment_train.csv", "--dev", samples / "sentiment_dev.csv", "--epochs", "200",
                     "--patience", "200", "--output", out], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE)
                while not out.exists():
                    if run.poll() is not None:
                        sys.exit(run.stderr.read().decode())
                    time.sleep(0.01)
                time.sleep(0.5)
                signalled = time.monotonic()
                run.terminate()
                code = run.wait()
                times[tree].append(time.monotonic() - signalled)
                print(f"{tree} round {round_number}: exit {code} after {times[tree][-1]:.2f} s, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for process in busy:
            process.kill()
    for tree, seconds in times.items():
        print(tree, " ".join(f"{s:.2f}" for s in seconds))


def parse_args(argv: list[str] | None = None):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("busy", type=int, metavar="BUSY", help="busy processes loading the machine throughout")
    parser.add_argument("rounds", type=int, metavar="ROUNDS", help="rounds; each times one run per TREE")
    parser.add_argument("trees", nargs="+", metavar="TREE", help="a source checkout (before and after a change)")
    args = parser.parse_args(argv)
    if args.busy < 0 or args.rounds < 1:
        parser.error("BUSY must be 0 or more, ROUNDS 1 or more")
    for tree in args.trees:
        if not (Path(tree) / "procedures" / "cli.py").is_file():
            parser.error(f"{tree}: not a distill checkout (no procedures/cli.py)")
    return args


if __name__ == "__main__":
    from distill.errors import run_script
    arguments = parse_args()
    run_script(lambda: main(arguments.busy, arguments.rounds, arguments.trees))
