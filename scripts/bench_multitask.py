"""Measure the multi-task teacher against two single-task teachers (docs/multitask.md).

Trains, with the same encoder and settings, a joint Rotten Tomatoes + CoNLL-2003 NER teacher and
the two single-task teachers, then reports each head's and each single teacher's test score, and
the time to label the unlabelled news text with both tasks: one encoder pass (the joint teacher,
no cache) against the two single teachers one after the other.

    python scripts/bench_multitask.py --data data --out runs/bench-multitask --limit 2000 --epochs 3

Writes OUT/multitask.json. Trained teachers are reused: rerun to resume.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distill.io import write_json  # noqa: E402

TASKS = {"sentiment": ("classification", "rotten_tomatoes/{}.csv", ("train", "dev", "test")),
         "ner": ("tagging", "conll2003/{}.txt", ("train", "valid", "test"))}


def subset(path: Path, task: str, limit: int | None, out: Path) -> str:
    """The first `limit` examples of a training file (all of them without a limit), as a file."""
    if limit is None:
        return str(path)
    from distill.data import read_split
    examples, labels = read_split(str(path), task)
    out.parent.mkdir(parents=True, exist_ok=True)
    if task == "classification":
        import csv
        with open(out, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(zip(examples[:limit], labels[:limit]))
    else:
        out.write_text("".join("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n"
                               for words, tags in zip(examples[:limit], labels[:limit])), encoding="utf-8")
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", type=Path, help="Folder of `make data`.")
    parser.add_argument("--out", default="runs/bench-multitask", type=Path)
    parser.add_argument("--encoder", default="minilm-l6")
    parser.add_argument("--epochs", default=3, type=int)
    parser.add_argument("--max-length", default=128, type=int)
    parser.add_argument("--limit", type=int, help="Train on the first N examples of each task.")
    parser.add_argument("--unlabeled", default=2000, type=int, help="News lines to label for the timing.")
    args = parser.parse_args()

    from distill import (DataOptions, MultiTaskTeacher, Output, Runtime, TaskData, Teacher, TeacherConfig,
                         TeacherTraining, evaluate, train_multitask_teacher, train_teacher)
    from distill.data import read_split
    from distill.models import MODEL_CARD
    from distill.models.multitask import predict_heads
    from distill.inference import predict_logits

    config, training = TeacherConfig(encoder=args.encoder, max_length=args.max_length), TeacherTraining(epochs=args.epochs)
    env = Runtime(device="cpu")
    files = {name: [args.data / pattern.format(split) for split in splits]
             for name, (_, pattern, splits) in TASKS.items()}
    train = {name: subset(files[name][0], task, args.limit, args.out / "data" / files[name][0].name)
             for name, (task, _, _) in TASKS.items()}
    joint_dir, singles = args.out / "joint", {name: args.out / name for name in TASKS}
    seconds = {}
    if not (joint_dir / MODEL_CARD).exists():
        started = time.perf_counter()
        tasks = [TaskData(name, task, train[name], str(files[name][1])) for name, (task, _, _) in TASKS.items()]
        train_multitask_teacher(tasks, config, training, data=DataOptions(), output=Output(joint_dir, overwrite=True),
                                env=env)
        seconds["train_joint"] = round(time.perf_counter() - started, 1)
    for name, (task, _, _) in TASKS.items():
        if not (singles[name] / MODEL_CARD).exists():
            started = time.perf_counter()
            train_teacher(train[name], str(files[name][1]), TeacherConfig(**{**vars(config), "task": task}), training,
                          output=Output(singles[name], overwrite=True), env=env)
            seconds[f"train_{name}"] = round(time.perf_counter() - started, 1)

    joint = MultiTaskTeacher.from_pretrained(joint_dir)
    scores = {}
    for name, (task, _, _) in TASKS.items():
        examples, gold = read_split(str(files[name][2]), task)
        scores[name] = {"joint_head": evaluate(joint.head(name), examples, gold),
                        "single": evaluate(Teacher.from_pretrained(singles[name]), examples, gold)}
    news = [line.split() for line in (args.data / "unlabeled" / "news.txt").read_text(encoding="utf-8")
            .splitlines()[:args.unlabeled] if line.strip()]
    started = time.perf_counter()
    predict_heads(joint, news)
    one_pass = time.perf_counter() - started
    started = time.perf_counter()
    for name, (task, _, _) in TASKS.items():
        predict_logits(Teacher.from_pretrained(singles[name]), news if task == "tagging" else [" ".join(t) for t in news])
    two_passes = time.perf_counter() - started
    result = {"settings": {k: str(v) for k, v in vars(args).items()}, "test": scores, "seconds": seconds,
              "label_both": {"examples": len(news), "joint_one_pass_s": round(one_pass, 2),
                             "two_single_teachers_s": round(two_passes, 2),
                             "speed_up": round(two_passes / one_pass, 2)},
              "parameters": {"joint": joint.parameter_count(),
                             **{name: Teacher.from_pretrained(d).parameter_count() for name, d in singles.items()}}}
    write_json(args.out / "multitask.json", result)
    print("test: " + "; ".join(f"{n} joint {s['joint_head'].get('accuracy', s['joint_head'].get('f1')):.4f} "
                                  f"single {s['single'].get('accuracy', s['single'].get('f1')):.4f}"
                                  for n, s in scores.items()))
    print(f"labelling {len(news)} lines for both tasks: {one_pass:.1f}s in one pass, {two_passes:.1f}s with two "
          f"teachers ({two_passes / one_pass:.2f}x)")


if __name__ == "__main__":
    main()
