"""Which teacher to run the bulk pass with, measured on this machine: `nlp-train pseudo-label` with the int8
ONNX export, the fp32 ONNX export and the PyTorch teacher, and the transformers pipeline (fp32), side by side
on the same model, texts and threads; with --kd, students distilled from the int8 and from the fp32 export's
logits, scored on held-out data.

The ratios between them depend on the CPU (ONNX Runtime's fp32 kernels, and its int8 ones, which pay on CPUs
with VNNI-like instructions), so measure where the bulk pass will run:

    python scripts/bench_onnx_teacher.py runs/rt/teacher --input data/unlabeled/movies.txt --lines 2000 \\
        --check-data data/rotten_tomatoes/dev.csv --threads 1
    python scripts/bench_onnx_teacher.py runs/rt/teacher --input data/unlabeled/movies.txt --lines 2000 \\
        --check-data data/rotten_tomatoes/dev.csv --kd --train data/rotten_tomatoes/train.csv \\
        --dev data/rotten_tomatoes/dev.csv --test data/rotten_tomatoes/test.csv --student lstm

Each pseudo-label run times the teacher alone (no logit cache; model loading and the up-front truncation
count are outside its seconds), the pipeline its call; every variant runs `--rounds` times, alternating,
the best kept (the machine may be shared). Labels changed count against the PyTorch teacher's (words, for
tagging). Exports are written under OUT (an earlier run's are reused while they are of this teacher as it is
now, checked on the same data); OUT/onnx-teacher.json holds every number.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_measure import log, shown  # noqa: E402
from distill.io import write_json  # noqa: E402

VARIANTS = ("onnx-int8", "onnx-fp32", "pytorch")


def exports(teacher: Path, out: Path, check_data: str) -> dict[str, Path]:
    """The teacher and its fp32 and int8 ONNX exports (both checked on `check_data`; an earlier run's reused where
    they are of this teacher as it is now, checked on that data: `finished_export`): variant -> directory."""
    from distill.export import export_model, finished_export
    found = {"pytorch": teacher}
    for variant, quantize in (("onnx-fp32", None), ("onnx-int8", "int8")):
        target = out / variant
        if not finished_export(target, teacher, "onnx", quantize, check_data):
            log(f"export {shown(teacher)} -> {shown(target)}")
            export_model(str(teacher), str(target), "onnx", quantize, check_data, overwrite=True)
        found[variant] = target
    return found


def subset(source: Path, lines: int, out: Path) -> Path:
    """The first `lines` lines of `source` (all of them for 0), as the file every variant reads."""
    with open(source, encoding="utf-8") as handle:
        kept = list(itertools.islice(handle, lines or None))
    path = out / f"corpus-{lines or 'all'}.txt"
    path.write_text("".join(kept), encoding="utf-8")
    return path


def labels_in(path: Path) -> list:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [row["label"] if "label" in row else row["tags"] for row in rows]


def changed(reference: list, labels: list) -> tuple[int, int]:
    """(labels changed, labels compared): per text, or per word for tagging."""
    pairs = [(a, b) for r, s in zip(reference, labels) for a, b in (zip(r, s) if isinstance(r, list) else [(r, s)])]
    return sum(a != b for a, b in pairs), len(pairs)


def transformers_pipeline(teacher: Path, task: str):
    """The teacher converted to a stock transformers model behind `transformers.pipeline`, or None where it has no
    stock form (a teacher reading long texts in windows)."""
    from transformers import pipeline
    from transformers.utils import logging as hf_logging
    from distill.errors import DistillError
    from distill.hf_model import to_transformers
    from distill.models import load_model
    try:
        converted, tokenizer = to_transformers(load_model(teacher, device="cpu"))
    except DistillError as error:
        log(f"no pipeline: {error}")
        return None
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(hf_logging.CRITICAL)
    name = "text-classification" if task == "classification" else "token-classification"
    runner = pipeline(name, model=converted, tokenizer=tokenizer, device="cpu")
    hf_logging.set_verbosity(verbosity)
    return runner


def pseudo_label_stage(models: dict[str, Path], corpus: Path, out: Path, rounds: int, batch_size: int,
                       with_pipeline: bool) -> dict:
    """ex/s of pseudo-label with each variant and of the pipeline (best of `rounds`), labels changed against PyTorch."""
    from distill.models import read_model_card
    from distill.pseudo_label import pseudo_label
    task = read_model_card(models["pytorch"])["task"]
    lines = corpus.read_text(encoding="utf-8").splitlines()
    runner = transformers_pipeline(models["pytorch"], task) if with_pipeline else None
    if runner is not None:
        runner(lines[:batch_size], batch_size=batch_size, **({"truncation": True} if task == "classification" else {}))
    seconds: dict[str, list[float]] = {name: [] for name in [*VARIANTS, *(["pipeline"] if runner else [])]}
    outputs = None
    for round_number in range(rounds):
        for variant in VARIANTS:
            log(f"round {round_number + 1}: pseudo-label with {variant}")
            stats = pseudo_label(str(models[variant]), str(corpus), str(out / f"pseudo-{variant}.jsonl"), batch_size,
                                 progress=False, device="cpu", overwrite=True, use_cache=False)
            seconds[variant].append(stats["seconds"])
        if runner is not None:
            log(f"round {round_number + 1}: transformers pipeline")
            started = time.perf_counter()
            outputs = runner(lines, batch_size=batch_size, **({"truncation": True} if task == "classification" else {}))
            seconds["pipeline"].append(round(time.perf_counter() - started, 3))
    reference = labels_in(out / "pseudo-pytorch.jsonl")
    result = {"examples": len(lines), "batch_size": batch_size, "task": task, "runs_seconds": seconds, "variants": {}}
    for name, runs in seconds.items():
        entry = {"seconds": min(runs), "examples_per_second": round(len(lines) / min(runs), 1)}
        if name in VARIANTS:
            entry["labels_changed"], entry["labels_compared"] = changed(reference, labels_in(out / f"pseudo-{name}.jsonl"))
        elif task == "classification":  # the pipeline's labels per text; a token pipeline groups sub-words its own way
            entry["labels_changed"], entry["labels_compared"] = changed(reference, [o["label"] for o in outputs])
        result["variants"][name] = entry
    speed = {name: entry["examples_per_second"] for name, entry in result["variants"].items()}
    result["ratios"] = {"int8 / onnx fp32": speed["onnx-int8"] / speed["onnx-fp32"],
                        "int8 / pytorch": speed["onnx-int8"] / speed["pytorch"],
                        "onnx fp32 / pytorch": speed["onnx-fp32"] / speed["pytorch"],
                        **({"pytorch / pipeline": speed["pytorch"] / speed["pipeline"],
                            "int8 / pipeline": speed["onnx-int8"] / speed["pipeline"]} if "pipeline" in speed else {})}
    return result


def kd_stage(models: dict[str, Path], corpus: Path, out: Path, student: str, train: str, dev: str, test: str,
             epochs: int | None) -> dict:
    """A student distilled from the int8 export's logits and one from the fp32 export's (same seed, data, settings),
    each scored on the test data; the teachers' logits come from their own caches under OUT/cache."""
    from distill.data import read_split
    from distill.inference import evaluate
    from distill.models import load_model
    from distill.distiller import Distiller, DistillSettings
    from distill.trainers import Output, Runtime, TrainSettings
    result = {}
    for variant in ("onnx-fp32", "onnx-int8"):
        log(f"kd {student} from {variant}")
        target = out / f"kd-{student}-{variant}"
        distiller = Distiller(str(models[variant]), student, settings=TrainSettings(epochs=epochs),
                              distill=DistillSettings(cache_dir=str(out / "cache")), env=Runtime("cpu", progress=False))
        summary = distiller.fit(train, dev, str(corpus), output=Output(str(target), overwrite=True)).summary
        model = load_model(target)
        metrics = evaluate(model, *read_split(test, model.task))
        result[variant] = {"best_epoch": summary["best"]["epoch"], "dev": summary["best"]["dev"],
                           "test": {key: value for key, value in metrics.items() if isinstance(value, float)},
                           "teacher_logits_seconds": summary["teacher_logits_seconds"],
                           "teacher_export": summary["teacher_export"]["fingerprint"]}
    return result


