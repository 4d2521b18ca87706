"""How long `nlp-train` takes to start, and what it costs over the same work through the Python API.

Each case runs in a fresh process, `--repeats` times, the cases taking turns (so a change in the
machine's load falls on all of them alike); the table shows the median wall time and the median
CPU time (user + system, of the child process alone, from os.wait4) and the ratio of the CLI to
the API. The cases:

* `nlp-train --help`;
* `nlp-train --threads 1 predict STUDENT INPUT` against a `python -c` that loads the student with
  `distill.load_model` and writes the same JSON lines with `distill.prediction_records`;
* `nlp-train --threads 1 evaluate STUDENT DATA` against a `python -c` that reads DATA with
  `distill.data.read_split`, scores it with `distill.evaluate` and writes the metrics.

Without `--student`, a tiny BiLSTM student is first trained on samples/sentiment_train.csv (dev:
samples/sentiment_dev.csv) in a temporary folder; INPUT is the texts of DATA, one per line.

    python scripts/bench_startup.py                      # tiny BiLSTM, 5 rounds
    python scripts/bench_startup.py --student runs/rt/lstm --data data/rotten_tomatoes/test.csv --repeats 9
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"

PREDICT_API = """
import json, sys
import torch
torch.set_num_threads(1)
from distill import load_model, prediction_records
model = load_model(sys.argv[1], device="cpu")
with open(sys.argv[2], encoding="utf-8") as handle:
    texts = [line.strip() for line in handle if line.strip()]
for record in prediction_records(model, texts):
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\\n")
"""

EVALUATE_API = """
import json, sys
import torch
torch.set_num_threads(1)
from distill import evaluate, load_model
from distill.data import read_split
model = load_model(sys.argv[1], device="cpu")
examples, gold = read_split(sys.argv[2], model.task)
metrics = evaluate(model, examples, gold)
with open(sys.argv[3], "w", encoding="utf-8") as out:
    json.dump(metrics, out)
"""


def nlp_train() -> list[str]:
    """The `nlp-train` entry point beside this Python (what users run), else `python -m procedures.cli`."""
    script = Path(sys.executable).parent / "nlp-train"
    return [str(script)] if script.exists() else [sys.executable, "-m", "procedures.cli"]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def measure(command: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of `command` in a fresh process; its failure stops the script."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=stdout, stderr=errors, env=environment(), cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if process.returncode != 0:
            errors.seek(0)
            sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{errors.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def train_tiny_student(folder: Path) -> str:
    output = folder / "lstm"
    print(f"training a tiny BiLSTM student in {output} ...", flush=True)
    measure([*nlp_train(), "--threads", "1", "student", "--model", "lstm", "--embedding-dim", "32", "--hidden-dim",
             "32", "--epochs", "2", "--quiet", "--train", str(SAMPLES / "sentiment_train.csv"), "--dev",
             str(SAMPLES / "sentiment_dev.csv"), "--output", str(output)])
    return str(output)


def write_texts(data: str, path: Path) -> None:
    """The texts of a labelled CSV (column `text`), one per line: the input of the predict cases."""
    with open(data, newline="", encoding="utf-8") as handle:
        texts = [" ".join(row["text"].split()) for row in csv.DictReader(handle)]
    path.write_text("".join(f"{text}\n" for text in texts if text), encoding="utf-8")


def cases(student: str, data: str, work: Path) -> dict[str, list[str]]:
    cli = [*nlp_train(), "--threads", "1"]
    return {
        "nlp-train --help": [*nlp_train(), "--help"],
        "predict: nlp-train": [*cli, "predict", student, str(work / "input.txt")],
        "predict: API (python -c)": [sys.executable, "-c", PREDICT_API, student, str(work / "input.txt")],
        "evaluate: nlp-train": [*cli, "evaluate", student, data, "--output", str(work / "cli-metrics.json"),
                                "--overwrite", "--quiet"],
        "evaluate: API (python -c)": [sys.executable, "-c", EVALUATE_API, student, data,
                                      str(work / "api-metrics.json")],
    }


def same_predictions(runs: dict[str, list[str]], work: Path) -> bool:
    """Whether the CLI and the API predict cases write the same records (run once, untimed, as warm-up)."""
    written = []
    for name in ("predict: nlp-train", "predict: API (python -c)"):
        with open(work / "predictions.jsonl", "w+", encoding="utf-8") as out:
            measure(runs[name], stdout=out)
            out.seek(0)
            written.append([json.loads(line) for line in out])
    return written[0] == written[1]


def table(results: dict[str, list[tuple[float, float]]]) -> str:
    median = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
              for name, runs in results.items()}
    lines = [f"{'case':<28} {'wall s':>8} {'CPU s':>8}", "-" * 46]
    for name, (wall, cpu) in median.items():
        lines.append(f"{name:<28} {wall:>8.2f} {cpu:>8.2f}")
    for command in ("predict", "evaluate"):
        (cli_wall, cli_cpu), (api_wall, api_cpu) = median[f"{command}: nlp-train"], \
            median[f"{command}: API (python -c)"]
        lines.append(f"{command + ': CLI / API':<28} {cli_wall / api_wall:>7.2f}x {cli_cpu / api_cpu:>7.2f}x"
                     f"   (CLI - API: {cli_wall - api_wall:+.2f} s wall, {cli_cpu - api_cpu:+.2f} s CPU)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--student", help="A trained student folder (default: train a tiny BiLSTM).")
    parser.add_argument("--data", default=str(SAMPLES / "sentiment_dev.csv"),
                        help="Labelled CSV for evaluate; its texts are predict's input.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs of each case (median reported).")
    parser.add_argument("--json", dest="json_path", help="Also write the raw timings here.")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    sys.path.insert(0, str(ROOT))
    from distill.data.checks import require_file
    from distill.io import write_json
    from distill.outputs import check_output_file
    require_file(args.data)
    if args.json_path:  # before the minutes of timing: never an input (the --data it reads), nor among a model's files
        check_output_file(args.json_path, [args.data, args.student], "bench_startup.py's timings", beside_model=False)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        work = Path(folder)
        student = args.student or train_tiny_student(work)
        write_texts(args.data, work / "input.txt")
        runs = cases(student, args.data, work)
        if not same_predictions(runs, work):
            print("warning: the CLI and the API predicted different records", file=sys.stderr)
        for name, command in runs.items():
            if not name.startswith("predict"):
                measure(command)  # warm-up: the disk cache holds what each case reads
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for round_ in range(args.repeats):
            for name, command in runs.items():
                results[name].append(measure(command))
            print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    print(textwrap.dedent(f"""
        student: {args.student or 'tiny BiLSTM (trained here)'}; data: {args.data}; {args.repeats} runs each;
        medians, fresh process per run, {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}
    """).strip())
    print(table(results))
    if args.json_path:
        write_json(args.json_path, {name: [{"wall": w, "cpu": c} for w, c in runs_] for name, runs_ in results.items()})
    return results


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
