"""Every student's throughput at batch 1 and batch 32, text to label, beside model2vec's pipeline, in
alternating rounds on the same texts and threads.

Each model is called as an application calls it: `predict` on one text at a time (batch 1, over the first
`--single` texts) and on 32 texts at a time (batch 32, over all of them), the label strings out. model2vec's
deployment, `StaticModelPipeline.predict` (its tokenizer, numpy, the scikit-learn head), runs in model2vec's own
environment (`--model2vec-python`: `make .venv-model2vec/.installed`; it pins transformers<5.4), a process
started once that waits on its pipe while the others are timed. A round times every model once at each batch
size, one after another; a burst of load from other jobs on a shared machine slows one round of every model,
not every round of one. The best and the median round are reported, with each model's accuracy on the texts.

    python scripts/throughput.py runs/tp/static runs/tp/lstm --data data/rotten_tomatoes/test.csv \\
        --model2vec-python .venv-model2vec/bin/python --peers runs/static/peers \\
        --train data/rotten_tomatoes/train.csv --dev data/rotten_tomatoes/dev.csv --threads 1 --rounds 5

`--peers` is scripts/bench_static.py's `--out`: model2vec's trained pipeline is read from PEERS/model2vec, and
trained there first (bench_static's recipe, `--train`/`--dev`) when it is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_static import M2V_MODEL, python_path, read_csv  # noqa: E402  (standard library alone: model2vec's side too)

BATCHES = (1, 32)
M2V = "model2vec pipeline"


def examples_per_second(predict: Callable[[list[str]], object], texts: Sequence[str], batch_size: int) -> float:
    """Examples per second of `predict` called on consecutive `batch_size` slices of `texts`, after a warm-up
    call: the cost of a call (reading the input, the labels out) counts, as it does in an application."""
    texts = list(texts)
    predict(texts[:batch_size])
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        predict(texts[start:start + batch_size])
    return len(texts) / (time.perf_counter() - started)


def timed_texts(texts: list[str], batch_size: int, single: int) -> list[str]:
    """Batch 1 reads the first `single` texts (one call each), a larger batch all of them."""
    return texts[:single] if batch_size == 1 else texts


def serve_model2vec(args: argparse.Namespace) -> None:
    """In model2vec's environment: load the pipeline, say its accuracy on `--data`, then answer each batch size
    read from stdin with one JSON line of its examples per second."""
    import numpy as np
    import torch
    from model2vec.inference import StaticModelPipeline
    torch.set_num_threads(args.threads)
    pipeline = StaticModelPipeline.from_pretrained(str(Path(args.peers) / M2V_MODEL))
    texts, labels = read_csv(args.data)

    def predict(batch: list[str]):
        return pipeline.predict(batch, batch_size=len(batch), use_multiprocessing=False)

    accuracy = float((np.asarray(predict(texts)) == np.asarray(labels)).mean())
    print(json.dumps({"accuracy": accuracy}), flush=True)
    for line in sys.stdin:
        batch_size = int(line)
        speed = examples_per_second(predict, timed_texts(texts, batch_size, args.single), batch_size)
        print(json.dumps({"examples_per_second": speed}), flush=True)


class Model2VecProcess:
    """model2vec's pipeline in a process of its own environment, timed on request."""

    def __init__(self, python: str, args: argparse.Namespace):
        command = [python, __file__, "--serve-model2vec", "--data", args.data, "--peers", args.peers,
                   "--threads", str(args.threads), "--single", str(args.single)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=thread_env(args.threads))
        self.accuracy = self.answer()["accuracy"]

    def answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"model2vec's process stopped (exit status {self.process.wait()})")
        return json.loads(line)

    def speed(self, batch_size: int) -> float:
        self.process.stdin.write(f"{batch_size}\n")
        self.process.stdin.flush()
        return self.answer()["examples_per_second"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def thread_env(threads: int) -> dict[str, str]:
    """This environment with every thread pool (torch's OpenMP, numpy's OpenBLAS) held to `threads`."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(threads),
            "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def train_model2vec(args: argparse.Namespace) -> None:
    """model2vec's pipeline trained as scripts/bench_static.py trains it, into PEERS, unless already there."""
    from bench_static import run_model2vec
    from distill.io import write_json
    peers = Path(args.peers)
    if (peers / M2V_MODEL).is_dir():
        return
    if not (args.train and args.dev):
        raise SystemExit(f"{peers / M2V_MODEL} is missing: give --train and --dev to train model2vec there")
    peers.mkdir(parents=True, exist_ok=True)
    stage = argparse.Namespace(train=args.train, dev=args.dev, test=args.data, out=str(peers), threads=args.threads,
                               seed=args.seed)
    record = run_model2vec(args.model2vec_python, "model2vec-train", stage)
    write_json(peers / "model2vec-train.json", record)


def measure(args: argparse.Namespace) -> dict:
    """Every model's accuracy on `--data`, then `--rounds` rounds of every model at each batch size."""
    import torch

    from distill.data import read_classification
    from distill.errors import DistillError
    from distill.inference import evaluate
    from distill.models import load_model
    from distill.models.card import MULTITASK_KIND
    from distill.models.kinds import require_kind
    from distill.models.prompt import prompt_settings
    torch.set_num_threads(args.threads)
    data = read_classification(args.data)  # checked as every command checks data; model2vec's side reads it after
    texts, labels = list(data["text"]), list(data["label"])
    for directory in args.models:  # the kinds compare scores and times side by side (the teacher-kind table)
        if require_kind(directory, "compare")["kind"] == MULTITASK_KIND:  # by a head: no option of this script
            raise DistillError(f"{directory}: is a multi-task teacher, compared by one head (nlp-train compare "
                               "--head); throughput.py times single-task classifiers: give a head's student or "
                               "transformers export")
    with prompt_settings(labels_from=args.data):  # a language model's label set: that of --data, as compare takes it
        # a list, as compare's rows: a model given twice is timed twice (a dict of them kept one row, said nothing)
        models = [(directory, load_model(directory)) for directory in args.models]
    for directory, model in models:
        if model.task != "classification":  # its reader would say the CSV's texts are no token lists
            raise DistillError(f"{directory}: is a {model.task} model; throughput.py times classifiers on the texts "
                               "of --data")
    rows = [{"model": name, "kind": type(model).__name__, "accuracy": evaluate(model, texts, labels)["accuracy"]}
            for name, model in models]
    predictors: list[Callable[[int], float]] = [
        lambda batch_size, model=model: examples_per_second(
            lambda batch: model.predict(batch, batch_size=len(batch)), timed_texts(texts, batch_size, args.single),
            batch_size)
        for _, model in models]
    peer = None
    if args.model2vec_python:
        train_model2vec(args)
        peer = Model2VecProcess(args.model2vec_python, args)
        rows.append({"model": M2V, "kind": "StaticModelPipeline", "accuracy": peer.accuracy})
        predictors.append(peer.speed)
    rounds: list[dict[int, list[float]]] = [{b: [] for b in BATCHES} for _ in predictors]
    try:
        for _ in range(args.rounds):
            for batch_size in BATCHES:
                for measured, speed in zip(rounds, predictors):
                    measured[batch_size].append(speed(batch_size))
    finally:
        if peer is not None:
            peer.close()
    for row, by_batch in zip(rows, rounds):
        for batch_size, speeds in by_batch.items():
            row[f"b{batch_size}"] = {"best": max(speeds), "median": statistics.median(speeds), "rounds": speeds}
    return {"data": args.data, "examples": len(texts), "single": min(args.single, len(texts)),
            "threads": args.threads, "rounds": args.rounds, "models": rows}


def table(record: dict) -> str:
    """Markdown: accuracy, best and median ex/s at each batch size, and the best against model2vec's best."""
    peer = next((row for row in record["models"] if row["model"] == M2V), None)
    header = "| model | accuracy | b1 best | b1 median | b32 best | b32 median |" + \
        (" b1 vs model2vec | b32 vs model2vec |" if peer else "")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in record["models"]:
        cells = [row["model"], f"{row['accuracy']:.4f}"] + \
            [f"{row[f'b{b}'][k]:,.0f}" for b in BATCHES for k in ("best", "median")]
        if peer:
            cells += [f"{row[f'b{b}']['best'] / peer[f'b{b}']['best']:.2f}x" for b in BATCHES]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\nex/s, text to label; batch 1: one call per text over the first {record['single']:,} texts, batch "
                 f"32: over all {record['examples']:,}; {record['threads']} thread(s), {record['rounds']} alternating "
                 f"rounds; accuracy on all {record['examples']:,} ({record['data']}).")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="Trained classification students (or any classifier) to time.")
    parser.add_argument("--data", required=True, help="A text,label CSV: the texts timed and scored.")
    parser.add_argument("--model2vec-python", type=python_path,
                        help="The Python of model2vec's environment (none: no model2vec row).")
    parser.add_argument("--peers", default=str(ROOT / "runs" / "static" / "peers"),
                        help="bench_static.py's --out: PEERS/model2vec holds model2vec's pipeline.")
    parser.add_argument("--train", help="To train model2vec's pipeline when PEERS/model2vec is missing.")
    parser.add_argument("--dev", help="Its dev set (early stopping).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=500, help="Texts timed one call each at batch 1.")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", help="Also write the record as JSON here.")
    parser.add_argument("--serve-model2vec", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("threads", "rounds", "single"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.serve_model2vec:
        serve_model2vec(args)
        return
    if not args.models and not args.model2vec_python:
        raise SystemExit("give model directories, --model2vec-python, or both")
    os.environ.update(thread_env(args.threads))  # before numpy's pool starts (distill imports it)
    sys.path.insert(0, str(ROOT))
    from distill.io import write_json
    from distill.outputs import check_output_file
    if args.out:  # before minutes of timing: never an input (the --data it reads), nor in a model's folder
        check_output_file(args.out, [args.data, args.train, args.dev, *args.models], "throughput.py's record",
                          beside_model=False)
    record = measure(args)
    if args.out:
        write_json(args.out, record)
    print(table(record))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # model2vec's environment runs this file too, with no distill installed
    from distill.errors import run_script
    run_script(main)