def cpu_name() -> str:
    """The CPU's model name (as `lscpu` shows it): the ratios hold for it, not for CPUs in general."""
    import platform
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")] if cpuinfo.exists() else []
    return names[0] if names else platform.processor() or platform.machine()


def report(result: dict) -> str:
    stage = result["pseudo_label"]
    lines = [f"CPU: {result['cpu']}; {result['threads']} thread(s); torch {result['torch']}, onnxruntime "
             f"{result['onnxruntime']}; pseudo-label over {stage['examples']:,} lines of {result['input']}, "
             f"batch {stage['batch_size']}, best of {result['rounds']}", "",
             "| teacher | ex/s | labels changed vs PyTorch |", "|---|---|---|"]
    for name, entry in stage["variants"].items():
        moved = f"{entry['labels_changed']:,} of {entry['labels_compared']:,}" if "labels_changed" in entry else "-"
        lines.append(f"| {name} | {entry['examples_per_second']:,} | {moved} |")
    lines += ["", "; ".join(f"{name}: {ratio:.2f}x" for name, ratio in stage["ratios"].items())]
    if result.get("kd"):
        lines += ["", "| kd student from | best epoch | dev | test |", "|---|---|---|---|"]
        for name, entry in result["kd"].items():
            dev = ", ".join(f"{k} {v:.4f}" for k, v in entry["dev"].items() if k in ("accuracy", "f1", "macro_f1"))
            test = ", ".join(f"{k} {v:.4f}" for k, v in entry["test"].items() if k in ("accuracy", "f1", "macro_f1"))
            lines.append(f"| {name} | {entry['best_epoch']} | {dev} | {test} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("teacher", type=Path, help="The PyTorch teacher directory (it is exported under OUT).")
    parser.add_argument("--input", required=True, type=Path, help="Unlabeled text, as pseudo-label reads it.")
    parser.add_argument("--check-data", required=True, help="Held-back labelled data the exports are checked on.")
    parser.add_argument("--lines", type=int, default=2000, help="Lines of the input to label (0: all).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--no-pipeline", action="store_true", help="Leave the transformers pipeline out.")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-onnx-teacher")
    parser.add_argument("--kd", action="store_true", help="Also distil a student from each export's logits.")
    parser.add_argument("--train")
    parser.add_argument("--dev")
    parser.add_argument("--test")
    parser.add_argument("--student", default="lstm")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    if args.kd and not (args.train and args.dev and args.test):
        parser.error("--kd needs --train, --dev and --test")
    for name in ("threads", "rounds", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.lines < 0:
        parser.error("--lines must be 0 (all) or more")
    return args


def check_inputs(args: argparse.Namespace) -> None:
    """Every input before OUT is made or anything exported: the teacher a kind that exports to ONNX and that
    pseudo-label takes (an ONNX export or a language model was refused at its export, OUT made), each file; and
    OUT, where the exports, the corpus, the labels and the students go: it is, holds and lies in no input, and is
    and lies in no model (its corpus-N.txt and pseudo-*.jsonl replaced an input of that name there, and OUT in the
    teacher was made there before the export was refused)."""
    from distill.data.checks import require_file
    from distill.io import check_folder
    from distill.models.kinds import require_kind
    from distill.outputs import check_directory_output, check_written_folder
    for command in ("export onnx", "pseudo-label"):  # it exports the teacher, then labels with each
        require_kind(str(args.teacher), command)
    files = (args.input, args.check_data, *((args.train, args.dev, args.test) if args.kd else ()))
    for path in files:
        require_file(path)
    check_folder(args.out)
    check_directory_output(args.out, [args.teacher, *files])
    check_written_folder(args.out, [args.teacher, *files])


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch
    from distill.export import onnx_module
    from distill.models.onnx import onnxruntime_module
    onnx_module()  # onnx and onnxruntime, or one line naming the export extra
    onnxruntime = onnxruntime_module()
    torch.set_num_threads(args.threads)  # before any session: ONNX Runtime takes torch's thread count
    check_inputs(args)
    args.out.mkdir(parents=True, exist_ok=True)
    models = exports(args.teacher, args.out, args.check_data)
    corpus = subset(args.input, args.lines, args.out)
    result = {"cpu": cpu_name(), "threads": args.threads, "torch": torch.__version__,
              "onnxruntime": onnxruntime.__version__, "input": str(args.input), "rounds": args.rounds,
              "teacher": str(args.teacher),
              "pseudo_label": pseudo_label_stage(models, corpus, args.out, args.rounds, args.batch_size,
                                                 not args.no_pipeline)}
    if args.kd:
        result["kd"] = kd_stage(models, corpus, args.out, args.student, args.train, args.dev, args.test,
                                args.epochs)
    write_json(args.out / "onnx-teacher.json", result)
    print(report(result))
    return result


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
