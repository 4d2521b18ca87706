#!/usr/bin/env python
"""Teachers without labels, measured: a zero-shot teacher (label descriptions and a sentence encoder) and the
students distilled from it with no gold training label, beside TF-IDF + logistic regression and the BiLSTM
trained on 50, 200 and 1,000 gold labels (docs/results.md, "Teachers without labels").

Per dataset (Rotten Tomatoes, BBC News; `python scripts/get_data.py` fetches them into data/):

1. ``nlp-train teacher --zero-shot`` from hand-written label descriptions; its temperature fitted on the dev
   split (gold labels: the dev split also picks the students' epochs below);
2. ``nlp-train evaluate`` of the teacher on the test split;
3. ``nlp-train pseudo-label`` of the train texts (their labels hidden) and of unlabeled text of the domain
   (filling the logit cache), then ``nlp-train kd`` of a BiLSTM and of the static student on both, the
   train texts' pseudo-labels as their hard labels;
4. the gold-label curve: TF-IDF + logistic regression and ``nlp-train student --model lstm`` on the first
   50, 200 and 1,000 examples of a seeded shuffle of the train split.

Every run is at one torch thread, niced; each command is appended to OUT/commands.txt as it starts and a
step whose output exists is skipped (rerun to continue; OUT/settings.json records the settings and data it ran
with, and a rerun of others is refused). The numbers go to OUT/zero-shot.json and the table
to stdout. Subsets (``--train-texts``, ``--unlabeled-texts``, ``--dev-size``, ``--test-size``, ``--words``) keep a run on a
shared 2-core machine short; docs/results.md gives the ones it ran with.

    python scripts/bench_zero_shot.py --dataset rt --out runs/zero-shot
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a file from anywhere
    sys.path.insert(0, str(ROOT))

from distill.errors import DistillError  # noqa: E402
from distill.io import check_folder, real_path, write_json  # noqa: E402

DATASETS = {
    "rt": {"folder": "rotten_tomatoes", "unlabeled": "unlabeled/movies.txt",
           "labels": "negative=a negative review|a bad movie,positive=a positive review|a good movie"},
    "bbc": {"folder": "bbc_news", "unlabeled": "unlabeled/news_articles.txt",
            "labels": "business=business news|the economy and companies|markets and trade,"
                      "entertainment=entertainment news|film and music|television and celebrities,"
                      "politics=political news|the government and parliament|elections and parties,"
                      "sports=sports news|football and tennis|athletes and matches,"
                      "tech=technology news|computers and the internet|mobile phones and software"},
}
GOLD_SIZES = (50, 200, 1000)
SEED = 42
# The settings a run's steps depend on: OUT/settings.json records them (`same_run`).
RUN_SETTINGS = ("dataset", "encoder", "train_texts", "unlabeled_texts", "words", "dev_size", "test_size",
                "max_length", "epochs", "gold_epochs")


def read_labelled(path: Path) -> tuple[list[str], list[str]]:
    """A labelled split, read and checked as every command reads one."""
    from distill.data.classification import read_classification
    rows = read_classification(str(path))
    return rows["text"], [str(label) for label in rows["label"]]


def cut(text: str, words: int | None) -> str:
    return text if words is None else " ".join(text.split()[:words])


def write_csv(path: Path, texts: list[str], labels: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(zip(texts, labels))


def read_sources(dataset: str, data: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Every split and the unlabeled text of `dataset` under `data`, read whole before anything is written: a
    missing or malformed file is one error line and leaves no output behind."""
    from distill.data.unlabeled import read_unlabeled
    spec = DATASETS[dataset]
    sources = {name: read_labelled(data / spec["folder"] / f"{name}.csv") for name in ("train", "dev", "test")}
    sources["unlabeled"] = (read_unlabeled(str(data / spec["unlabeled"]), "classification")["text"], [])
    return sources


