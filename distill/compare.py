"""Side-by-side comparison of models on the same data: score, size, speed."""

from __future__ import annotations

from distill.data import DataOptions, read_split
from distill.inference import evaluate, throughput, weight_bytes
from distill.labels import check_labels_known
from distill.metrics import headline
from distill.models import load_model
from distill.models.multitask import refuse_multitask


def compare_models(model_dirs: list[str], data_path: str, data: DataOptions = DataOptions(),
                   batch_size: int = 32, limit: int | None = None) -> list[dict]:
    """Score, parameters, bytes on disk and batch throughput of each model, same examples, same process."""
    rows = []
    for directory in model_dirs:
        refuse_multitask(directory, "compare")
        model = load_model(directory)
        examples, gold = read_split(data_path, model.task, data)
        check_labels_known(data_path, model.hierarchy, model.task, gold)
        if limit:
            examples, gold = examples[:limit], gold[:limit]
        metrics = evaluate(model, examples, gold, 64)
        rows.append({"model": str(directory), "kind": type(model).__name__, "task": model.task,
                     "score": headline(model.task, metrics), "parameters": model.parameter_count(),
                     "bytes": weight_bytes(model),
                     "examples_per_second": throughput(model, examples, batch_size)})
    base = rows[0]["examples_per_second"]
    for row in rows:
        row["speedup"] = row["examples_per_second"] / base
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [f"{'model':<34} {'score':>7} {'params':>12} {'MB':>8} {'ex/s':>9} {'speed-up':>8}"]
    for row in rows:
        lines.append(f"{row['model'][-34:]:<34} {row['score']:>7.4f} {row['parameters']:>12,} "
                     f"{row['bytes'] / 1e6:>8.1f} {row['examples_per_second']:>9.1f} {row['speedup']:>7.1f}x")
    return "\n".join(lines)
