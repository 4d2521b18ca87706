"""Benchmark `nlp-train export` on real models and data: ONNX fp32 and int8 against PyTorch.

For each model directory given (a teacher or student trained on Rotten Tomatoes or CoNLL-2003):
* exports it as ONNX fp32, ONNX int8 and (teachers) a slim safetensors copy, each checked on the
  task's test set (`--check-data`): largest logit difference, labels changed, score lost;
* measures PyTorch fp32, ONNX fp32 and ONNX int8 one after another in this process: batch-32
  throughput and batch-1 latency at each thread count, the best of two rounds (the machine is shared);
* reports sizes: the model directory, each ONNX file, the slim copy.

    python scripts/bench_export.py runs/rt/teacher runs/rt/lstm-kd --threads 1,2 --report docs/benchmarks.md

Writes OUT/export.json and OUT/export.md; with --report, the same section replaces the export
section of that Markdown file (or is appended to it). Finished exports are reused: rerun to resume.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_report import EXPORT_BEGIN, EXPORT_END  # noqa: E402
from bench_measure import best_speeds, disk_bytes, log, machine, shown  # noqa: E402
from distill.io import read_json, write_json, write_text  # noqa: E402

TEST_SETS = {"classification": "rotten_tomatoes/test.csv", "tagging": "conll2003/test.txt"}
VARIANTS = ("pytorch", "onnx-fp32", "onnx-int8")
TARGETS = {"onnx_b1": 1.5, "int8_teacher": 2.0, "int8_points": 0.5, "slim_share": 0.40, "logit_diff": 1e-4}


def export_all(model_dir: Path, out: Path, test: Path) -> dict[str, Path]:
    """The exports of one model (reused when an earlier run finished them of this model as it is now, checked on
    `test`: `finished_export`): variant -> directory."""
    from distill.export import export_model, finished_export
    from distill.models import model_card
    from distill.models.kinds import kind_of
    card = model_card(model_dir)
    plan = {"onnx-fp32": ("onnx", None), "onnx-int8": ("onnx", "int8")}
    if card["kind"] == "teacher" and "export safetensors" in kind_of(card).takes:  # not a transformers folder's
        plan["slim"] = ("safetensors", None)
    exports = {}
    for variant, (format, quantize) in plan.items():
        target = out / variant
        if not finished_export(target, model_dir, format, quantize, str(test)):
            log(f"export {shown(model_dir)} -> {shown(target)}")
            export_model(str(model_dir), str(target), format, quantize, str(test), overwrite=True)
        exports[variant] = target
    return exports


def speed(directories: dict[str, Path], examples: list, threads: int, batch_examples: int, latency_examples: int
          ) -> dict:
    """Batch-32 examples/s and batch-1 ms of each variant at `threads`, best of two rounds."""
    import torch
    from distill.models import load_model
    torch.set_num_threads(threads)  # before loading: ONNX Runtime sessions take torch's thread count
    models = {name: load_model(directory, device="cpu") for name, directory in directories.items()}
    return best_speeds(models, examples[:batch_examples], examples[:latency_examples])


def bench_model(model_dir: Path, test: Path, out: Path, threads: list[int], speed_examples: int,
                latency_examples: int) -> dict:
    """Exports of one model under `out` (checked on `test`), their agreement, speed and sizes."""
    from distill.data import DataOptions, read_split
    from distill.models import model_card
    card = model_card(model_dir)
    exports = export_all(model_dir, Path(out) / shown(model_dir).replace("/", "_"), test)
    cards = {variant: read_json(directory / "distill.json") for variant, directory in exports.items()}
    examples, _ = read_split(str(test), card["task"], DataOptions())
    runs = {"pytorch": model_dir, "onnx-fp32": exports["onnx-fp32"], "onnx-int8": exports["onnx-int8"]}
    timing = {}
    for count in threads:
        log(f"speed {shown(model_dir)} at {count} thread(s)")
        timing[str(count)] = speed(runs, examples, count, speed_examples, latency_examples)
    sizes = {"pytorch": disk_bytes(model_dir), "onnx-fp32": (exports["onnx-fp32"] / "model.onnx").stat().st_size,
             "onnx-int8": (exports["onnx-int8"] / "model.onnx").stat().st_size}
    if "slim" in exports:
        sizes["slim"] = disk_bytes(exports["slim"])
    return {"model": shown(model_dir), "kind": card["kind"], "class": card["model"], "task": card["task"],
            "test": shown(test), "agreement": {variant: c["agreement"] for variant, c in cards.items()},
            "speed": timing, "bytes": sizes}


def test_set(model_dir: Path, data: str) -> Path:
    """The test split of the model's task in the data folder, for a model of a kind the export takes with its check
    data (the teacher-kind table: every model is checked before the first export is made)."""
    from distill.models.kinds import require_kind
    require_kind(str(model_dir), "export onnx")
    return Path(data) / TEST_SETS[require_kind(str(model_dir), "export check-data")["task"]]


def ratio(row: dict, threads: str, numerator: str, denominator: str, key: str) -> float:
    values = row["speed"][threads]
    if key == "latency_ms_b1":  # a speed-up is the inverse ratio of latencies
        return values[denominator][key] / values[numerator][key]
    return values[numerator][key] / values[denominator][key]


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """(target, measured, met) rows of the issue's targets."""
    rows = []
    for row in results["models"]:
        name, fp32 = row["model"], row["agreement"]["onnx-fp32"]
        rows.append((f"{name}: ONNX fp32 max logit difference <= 1e-4 and identical labels on {row['test']}",
                     f"{fp32['max_abs_logit_diff']:.1e}, {fp32['labels_changed']} of {fp32['labels_compared']:,} "
                     "labels changed",
                     fp32["max_abs_logit_diff"] <= TARGETS["logit_diff"] and fp32["labels_changed"] == 0))
        if row["kind"] == "teacher" or row["class"] in ("LSTMClassifier", "LSTMTagger"):
            for threads in row["speed"]:
                speedup = ratio(row, threads, "onnx-fp32", "pytorch", "latency_ms_b1")
                rows.append((f"{name}: ONNX fp32 >= 1.5x PyTorch fp32 at batch 1, {threads} thread(s)",
                             f"{speedup:.2f}x", speedup >= TARGETS["onnx_b1"]))
        if row["kind"] == "teacher":
            int8 = row["agreement"]["onnx-int8"]
            for threads in row["speed"]:
                gain = ratio(row, threads, "onnx-int8", "onnx-fp32", "examples_per_second_b32")
                rows.append((f"{name}: int8 >= 2x ONNX fp32 throughput (batch 32, {threads} thread(s))",
                             f"{gain:.2f}x", gain >= TARGETS["int8_teacher"]))
            rows.append((f"{name}: int8 loses <= 0.5 points of {int8['metric']}", f"{int8['points_lost']:+.2f} points",
                         int8["points_lost"] <= TARGETS["int8_points"]))
            if "slim" not in row["bytes"]:  # a transformers classifier's folder: it is its own slim copy
                continue
            share = row["bytes"]["slim"] / row["bytes"]["pytorch"]
            slim = row["agreement"]["slim"]
            rows.append((f"{name}: slim copy <= 40% of the full directory and identical predictions",
                         f"{share:.1%}, {slim['labels_changed']} labels changed, max logit difference "
                         f"{slim['max_abs_logit_diff']:.1e}",
                         share <= TARGETS["slim_share"] and slim["labels_changed"] == 0))
    return rows


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [EXPORT_BEGIN, "## Export: ONNX Runtime fp32 and int8 against PyTorch", "",
             f"Run on {m['cpu']}, {m['logical_cores']} logical cores; Python {m['python']}, torch {m['torch']}, "
             f"onnxruntime {results['onnxruntime']}; measured {m['date']} (matmul peak at 1 thread: fp32 "
             f"{m['matmul_gflops_fp32']:.0f} GFLOP/s). The machine is shared with other jobs: speed is the best of "
             "two rounds, and every ratio compares variants measured one after another in one process. Command:", "",
             "```{code-block} bash", results["command"], "```", "",
             "Models: " + "; ".join(f"`{row['model']}` ({row['class']})" for row in results["models"]) + ". "
             + results["note"], "",
             "### Targets", "", "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {target} | {measured} | {'yes' if met else '**no**'} |" for target, measured, met in targets(results)]
    lines += ["", "### Agreement with PyTorch fp32 (test sets)", "",
              "Labels are per sentence for RT, per word for CoNLL; scores are accuracy (RT) and entity F1 (CoNLL).", "",
              "| model | ONNX fp32: max logit diff | labels changed | int8: max logit diff | labels changed | "
              "PyTorch score | int8 score | points lost |", "|---|---|---|---|---|---|---|---|"]
    for row in results["models"]:
        fp32, int8 = row["agreement"]["onnx-fp32"], row["agreement"]["onnx-int8"]
        lines.append(f"| {row['model']} | {fp32['max_abs_logit_diff']:.1e} | {fp32['labels_changed']} of "
                     f"{fp32['labels_compared']:,} | {int8['max_abs_logit_diff']:.2f} | {int8['labels_changed']} of "
                     f"{int8['labels_compared']:,} | {int8['reference_score']:.4f} | {int8['score']:.4f} | "
                     f"{int8['points_lost']:+.2f} |")
    lines += ["", "### Speed", "",
              f"Batch 32 over {results['speed_examples']} test examples, batch 1 over {results['latency_examples']}; "
              "CPU, `--threads` as given.", "",
              "| model | threads | PyTorch ex/s @32 | ONNX ex/s @32 | int8 ex/s @32 | PyTorch ms @1 | ONNX ms @1 | "
              "int8 ms @1 | ONNX / PyTorch @1 | ONNX / PyTorch @32 | int8 / ONNX @32 | int8 / ONNX @1 |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in results["models"]:
        for threads, values in row["speed"].items():
            b32 = [values[v]["examples_per_second_b32"] for v in VARIANTS]
            b1 = [values[v]["latency_ms_b1"] for v in VARIANTS]
            lines.append(f"| {row['model']} | {threads} | " + " | ".join(f"{v:,.0f}" for v in b32) + " | "
                         + " | ".join(f"{v:.2f}" for v in b1) + " | "
                         + f"{ratio(row, threads, 'onnx-fp32', 'pytorch', 'latency_ms_b1'):.2f}x | "
                         + f"{ratio(row, threads, 'onnx-fp32', 'pytorch', 'examples_per_second_b32'):.2f}x | "
                         + f"{ratio(row, threads, 'onnx-int8', 'onnx-fp32', 'examples_per_second_b32'):.2f}x | "
                         + f"{ratio(row, threads, 'onnx-int8', 'onnx-fp32', 'latency_ms_b1'):.2f}x |")
    lines += ["", "### Size on disk", "", "| model | PyTorch directory MB | ONNX fp32 file MB | int8 file MB | "
              "slim copy MB (share of the directory) |", "|---|---|---|---|---|"]
    for row in results["models"]:
        size = row["bytes"]
        slim = f"{size['slim'] / 1e6:.1f} ({size['slim'] / size['pytorch']:.0%})" if "slim" in size else "–"
        lines.append(f"| {row['model']} | {size['pytorch'] / 1e6:.1f} | {size['onnx-fp32'] / 1e6:.1f} | "
                     f"{size['onnx-int8'] / 1e6:.1f} | {slim} |")
    return "\n".join([*lines, EXPORT_END]) + "\n"


def into_report(report: Path, section: str) -> None:
    """Replace the export section of `report` (between its markers), or append it."""
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    if EXPORT_BEGIN in text and EXPORT_END in text:
        before, _, rest = text.partition(EXPORT_BEGIN)
        text = before + section.rstrip("\n") + rest.partition(EXPORT_END)[2]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    write_text(report, text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="Model directories (teachers and students, RT or CoNLL).")
    parser.add_argument("--data", default=str(ROOT / "data"), help="Folder made by scripts/get_data.py.")
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench-export"), help="Exports and results.")
    parser.add_argument("--threads", default="1,2", type=lambda v: [int(t) for t in v.split(",")],
                        help="Comma-separated thread counts for the speed runs.")
    parser.add_argument("--speed-examples", type=int, default=1024, help="Test examples for batch-32 throughput.")
    parser.add_argument("--latency-examples", type=int, default=100, help="Test examples for batch-1 latency.")
    parser.add_argument("--note", default="", help="A sentence on how the models were trained, for the report.")
    parser.add_argument("--report", help="Markdown file whose export section to replace (or append to).")
    args = parser.parse_args(argv)
    if min(args.threads) < 1 or args.speed_examples < 1 or args.latency_examples < 1:
        parser.error("--threads, --speed-examples and --latency-examples must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from distill.export import onnx_module
    from distill.models.onnx import onnxruntime_module
    onnx_module()  # onnx and onnxruntime, or one line naming the export extra
    onnxruntime = onnxruntime_module()
    options = argv if argv is not None else sys.argv[1:]
    from distill.data.checks import require_file
    tests = [test_set(Path(model), args.data) for model in args.models]  # every input before the first export
    for path in tests:
        require_file(path)
    if args.report:  # its export section goes in there: no input, no model's file (a model's README.md is checksummed)
        from distill.outputs import check_output_file
        check_output_file(args.report, [*args.models, *tests], "the export section's report", beside_model=False)
    results = {"machine": machine(1, 1.0), "onnxruntime": onnxruntime.__version__,
               "command": "python scripts/bench_export.py " + shlex.join(options), "note": args.note,
               "speed_examples": args.speed_examples, "latency_examples": args.latency_examples,
               "models": [bench_model(Path(model), test, Path(args.out), args.threads, args.speed_examples,
                                      args.latency_examples) for model, test in zip(args.models, tests)]}
    out = Path(args.out)
    write_json(out / "export.json", results)
    section = markdown(results)
    write_text(out / "export.md", section)
    if args.report:
        into_report(Path(args.report), section)
    log(f"wrote {out / 'export.json'} and {out / 'export.md'}" + (f"; updated {args.report}" if args.report else ""))
    return results


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