def prepare(sources: dict[str, tuple[list[str], list[str]]], out: Path, train_texts: int | None,
            unlabeled_texts: int | None, words: int | None, sizes: dict[str, int | None]) -> dict[str, Path]:
    """The splits as this benchmark reads them: texts cut to `words`, train texts without labels, subsets."""
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    paths = {name: data / f"{name}.csv" for name in ("dev", "test")}
    for name in paths:
        texts, labels = sources[name]  # the splits are seeded shuffles already
        write_csv(paths[name], [cut(t, words) for t in texts][:sizes[name]], labels[:sizes[name]])
    texts, labels = sources["train"]
    order = list(range(len(texts)))
    random.Random(SEED).shuffle(order)
    texts, labels = [cut(texts[i], words) for i in order], [labels[i] for i in order]
    paths["train_texts"] = data / "train_texts.txt"  # labels hidden
    paths["train_texts"].write_text("".join(f"{t.replace(chr(10), ' ')}\n" for t in texts[:train_texts]),
                                    encoding="utf-8")
    for size in GOLD_SIZES:
        paths[f"gold{size}"] = data / f"gold{size}.csv"
        write_csv(paths[f"gold{size}"], texts[:size], labels[:size])
    paths["unlabeled"] = data / "unlabeled.txt"
    lines = sources["unlabeled"][0][:unlabeled_texts]
    paths["unlabeled"].write_text("".join(f"{cut(t.replace(chr(10), ' '), words)}\n" for t in lines), encoding="utf-8")
    return paths


def same_run(out: Path, args: argparse.Namespace, data: Path) -> None:
    """OUT's record of the settings and source data its steps were run with (OUT/settings.json, written by the first
    run): a rerun of other ones is refused, as every step whose output exists is skipped (a rerun with another
    --test-size reported the first run's scores, its teacher and students trained on the first run's data)."""
    from distill.io import file_sha256, read_json
    spec = DATASETS[args.dataset]
    sources = [data / spec["folder"] / f"{name}.csv" for name in ("train", "dev", "test")] + [data / spec["unlabeled"]]
    record = {**{name: getattr(args, name) for name in RUN_SETTINGS},
              "sources": {path.relative_to(data).as_posix(): file_sha256(path) for path in sources}}
    path = out / "settings.json"
    if not path.exists():
        write_json(path, record)
        return
    kept = read_json(path)
    changed = [name for name in record if not isinstance(kept, dict) or kept.get(name) != record[name]]
    if changed:
        shown = ", ".join("data under --data" if name == "sources" else f"--{name.replace('_', '-')}"
                          for name in changed)
        raise DistillError(f"{out}: holds a run made with different {shown} (its settings.json): its steps would "
                           "be kept as this run's; give another --out, or remove it to start over")


def nlp_train(out: Path, *args: str) -> None:
    command = [sys.executable, "-m", "procedures.cli", "--threads", "1", *map(str, args)]
    with open(out / "commands.txt", "a", encoding="utf-8") as log:
        log.write(shlex.join(["nlp-train", *command[3:]]) + "\n")
    if subprocess.run(["nice", "-n", "10", *command], cwd=ROOT).returncode:
        raise DistillError(f"this step failed (its error is above): {shlex.join(['nlp-train', *command[3:]])}")


def test_score(out: Path, model: Path, test: Path) -> float:
    metrics = model / "eval_metrics.json"
    if not metrics.exists():
        nlp_train(out, "evaluate", model, test, "--output", metrics, "--quiet")
    return json.loads(metrics.read_text())["accuracy"]


