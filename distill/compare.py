"""Side-by-side comparison of models on the same data: score, size, speed."""

from __future__ import annotations

import time
from pathlib import Path

from distill.data import DataOptions, read_split
from distill.data.checks import HUB_PREFIX, require_file
from distill.errors import DistillError, OtherTaskData, option, require_whole
from distill.evaluation import load_with_head, require_head
from distill.inference import evaluate, throughput, weight_bytes
from distill.labels import check_labels_known
from distill.metrics import headline, megabytes
from distill.models.card import MULTITASK_KIND
from distill.models.kinds import refuse_unasked, require_kind
from distill.models.prompt import is_served
from distill.provenance import warn_if_learnt_from

NAME_WIDTH = 34  # the model column, unless wider names are needed to tell the models apart
ROUNDS = 3  # timing rounds: each model is timed once per round, the models one after another


def compare_models(model_dirs: list[str], data_path: str, data: DataOptions = DataOptions(),
                   batch_size: int = 32, limit: int | None = None, rounds: int = ROUNDS,
                   head: str | None = None) -> list[dict]:
    """Score, parameters, bytes on disk and batch throughput of each model, same examples, same process;
    each row also says what it measured: the first `limit` examples (`examples`) of how many (`of`), at
    `batch_size`.

    Every model is loaded and checked against the data (its task, its labels) before any is scored or
    timed, so a mismatch in the last one is reported at once, naming that model. The speeds are timed in
    `rounds` alternating rounds (`alternating_speeds`), so a burst of load on a shared machine slows one
    round of every model, not every round of one; a served model (``openai:MODEL``), whose every text is a
    request, is timed by its scoring pass alone. A multi-task teacher among them is compared by its head `head`
    (as `evaluate_model` scores it), the others as they are."""
    require_whole("rounds", rounds)
    require_whole("batch_size", batch_size)
    require_whole("limit", limit, optional=True)  # 0 or -3 would keep every example, or all but the last three
    if not str(data_path).startswith(HUB_PREFIX):  # the data's own fault, said of the data, not of a model
        require_file(data_path)
    cards = [require_kind(directory, "compare") for directory in model_dirs]
    refuse_unasked(model_dirs)
    for directory, card in zip(model_dirs, cards):
        require_head(directory, card, head)
    headed = [card["kind"] == MULTITASK_KIND for card in cards]
    if head is not None and not any(headed):
        raise DistillError(f"{option('--head', 'head=')} picks a multi-task teacher's head, and no model compared "
                           "is one: drop it")
    models, splits = [], {}
    loaded = [(directory, load_with_head(directory, head if multitask else None, "cpu"), multitask)
              for directory, multitask in zip(model_dirs, headed)]
    for directory, model, multitask in loaded:
        try:
            if model.task not in splits:
                splits[model.task] = read_split(data_path, model.task, data)
            check_labels_known(data_path, model.hierarchy, model.task, splits[model.task][1])
        except DistillError as err:
            if not splits and not isinstance(err, OtherTaskData):
                raise  # the data's fault (an empty file, a blank text): no model has read it
            if not splits:  # data of the other task's shape: the data's fault too, unless another model's task reads it
                _read_by_another(data_path, err, model.task, [other for _, other, _ in loaded], data, splits)
            # labels this model does not know, or data that another model's task reads and this one's cannot
            raise DistillError(f"model {directory}: {err}") from None
        warn_if_learnt_from(directory, data_path, splits[model.task][0])
        models.append((str(directory), model, head if multitask else None))
    rows, timed = [], []
    for directory, model, its_head in models:
        examples, gold = splits[model.task]
        available = len(examples)
        if limit:
            examples, gold = examples[:limit], gold[:limit]
        served = is_served(directory)  # every text a request: its scoring pass is its one timing round
        started = time.perf_counter()
        metrics = evaluate(model, examples, gold, batch_size if served else 64)
        rows.append({"model": directory, **({"head": its_head} if its_head is not None else {}),
                     "kind": type(model).__name__, "task": model.task,
                     "score": headline(model.task, metrics), "parameters": model.parameter_count(),
                     "bytes": weight_bytes(model), "examples": len(examples), "of": available,
                     "batch_size": batch_size})
        timed.append((model, examples, len(examples) / (time.perf_counter() - started) if served else None))
    for row, measured in zip(rows, alternating_speeds(timed, batch_size, rounds)):
        row.update(examples_per_second=max(measured), rounds_examples_per_second=measured)
    base = rows[0]["examples_per_second"]
    for row in rows:
        row["speedup"] = row["examples_per_second"] / base
    return rows


