"""Measure the multi-task teacher against two single-task teachers (docs/multitask.md, issue 17).

With the same encoder and settings (nlp-train's defaults), a joint Rotten Tomatoes + CoNLL-2003
NER teacher against the two single-task teachers:

- each head's test score beside its single teacher's (the joint teacher's epoch passes every
  task's training set once, so each head gets as many encoder updates as its single teacher);
- the time to pseudo-label the unlabeled news text for both tasks: one encoder pass with every
  head (`nlp-train pseudo-label` of the joint teacher, no cache) against the two single teachers
  one after the other, best of `--repeats`;
- the default student of each task (`lstm`, `lstm-tagger`) distilled (`kd`, KL) from the joint
  head and from the single teacher, with the same settings: test score and retention.

    python scripts/bench_multitask.py --data data --out runs/bench-multitask \\
        --single sentiment=runs/bench/rt/teacher --single ner=runs/bench/conll/teacher \\
        --single-student sentiment=runs/bench/rt/lstm+kd-kl --single-student ner=runs/bench/conll/lstm-tagger+kd-kl

`--single` / `--single-student` reuse models trained elsewhere with the same settings (those of
scripts/benchmark.py are); otherwise they are trained here. Every trained model is reused when the
script runs again, so an interrupted run resumes. Writes OUT/multitask.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distill.io import write_json  # noqa: E402

TASKS = {"sentiment": {"task": "classification", "files": "rotten_tomatoes/{}.csv", "splits": ("train", "dev", "test"),
                       "metric": "accuracy", "student": "lstm"},
         "ner": {"task": "tagging", "files": "conll2003/{}.txt", "splits": ("train", "valid", "test"),
                 "metric": "f1", "student": "lstm-tagger"}}


def named_dirs(pairs: list[str], option: str) -> dict[str, Path]:
    """NAME=DIR options as {name: dir}, names checked against TASKS."""
    found = {}
    for pair in pairs:
        name, sep, directory = pair.partition("=")
        if not sep or name not in TASKS:
            sys.exit(f"{option} {pair}: expected NAME=DIR with NAME one of {', '.join(TASKS)}")
        found[name] = Path(directory)
    return found


def subset(path: Path, task: str, limit: int | None, out: Path) -> Path:
    """The first `limit` examples of a training file (all of them without a limit), as a file."""
    if limit is None:
        return path
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
    return out


def trained(directory: Path, train, inputs: dict[str, Path]) -> Path:
    """`directory` after `train(directory)` ran unless a model is already there (resume by rerunning): one that its
    own record says learnt from other `inputs` (role -> file or teacher, as the run's summary names them) is refused,
    not reused (a rerun with another --limit or --data reported the models of the first)."""
    from distill.errors import DistillError
    from distill.models import MODEL_CARD
    from distill.provenance import input_fingerprints, learnt_record
    if not (directory / MODEL_CARD).exists():
        train(directory)
        return directory
    recorded = learnt_record(directory).get("inputs") or {}
    expected = input_fingerprints({role: str(path) for role, path in inputs.items()})
    changed = [role for role, fingerprint in expected.items() if recorded.get(role) not in (None, fingerprint)]
    if changed:
        raise DistillError(f"{directory}: a model of other {', '.join(changed)} than this run's (another --data, "
                           "--limit or teacher?): remove it to train it again, or give another --out")
    return directory


def test_score(directory: Path, spec: dict, test: Path, head: str | None = None) -> float:
    from distill import evaluate
    from distill.data import read_split
    from distill.models import load_model
    model = load_model(directory)
    if head is not None:
        model = model.head(head)
    examples, gold = read_split(str(test), spec["task"])
    return round(evaluate(model, examples, gold)[spec["metric"]], 4)


def time_pseudo_label(teachers: list[Path], corpus: Path, out: Path, repeats: int) -> float:
    """Best of `repeats` wall times of `nlp-train pseudo-label` (no cache) by each teacher in turn."""
    from distill.pseudo_label import pseudo_label
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for number, teacher in enumerate(teachers):
            pseudo_label(str(teacher), str(corpus), str(out / f"labels-{number}.jsonl"), use_cache=False,
                         progress=False, device="cpu", overwrite=True)
        best = min(best, time.perf_counter() - started)
    return round(best, 2)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", type=Path, help="Folder of `make data`.")
    parser.add_argument("--out", default="runs/bench-multitask", type=Path)
    parser.add_argument("--encoder", default="minilm-l6")
    parser.add_argument("--epochs", type=int, help="Teacher epochs (default: nlp-train teacher's).")
    parser.add_argument("--limit", type=int, help="Train on the first N examples of each task.")
    parser.add_argument("--unlabeled", default=2000, type=int, help="News lines to pseudo-label for the timing.")
    parser.add_argument("--repeats", default=2, type=int, help="Timing repeats (the best counts).")
    parser.add_argument("--threads", default=1, type=int, help="Torch threads of every stage.")
    parser.add_argument("--seed", default=42, type=int)
    parser.add_argument("--single", action="append", default=[], metavar="NAME=DIR",
                        help="A single-task teacher already trained with the same settings.")
    parser.add_argument("--single-student", action="append", default=[], metavar="NAME=DIR",
                        help="The student distilled from that single teacher, already trained.")
    parser.add_argument("--student-epochs", type=int, help="Student epoch cap (default: nlp-train kd's).")
    args = parser.parse_args(argv)
    for name in ("epochs", "limit", "unlabeled", "repeats", "threads", "student_epochs"):  # None: the default
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")

    import torch
    from distill import (Distiller, DistillSettings, MultiTaskTeacher, Output, Runtime, TaskData, TeacherConfig, TeacherStudentDistill,
                         TeacherTraining, TrainSettings, student_config, train_multitask_teacher, train_teacher)
    from distill.models import load_model

    torch.set_num_threads(args.threads)
    env = Runtime(device="cpu", threads=args.threads, progress=False)
    config = TeacherConfig(encoder=args.encoder)
    training = TeacherTraining(seed=args.seed, **({"epochs": args.epochs} if args.epochs else {}))
    files = {name: [args.data / spec["files"].format(split) for split in spec["splits"]]
             for name, spec in TASKS.items()}
    train = {name: subset(files[name][0], spec["task"], args.limit, args.out / "data" / files[name][0].name)
             for name, spec in TASKS.items()}
    singles, single_students = named_dirs(args.single, "--single"), named_dirs(args.single_student, "--single-student")
    seconds: dict[str, float] = {}

    def timed(key: str, train_model):
        def run(directory: Path) -> None:
            started = time.perf_counter()
            train_model(directory)
            seconds[key] = round(time.perf_counter() - started, 1)
        return run

    joint = trained(args.out / "joint", timed("train_joint", lambda d: train_multitask_teacher(
        [TaskData(name, spec["task"], str(train[name]), str(files[name][1])) for name, spec in TASKS.items()],
        config, training, output=Output(d, overwrite=True), env=env)),
        {f"{part}:{name}": path for name in TASKS for part, path in (("train", train[name]), ("dev", files[name][1]))})
    for name, spec in TASKS.items():
        singles[name] = singles.get(name) or trained(args.out / name, timed(f"train_{name}", lambda d, n=name, s=spec:
            train_teacher(str(train[n]), str(files[n][1]), TeacherConfig(**{**vars(config), "task": s["task"]}),
                          training, output=Output(d, overwrite=True), env=env)),
            {"train": train[name], "dev": files[name][1]})

    student_settings = TrainSettings(seed=args.seed, **({"epochs": args.student_epochs} if args.student_epochs else {}))

    def distil(teacher: Path, head: str | None, spec: dict, name: str):
        return lambda d: Distiller(str(teacher), student_config(spec["student"]), TeacherStudentDistill(kd_loss="kl"),
                                   student_settings, distill=DistillSettings(cache_dir=args.out / "cache", head=head),
                                   env=env).fit(str(train[name]), str(files[name][1]),
                                                  output=Output(d, overwrite=True))

    results = {}
    for name, spec in TASKS.items():
        test = files[name][2]
        data = {"train": train[name], "dev": files[name][1]}
        from_joint = trained(args.out / f"{spec['student']}+kd-kl-from-joint",
                             timed(f"kd_joint_{name}", distil(joint, name, spec, name)), {"teacher": joint, **data})
        from_single = single_students.get(name) or trained(
            args.out / f"{spec['student']}+kd-kl-from-single", timed(f"kd_single_{name}", distil(singles[name], None,
                                                                                               spec, name)),
            {"teacher": singles[name], **data})
        scores = {"joint_head": test_score(joint, spec, test, head=name),
                  "single": test_score(singles[name], spec, test),
                  "student_from_joint": test_score(from_joint, spec, test),
                  "student_from_single": test_score(from_single, spec, test)}
        scores["retention_joint"] = round(scores["student_from_joint"] / scores["joint_head"], 4)
        scores["retention_single"] = round(scores["student_from_single"] / scores["single"], 4)
        results[name] = {"metric": spec["metric"], "models": {"single": str(singles[name]),
                                                              "student_from_single": str(from_single)}, **scores}
        print(f"{name} ({spec['metric']}): joint head {scores['joint_head']:.4f}, single {scores['single']:.4f}; "
              f"{spec['student']} from joint {scores['student_from_joint']:.4f} ({scores['retention_joint']:.1%}), "
              f"from single {scores['student_from_single']:.4f} ({scores['retention_single']:.1%})", flush=True)

    corpus = args.out / "data" / f"news-{args.unlabeled}.txt"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    lines = (args.data / "unlabeled" / "news.txt").read_text(encoding="utf-8").splitlines()
    corpus.write_text("".join(line + "\n" for line in lines[:args.unlabeled]), encoding="utf-8")
    timing_dir = args.out / "timing"
    timing_dir.mkdir(exist_ok=True)
    two = time_pseudo_label([singles[name] for name in TASKS], corpus, timing_dir, args.repeats)
    one = time_pseudo_label([joint], corpus, timing_dir, args.repeats)
    label_both = {"lines": args.unlabeled, "joint_one_pass_s": one, "two_single_teachers_s": two,
                  "joint_over_two": round(one / two, 3)}
    print(f"pseudo-labelling {args.unlabeled} news lines for both tasks: {one:.1f}s with the joint teacher, "
          f"{two:.1f}s with the two single teachers ({one / two:.2f}x)")
    parameters = {"joint": MultiTaskTeacher.from_pretrained(joint).parameter_count(),
                  **{name: load_model(d).parameter_count() for name, d in singles.items()}}
    result = {"settings": {k: str(v) for k, v in vars(args).items()}, "test": results, "label_both": label_both,
              "seconds": seconds, "parameters": parameters}
    write_json(args.out / "multitask.json", result)
    return result


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
