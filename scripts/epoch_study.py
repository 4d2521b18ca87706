"""Every epoch of one `nlp-train kd` run scored on dev and test: does the epoch that dev picks carry to test?

Runs ``nlp-train kd`` in this process with the options given after ``--`` (for ``--epochs`` epochs, no early
stopping) and keeps each epoch's weights in memory (a ``--report-to`` reporter of this script's), then scores, on
``--dev`` and ``--test``: every epoch; the epoch `kd` keeps (the best dev score); the epoch of the lowest dev loss
(cross-entropy against the gold labels, which moves more smoothly than accuracy); and the mean of the weights of
each ``--average FIRST-LAST`` range of epochs. Classification students; the model `kd` saves is its own as ever.

    python scripts/epoch_study.py --dev data/rotten_tomatoes/dev.csv --test data/rotten_tomatoes/test.csv \\
        --epochs 10 --json runs/epochs/static-s42.json -- --teacher runs/rt/teacher --model static \\
        --train data/rotten_tomatoes/train.csv --output runs/epochs/static-s42 --seed 42 --quiet
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets

ROOT = Path(__file__).resolve().parents[1]
REPORTER = "epoch-weights"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", required=True, help="Labelled dev data: kd's --dev, and scored for every epoch.")
    parser.add_argument("--test", required=True, help="Labelled test data, scored for every epoch (never chosen on).")
    parser.add_argument("--epochs", type=int, default=10, help="Epochs kd trains, all of them (no early stopping).")
    parser.add_argument("--average", action="append", default=[], metavar="FIRST-LAST",
                        help="Also score the mean of these epochs' weights (repeatable) [default: 1-4].")
    parser.add_argument("--json", help="Write the scores here as JSON too.")
    parser.add_argument("kd", nargs=argparse.REMAINDER, help="-- then nlp-train kd's options (--teacher, --model, "
                                                             "--train, --output, ...).")
    args = parser.parse_args(argv)
    args.kd = args.kd[1:] if args.kd[:1] == ["--"] else args.kd
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    taken = {"--dev", "--epochs", "--patience", "--report-to"} & {option.split("=")[0] for option in args.kd}
    if taken:
        parser.error(f"{sorted(taken)[0]} is this script's to set: give kd's other options after --")
    ranges = []
    for text in args.average or ["1-4"]:
        match = re.fullmatch(r"(\d+)-(\d+)", text)
        if not match or not 1 <= int(match[1]) <= int(match[2]) <= args.epochs:
            parser.error(f"--average {text}: FIRST-LAST, epochs from 1 to --epochs ({args.epochs})")
        ranges.append((int(match[1]), int(match[2])))
    args.average = ranges
    return args


def train_keeping_epochs(args: argparse.Namespace) -> tuple[object, dict[int, dict], dict[int, float]]:
    """kd's run, in this process: the model, each epoch's weights and each epoch's dev score as kd saw it."""
    from distill.callbacks import REPORTERS, Callback, register_reporter
    from distill.errors import DistillError
    from procedures.cli import main as nlp_train

    class EpochWeights(Callback):
        def __init__(self) -> None:
            self.model, self.weights, self.scores = None, {}, {}

        def on_train_begin(self, run: dict) -> None:
            self.model = run["model"]

        def on_epoch_end(self, ended) -> None:
            self.weights[ended.epoch] = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.scores[ended.epoch] = ended.score

    kept = EpochWeights()
    register_reporter(REPORTER, lambda target: kept)
    try:
        nlp_train(["kd", *args.kd, "--dev", args.dev, "--epochs", str(args.epochs), "--patience", str(args.epochs),
                   "--report-to", REPORTER])
    except SystemExit as done:
        if done.code:
            raise DistillError(f"nlp-train kd stopped (exit status {done.code}); nothing was scored") from None
    finally:  # the reporter is this run's alone: a process that goes on (a test) sees only its own reporters
        REPORTERS.pop(REPORTER, None)
    if kept.model is None or len(kept.weights) < args.epochs:
        raise DistillError("nlp-train kd trained no epochs here (an earlier run's output? give a new --output)")
    return kept.model, kept.weights, kept.scores


def study(args: argparse.Namespace, dev: datasets.Dataset, test: datasets.Dataset) -> dict:
    import torch

    from distill.errors import DistillError
    from distill.inference import decode_labels, evaluate, predict_logits
    from distill.losses import two_class_logits
    from distill.metrics import task_metrics
    model, weights, kd_scores = train_keeping_epochs(args)
    if model.task != "classification":
        raise DistillError("epoch_study.py scores classification students only")
    dev_texts, dev_labels = list(dev["text"]), list(dev["label"])
    dev_gold = torch.tensor([model.hierarchy.labels.index(label) for label in dev_labels])

    def scored(state: dict) -> dict:
        """Dev accuracy and loss from one pass over dev (accuracy as `evaluate` computes it), test accuracy."""
        model.load_state_dict(state)
        model.eval()
        results = predict_logits(model, dev_texts)
        logits = results.logits.float()
        logits = two_class_logits(logits) if logits.size(-1) == 1 else logits  # a --binary student's one logit
        return {"dev": task_metrics(model.task, model.hierarchy, dev_labels, decode_labels(model, results))["accuracy"],
                "dev_loss": float(torch.nn.functional.cross_entropy(logits, dev_gold)),
                "test": evaluate(model, list(test["text"]), list(test["label"]))["accuracy"]}

    epochs = {epoch: scored(state) for epoch, state in sorted(weights.items())}
    kept = max(kd_scores, key=lambda epoch: (kd_scores[epoch], -epoch))  # kd's pick: the first best
    lowest = min(epochs, key=lambda epoch: epochs[epoch]["dev_loss"])
    averages = {f"{a}-{b}": scored({key: sum(weights[e][key].float() for e in range(a, b + 1)) / (b - a + 1)
                                    for key in weights[a]}) for a, b in args.average}
    return {"kd": args.kd, "epochs": epochs, "kd_pick": {"epoch": kept, **epochs[kept]},
            "lowest_dev_loss": {"epoch": lowest, **epochs[lowest]}, "averages": averages}


def table(record: dict) -> str:
    rows = [(f"epoch {e}", s) for e, s in record["epochs"].items()] + \
        [(f"kd's pick (epoch {record['kd_pick']['epoch']})", record["kd_pick"]),
         (f"lowest dev loss (epoch {record['lowest_dev_loss']['epoch']})", record["lowest_dev_loss"])] + \
        [(f"mean of epochs {span}", s) for span, s in record["averages"].items()]
    return "\n".join(["| weights | dev acc | dev loss | test acc |", "|---|---|---|---|"] +
                     [f"| {name} | {s['dev']:.4f} | {s['dev_loss']:.4f} | {s['test']:.4f} |" for name, s in rows])


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from distill.data import read_classification
    from distill.io import write_json
    from distill.outputs import check_output_file
    dev, test = read_classification(args.dev), read_classification(args.test)  # checked before hours of training
    if args.json:
        check_output_file(args.json, [args.dev, args.test, *args.kd], "epoch_study.py's record", beside_model=False)
    record = study(args, dev, test)
    if args.json:
        write_json(args.json, record)
    print(table(record))
    return record


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's distill, as main() uses, not another one installed
    from distill.errors import run_script
    run_script(main)