def tfidf_score(train: Path, test: Path) -> float:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    texts, labels = read_labelled(train)
    test_texts, test_labels = read_labelled(test)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    classifier = LogisticRegression(max_iter=2000, C=10.0).fit(vectorizer.fit_transform(texts), labels)
    predicted = classifier.predict(vectorizer.transform(test_texts))
    return sum(p == g for p, g in zip(predicted, test_labels)) / len(test_labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    parser.add_argument("--data", default="data", help="The folder scripts/get_data.py fills (default: data).")
    parser.add_argument("--out", default="runs/zero-shot")
    parser.add_argument("--encoder", default="minilm-l6")
    parser.add_argument("--train-texts", type=int, help="Use the first N train texts (seeded shuffle).")
    parser.add_argument("--unlabeled-texts", type=int, help="Use the first N lines of the unlabeled text.")
    parser.add_argument("--words", type=int, help="Cut every text to its first N words.")
    parser.add_argument("--dev-size", type=int, help="Use the first N dev examples (temperature, epochs).")
    parser.add_argument("--test-size", type=int, help="Score every row on the first N test examples.")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=4, help="kd's epochs (patience 2).")
    parser.add_argument("--gold-epochs", type=int, default=10, help="The gold-label BiLSTMs' epochs (patience 3).")
    args = parser.parse_args(argv)
    for name in ("train_texts", "unlabeled_texts", "words", "dev_size", "test_size", "max_length", "epochs",
                 "gold_epochs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    sources = read_sources(args.dataset, ROOT / args.data)
    out = real_path(ROOT / args.out / args.dataset)
    check_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    same_run(out, args, ROOT / args.data)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    paths = prepare(sources, out, args.train_texts, args.unlabeled_texts, args.words,
                    {"dev": args.dev_size, "test": args.test_size})
    cache = out / "cache"
    results: dict = {"dataset": args.dataset, "encoder": args.encoder, "settings": vars(args)}
    teacher = out / f"teacher-{args.encoder}"
    if not (teacher / "distill.json").exists():
        nlp_train(out, "teacher", "--zero-shot", "--encoder", args.encoder, "--labels", DATASETS[args.dataset]["labels"],
                  "--dev", paths["dev"], "--max-length", args.max_length, "--output", teacher, "--quiet")
    summary = json.loads((teacher / "train_summary.json").read_text())
    results["teacher"] = {"temperature": summary["temperature"], "dev": summary["best"]["dev"]["accuracy"],
                          "test": test_score(out, teacher, paths["test"])}
    pseudo = {}
    for name in ("train_texts", "unlabeled"):
        pseudo[name] = out / f"pseudo-{name}.jsonl"
        if not pseudo[name].exists():
            nlp_train(out, "pseudo-label", "--teacher", teacher, "--input", paths[name], "--output", pseudo[name],
                      "--cache-dir", cache, "--quiet")
    for model in ("lstm", "static"):
        student = out / f"kd-{model}"
        if not (student / "train_summary.json").exists():
            nlp_train(out, "kd", "--teacher", teacher, "--model", model, "--train", pseudo["train_texts"], "--dev",
                      paths["dev"], "--unlabeled", pseudo["unlabeled"], "--cache-dir", cache, "--epochs", args.epochs,
                      "--patience", "2", "--output", student, "--quiet")
        results[f"kd_{model}"] = test_score(out, student, paths["test"])
    for size in GOLD_SIZES:
        results[f"tfidf_{size}"] = tfidf_score(paths[f"gold{size}"], paths["test"])
        student = out / f"gold{size}-lstm"
        if not (student / "train_summary.json").exists():
            nlp_train(out, "student", "--model", "lstm", "--train", paths[f"gold{size}"], "--dev", paths["dev"],
                      "--epochs", args.gold_epochs, "--patience", "3", "--output", student, "--quiet")
        results[f"lstm_{size}"] = test_score(out, student, paths["test"])
    write_json(out / "zero-shot.json", results)
    print(f"| {args.dataset} | teacher {results['teacher']['test']:.4f} (T={results['teacher']['temperature']:.3g}) | "
          f"kd BiLSTM {results['kd_lstm']:.4f} | kd static {results['kd_static']:.4f} | "
          + " | ".join(f"{size}: TF-IDF {results[f'tfidf_{size}']:.4f}, BiLSTM {results[f'lstm_{size}']:.4f}"
                       for size in GOLD_SIZES) + " |")
    return 0


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
