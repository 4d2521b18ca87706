#!/usr/bin/env python
"""Benchmark on real data: teacher, students alone, students with KD, side by side.

Every training stage is an ordinary `nlp-train` command run in a subprocess; a stage whose
output already exists is skipped, so an interrupted run continues where it stopped. The
results (quality, size, CPU speed, training cost) go to ``OUT/results.json`` and a Markdown
table; the commands it ran are listed with them.

    python scripts/benchmark.py                      # full run on data/ (make data first)
    python scripts/benchmark.py --quick              # minutes: subsets, fewer epochs
    python scripts/benchmark.py --tasks rt --students lstm
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASKS = {
    "rt": {"name": "Rotten Tomatoes sentiment", "task": "classification", "metric": "accuracy",
           "train": "rotten_tomatoes/train.csv", "dev": "rotten_tomatoes/dev.csv", "test": "rotten_tomatoes/test.csv",
           "unlabeled": "unlabeled/movies.txt", "students": ["lstm", "cnn"], "encoder_lr": "5e-5",
           "teacher_args": ["--max-length", "96", "--pooling", "mean"]},
    "conll": {"name": "CoNLL-2003 NER", "task": "tagging", "metric": "f1",
              "train": "conll2003/train.txt", "dev": "conll2003/valid.txt", "test": "conll2003/test.txt",
              "unlabeled": "unlabeled/news.txt", "students": ["lstm-tagger", "idcnn-tagger"],
              "encoder_lr": "8e-5", "teacher_args": ["--max-length", "128"]},
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.commands: list[str] = []
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "DISTILL_CACHE": str(self.out / "cache")}

    def nlp_train(self, *args: str, done: Path | None = None) -> None:
        """Run one nlp-train stage unless its output marker exists (resumable)."""
        if self.args.train_threads and args[0] in ("student", "kd"):
            args = ("--threads", self.args.train_threads, *args)
        command = [sys.executable, "-m", "procedures.cli", *map(str, args)]
        self.commands.append("nlp-train " + shlex.join(map(str, args)))
        if done is not None and done.exists():
            log(f"skip (done): {done.parent.name}")
            return
        log("run: nlp-train " + " ".join(map(str, args[:2])) + f" ... {done.parent.name if done else ''}")
        with open(self.out / "stages.log", "a", encoding="utf-8") as stage_log:
            subprocess.run(command, check=True, cwd=ROOT, env=self.env, stdout=stage_log)

    def data(self, key: str, split: str) -> str:
        path = Path(self.args.data) / TASKS[key][split]
        if self.args.quick and split in ("train", "unlabeled"):
            return str(self.subset(path, self.args.quick_size if split == "train" else self.args.quick_size * 2))
        return str(path)

    def subset(self, path: Path, size: int) -> Path:
        """First `size` examples of a file (CSV rows, CoNLL sentences or lines), for --quick."""
        target = self.out / "subsets" / f"{size}-{path.parent.name}-{path.name}"
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".csv":
            rows = list(csv.reader(text.splitlines(keepends=True)))
            with open(target, "w", newline="", encoding="utf-8") as handle:
                csv.writer(handle).writerows(rows[: size + 1])
        elif path.name.endswith(".txt") and "conll" in str(path):
            target.write_text("\n\n".join(text.split("\n\n")[:size]) + "\n", encoding="utf-8")
        else:
            target.write_text("".join(text.splitlines(keepends=True)[:size]), encoding="utf-8")
        return target

    def run_task(self, key: str) -> dict:
        spec, args = TASKS[key], self.args
        base = self.out / key
        train, dev, test = self.data(key, "train"), self.data(key, "dev"), self.data(key, "test")
        results = {"task": spec["name"], "metric": spec["metric"], "models": {}}
        teacher = base / "teacher"
        self.nlp_train("teacher", "--task", spec["task"], "--encoder", args.encoder, "--train", train, "--dev", dev,
                       "--output", teacher, "--epochs", args.teacher_epochs,
                       "--encoder-lr", args.encoder_lr or spec["encoder_lr"],
                       "--seed", args.seed, "--quiet", *spec["teacher_args"], done=teacher / "train_summary.json")
        runs = {"teacher": teacher}
        students = [s for s in spec["students"] if not args.students or s in args.students]
        for student in students:
            common = ["--model", student, "--train", train, "--dev", dev, "--epochs", args.student_epochs,
                      "--seed", args.seed, "--quiet"] + (["--crf"] if student == "lstm-tagger" and args.crf else [])
            variants = {f"{student}": ["student"],
                        f"{student}+teacher-emb": ["student", "--embeddings-from-teacher", teacher],
                        f"{student}+kd-kl": ["kd", "--teacher", teacher, "--kd-loss", "kl"],
                        f"{student}+kd-mse": ["kd", "--teacher", teacher, "--kd-loss", "mse"],
                        f"{student}+kd-kl+unlabelled": ["kd", "--teacher", teacher, "--kd-loss", "kl",
                                                        "--unlabeled", self.data(key, "unlabeled"),
                                                        "--unlabeled-ratio", args.unlabeled_ratio]}
            for name, head in variants.items():
                output = base / name
                self.nlp_train(*head, *common, "--output", output, done=output / "train_summary.json")
                runs[name] = output
        for name, output in runs.items():
            metrics_file = output / "test_metrics.json"
            self.nlp_train("evaluate", output, test, "--output", metrics_file, "--quiet", done=metrics_file)
            metrics = json.loads(metrics_file.read_text())
            summary = json.loads((output / "train_summary.json").read_text())
            results["models"][name] = {
                "score": metrics[spec["metric"]], "test": metrics, "parameters": summary["parameters"],
                "best_epoch": summary["best"]["epoch"],
                "epoch_seconds": [h["epoch_seconds"] for h in summary["history"]],
                "teacher_logits_seconds": summary.get("teacher_logits_seconds")}
        results["speed"] = self.speed(runs, test, spec)
        teacher_score = results["models"]["teacher"]["score"]
        for name, row in results["models"].items():
            row["retention"] = row["score"] / teacher_score if teacher_score else None
            row.update(results["speed"].get(name, {}))
        if spec["task"] == "classification":
            results["tfidf"] = tfidf_baseline(train, test)
        return results

    def speed(self, runs: dict, test: str, spec: dict) -> dict:
        """Batch-32 throughput and batch-1 latency on the same test sentences, same process, CPU."""
        import torch
        from distill.inference import predict_logits
        from distill.models import load_model
        from procedures.common import DataOptions, read_split
        from procedures.compare import throughput, weight_bytes
        torch.set_num_threads(self.args.threads)
        examples, _ = read_split(test, spec["task"], DataOptions())
        examples = examples[: self.args.speed_examples]
        speed = {}
        for name, output in runs.items():
            model = load_model(output, device="cpu")
            latency = examples[:100]
            started = time.perf_counter()
            for example in latency:
                predict_logits(model, [example], 1)
            speed[name] = {"examples_per_second_b32": throughput(model, examples, 32),
                           "latency_ms_b1": 1000 * (time.perf_counter() - started) / len(latency),
                           "weight_bytes": weight_bytes(model)}
        reference = speed["teacher"]
        for row in speed.values():
            row["speedup_b32"] = row["examples_per_second_b32"] / reference["examples_per_second_b32"]
            row["latency_ratio_b1"] = reference["latency_ms_b1"] / row["latency_ms_b1"]
        return speed


def tfidf_baseline(train: str, test: str) -> dict:
    """TF-IDF (1-2 grams) + logistic regression: the classical reference for sentiment."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from distill.data import read_classification
    train_data, test_data = read_classification(train), read_classification(test)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    model = LogisticRegression(max_iter=2000, C=4.0)
    model.fit(vectorizer.fit_transform(train_data["text"]), train_data["label"])
    predicted = model.predict(vectorizer.transform(test_data["text"]))
    return {"accuracy": float((predicted == test_data["label"]).mean())}