def _read_by_another(data_path: str, error: DistillError, task: str, models: list, data: DataOptions,
                     splits: dict) -> None:
    """`data_path` read for a model of another task than `task`, whose reading failed with `error` (its split then
    kept in `splits`): where it reads, the data is fine, and a model whose task cannot read it is to blame, named by
    the caller (a tagger among classifiers given a CSV file heard that the data was wrong, with no word of which
    model). Where no task reads it, the data's own fault is raised: the first that is not data of the other task's
    shape (an empty CSV file is 'file is empty', not 'CSV, but this model tags words')."""
    for other in dict.fromkeys(model.task for model in models if model.task != task):
        try:
            splits[other] = read_split(data_path, other, data)
            return
        except DistillError as failed:
            if isinstance(error, OtherTaskData):
                error = failed
    raise error


def alternating_speeds(timed: list[tuple], batch_size: int, rounds: int) -> list[list[float]]:
    """Examples per second of each (model, examples, speed) triple in every round; a round times every model
    once, in order. The best round of a model is its speed with the least interference from other jobs: timed
    one model after another, a model timed during a burst of load looked many times slower than its peers.
    A triple whose speed is already measured (a served model's scoring pass, each text a paid request) is
    not timed again."""
    speeds: list[list[float]] = [[] if speed is None else [speed] for _, _, speed in timed]
    for _ in range(rounds):
        for measured, (model, examples, speed) in zip(speeds, timed):
            if speed is None:
                measured.append(throughput(model, examples, batch_size))
    return speeds


def row_names(paths: list[str], width: int = NAME_WIDTH) -> list[str]:
    """The model column: each path's last `width` characters, unless that makes two models look alike
    (runs/seed1/rt/lstm and runs/seed2/rt/lstm); then the fewest trailing folders that tell them apart
    (seed1/rt/lstm, seed2/rt/lstm), however long."""
    tails = [path[-width:] for path in paths]
    if len(set(tails)) == len(set(paths)):
        return tails
    parts = [Path(path).parts for path in paths]
    distinct = len({Path(path) for path in paths})  # ./a and a are one model
    return next(names for names in ([str(Path(*part[-count:])) for part in parts]
                                    for count in range(1, max(map(len, parts)) + 1))
                if len(set(names)) == distinct)


def measured_on(rows: list[dict]) -> str:
    """The table's last line: what its scores and speeds were measured on, so that a score of the first
    300 examples is not read as one of the whole set, nor a speed without its batch size."""
    counts = [f"all {total:,} examples" if scored == total else f"the first {scored:,} of {total:,} examples"
              for scored, total in dict.fromkeys((row["examples"], row["of"]) for row in rows)]
    sizes = ", ".join(f"{size:,}" for size in dict.fromkeys(row["batch_size"] for row in rows))
    return f"score on {' / '.join(counts)}; ex/s at batch size {sizes}"


def format_table(rows: list[dict]) -> str:
    names = [name + (f" [{row['head']}]" if "head" in row else "")
             for name, row in zip(row_names([row["model"] for row in rows]), rows)]
    width = max(NAME_WIDTH, *map(len, names))
    lines = [f"{'model':<{width}} {'score':>7} {'params':>12} {'MB':>8} {'ex/s':>9} {'speed-up':>8}"]
    for name, row in zip(names, rows):
        lines.append(f"{name:<{width}} {row['score']:>7.4f} {row['parameters']:>12,} "
                     f"{megabytes(row['bytes']):>8} {row['examples_per_second']:>9.1f} {row['speedup']:>7.1f}x")
    lines.append(measured_on(rows))
    return "\n".join(lines)