def markdown(results: dict, args, commands: list[str]) -> str:
    lines = ["# Benchmarks", "", f"Measured {datetime.date.today()} on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPU cores, torch threads {args.threads}. Command: "
             f"`python scripts/benchmark.py {' '.join(sys.argv[1:])}`", ""]
    for key, task in results.items():
        lines += [f"## {task['task']} ({task['metric']}, test set)", "",
                  "| model | score | retention | parameters | weights MB | ex/s @32 | speed-up @32 | ms @1 | epoch s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name, row in task["models"].items():
            lines.append(f"| {name} | {row['score']:.4f} | {row['retention']:.1%} | {row['parameters']:,} | "
                         f"{row['weight_bytes'] / 1e6:.1f} | {row['examples_per_second_b32']:.0f} | "
                         f"{row['speedup_b32']:.1f}x | {row['latency_ms_b1']:.1f} | "
                         f"{sum(row['epoch_seconds']) / len(row['epoch_seconds']):.1f} |")
        if "tfidf" in task:
            lines += ["", f"TF-IDF (1-2 grams) + logistic regression: {task['tfidf']['accuracy']:.4f}"]
        lines.append("")
    lines += ["## Commands", "", "```"] + commands + ["```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT / "data"), help="Folder made by scripts/get_data.py.")
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench"))
    parser.add_argument("--tasks", default="rt,conll")
    parser.add_argument("--students", nargs="*", help="Only these students (default: all of each task).")
    parser.add_argument("--encoder", default="minilm-l6")
    parser.add_argument("--encoder-lr", help="Teacher encoder learning rate (default: per task, 5e-5 RT, 8e-5 CoNLL).")
    parser.add_argument("--teacher-epochs", type=int, default=3)
    parser.add_argument("--student-epochs", type=int, default=12)
    parser.add_argument("--crf", action="store_true", help="lstm-tagger with a CRF layer.")
    parser.add_argument("--unlabeled-ratio", default="1", help="Unlabelled examples per labelled one, at most.")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=torch_threads())
    parser.add_argument("--train-threads", type=int, help="torch threads for student and kd training stages.")
    parser.add_argument("--speed-examples", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="Subsets and few epochs: minutes, not hours.")
    parser.add_argument("--quick-size", type=int, default=1000)
    parser.add_argument("--report", help="Markdown report path (default: OUT/benchmarks.md).")
    args = parser.parse_args()
    if args.quick:
        args.teacher_epochs, args.student_epochs = 1, min(args.student_epochs, 3)
        args.speed_examples = min(args.speed_examples, 256)
    bench = Bench(args)
    results = {key: bench.run_task(key) for key in args.tasks.split(",")}
    (bench.out / "results.json").write_text(json.dumps(results, indent=2))
    report = Path(args.report or bench.out / "benchmarks.md")
    report.write_text(markdown(results, args, bench.commands))
    log(f"wrote {bench.out / 'results.json'} and {report}")


def torch_threads() -> int:
    import torch
    return torch.get_num_threads()


if __name__ == "__main__":
    main()
