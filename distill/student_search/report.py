"""What a search reports: each trial's record, the Pareto front, the choice on the mean of reseeded runs, the best
default student, and the files: ``trials.json``, ``trials.md``, ``trials.png``, ``OUTPUT/best``."""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import shutil
from pathlib import Path
from typing import Any

from distill.errors import DistillError, import_extra
from distill.io import atomic_directory, file_sha256, write_json, write_text
from distill.student_search.space import (BEST_EXPORT_FOLDER, BEST_FOLDER, SEARCH_EXTRA, TIMING_EXAMPLES,
                                          TRIALS_JSON, TRIALS_PLOT, TRIALS_TABLE)
from distill.student_search.trial import Budget, Job


def trial_record(trial, budget: Budget) -> dict:
    """A trial as trials.json holds it."""
    attrs = trial.user_attrs
    measured = attrs.get("measured") or {}
    dev = attrs.get("dev") or {}
    record = {"number": trial.number, "state": trial.state.name.lower(),
              "retry_of": (trial.system_attrs.get("retry_history") or [None])[-1],
              "folder": attrs.get("folder"), "settings": attrs.get("settings"),
              "dev_score": dev.get("score"), "metric": dev.get("metric"), "best_epoch": dev.get("best_epoch"),
              "epochs": dev.get("epochs") if dev else (max(trial.intermediate_values) if trial.intermediate_values
                                                       else None),
              "parameters": dev.get("parameters"), "process": attrs.get("process"), **measured,
              "within_budget": budget.holds(measured) if measured else None,
              "seconds": attrs.get("seconds"), "default": attrs.get("default"),
              "reseed_of": attrs.get("reseed_of"), "seed": attrs.get("seed")}
    if "pruned_at" in attrs:
        record["pruned_at"] = attrs["pruned_at"]
    if "untrained_ms" in attrs:  # pruned before training: far over the latency budget untrained
        record["untrained_ms"] = attrs["untrained_ms"]
    if "error" in attrs:
        record["error"] = attrs["error"]
    return record


def pareto_front(records: list[dict], key: str) -> list[int]:
    """The numbers of the trials no other beats on both dev score and `key` (latency_ms or size_mb)."""
    done = sorted((r for r in records if r["state"] == "complete" and r.get(key) is not None
                   and r["reseed_of"] is None),
                  key=lambda r: (r[key], -r["dev_score"]))
    front, best = [], -math.inf
    for record in done:
        if record["dev_score"] > best:
            front.append(record["number"])
            best = record["dev_score"]
    return front


def _fits(records: list[dict]) -> list[dict]:
    """The completed search trials (not reseeded runs) within the budget, best dev score first (the faster of
    a tie)."""
    return sorted((r for r in records if r["state"] == "complete" and r["within_budget"] and r["reseed_of"] is None),
                  key=lambda r: (-r["dev_score"], r["latency_ms"]))


def reseed_candidates(records: list[dict], top: int) -> list[dict]:
    """The trials re-trained with other seeds and chosen among: the `top` best within the budget, and the best
    default student's trial within it (added when it is not among them, so the choice is never a trial that
    one lucky seed put above the defaults)."""
    fits = _fits(records)
    chosen = fits[:top]
    best_default = next((r for r in fits if r["default"] is not None), None)
    if best_default is not None and best_default not in chosen:
        chosen.append(best_default)
    return chosen


def add_seed_means(records: list[dict]) -> None:
    """Each search trial's ``dev_scores`` (its own run's, then its reseeded runs' finished so far) and their
    ``mean_dev``."""
    for record in records:
        if record["reseed_of"] is None and record["dev_score"] is not None:
            record["dev_scores"] = [record["dev_score"]] + [
                r["dev_score"] for r in records if r["reseed_of"] == record["number"] and r["state"] == "complete"]
            record["mean_dev"] = sum(record["dev_scores"]) / len(record["dev_scores"])


def _best(pool: list[dict], on_mean: bool) -> dict | None:
    """The best of `pool` on its mean dev score over its seeds (`on_mean`), or on its own run's (no reseeding: a
    study resumed with --reseed-top 0 chooses so, though it holds reseeded runs); the faster of a tie."""
    return max(pool, key=lambda r: (r.get("mean_dev", r["dev_score"]) if on_mean else r["dev_score"],
                                    -r["latency_ms"]), default=None)


def choose_best(records: list[dict], reseed_top: int = 0) -> dict | None:
    """The trial within the budget with the highest mean dev score over its seeds (`add_seed_means`) among
    `reseed_candidates`, or, without reseeding, the highest dev score; the faster of a tie."""
    return _best(reseed_candidates(records, reseed_top) if reseed_top else _fits(records), bool(reseed_top))


def best_default(records: list[dict], reseed_top: int = 0) -> dict | None:
    """The default student's trial that `choose_best` weighs against the others (with reseeding: the one
    reseeded, so both means are over as many seeds): what the search must beat."""
    pool = reseed_candidates(records, reseed_top) if reseed_top else _fits(records)
    return _best([r for r in pool if r["default"] is not None], bool(reseed_top))


def _describe(settings: dict | None) -> str:
    if not settings:
        return ""
    config = ", ".join(f"{k}={v}" for k, v in settings["config"].items())
    others = ", ".join(f"{k}={_short(v)}" for group in ("loss", "training", "distiller")
                       for k, v in settings[group].items())
    return f"{settings['student']}({config}) {others}".strip()


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def table(records: list[dict], best: dict | None, budget: Budget) -> str:
    """The markdown table of every trial."""
    lines = ["| trial | state | settings | dev | mean dev (runs) | epochs | latency ms | runtime | MB | within budget "
             "| s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        mark = (" (best)" if best is not None and r["number"] == best["number"] else "") + \
            (f" (default {r['default']})" if r["default"] is not None and r["reseed_of"] is None else "")
        state = r["state"] + (f" at epoch {r['pruned_at']}" if r.get("pruned_at") else "") + \
            (f" untrained ({r['untrained_ms']:.1f} ms a batch)" if r.get("untrained_ms") is not None else "") + \
            (f", retry of {r['retry_of']}" if r.get("retry_of") is not None else "") + \
            (f", reseed of {r['reseed_of']} (seed {r['seed']})" if r["reseed_of"] is not None else "")
        mean = f"{r['mean_dev']:.4f} ({len(r['dev_scores'])})" if "mean_dev" in r else ""
        cells = [f"{r['number']}{mark}", state, _describe(r["settings"]),
                 "" if r["dev_score"] is None else f"{r['dev_score']:.4f}", mean,
                 "" if r["epochs"] is None else r["epochs"],
                 "" if r.get("latency_ms") is None else f"{r['latency_ms']:.2f}", r.get("runtime", ""),
                 "" if r.get("size_mb") is None else f"{r['size_mb']:.2f}",
                 "" if r["within_budget"] is None else ("yes" if r["within_budget"] else "no"),
                 "" if r["seconds"] is None else f"{r['seconds']:.0f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines.append(f"Budget: {budget.text()}. Dev score: the selection metric at the best epoch; mean dev: over the "
                 "trial's run and its reseeded runs (other seeds), what the choice is made on; latency: a batch of "
                 "the dev set in the faster runtime; (default X): student X with kd's defaults.")
    return "\n".join(lines) + "\n"


def plot(records: list[dict], best: dict | None, budget: Budget, path: Path) -> None:
    """Dev score against latency and against size, each with its Pareto front and the budget's line."""
    matplotlib = import_extra("matplotlib", "the search's plot", SEARCH_EXTRA)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [r for r in records if r["state"] == "complete" and r.get("latency_ms") is not None
            and r["reseed_of"] is None]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label, limit in ((axes[0], "latency_ms", "latency (ms a batch)", budget.max_latency_ms),
                                  (axes[1], "size_mb", "size (MB)", budget.max_mb)):
        for student in dict.fromkeys(r["settings"]["student"] for r in done):
            mine = [r for r in done if r["settings"]["student"] == student]
            ax.scatter([r[key] for r in mine], [r["dev_score"] for r in mine], label=student, alpha=0.8)
        front = {r["number"]: r for r in done}
        points = [front[n] for n in pareto_front(records, key)]
        ax.step([r[key] for r in points], [r["dev_score"] for r in points], where="post", color="black",
                linewidth=1, label="Pareto front")
        if limit is not None:
            ax.axvline(limit, color="red", linestyle="--", linewidth=1, label="budget")
        defaults = [r for r in done if r["default"] is not None]
        ax.scatter([r[key] for r in defaults], [r["dev_score"] for r in defaults], marker="*", s=150, color="black",
                   label="default students", zorder=3)
        for r in defaults:
            ax.annotate(f"default {r['default']}", (r[key], r["dev_score"]), fontsize=7,
                        textcoords="offset points", xytext=(4, -10))
        if best is not None:
            ax.scatter([best[key]], [best["dev_score"]], s=160, facecolors="none", edgecolors="red", label="chosen")
        ax.set_xlabel(label)
        ax.set_ylabel(f"dev {done[0]['metric']}" if done else "dev score")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    from distill.io import atomic_path
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)
    plt.close(figure)


def _whole(folder: Path) -> bool:
    """Whether `folder` holds a finished model whose every file matches its card."""
    from distill.models.card import read_model_card, verify_model_files
    try:
        verify_model_files(folder, read_model_card(folder))
    except DistillError:
        return False
    return True


def _copies(trial_folder: Path, output: Path) -> bool:
    """Whether the search's best/ is still the copy of `trial_folder` (whole, and its card the trial's: not another
    model put there, nor a link to one) and best-onnx/, where there is one, still its export: whole, a folder, and
    made from best/ as it is."""
    from distill.models.card import MODEL_CARD, read_model_card
    from distill.models.onnx import made_from
    best, export = output / BEST_FOLDER, output / BEST_EXPORT_FOLDER
    if best.is_symlink() or not _whole(best) or \
            file_sha256(best / MODEL_CARD) != file_sha256(trial_folder / MODEL_CARD):
        return False
    if not (export.exists() or export.is_symlink()):
        return True
    return not export.is_symlink() and _whole(export) and made_from(read_model_card(export).get("export") or {}, best)


def _copy_best(trial_folder: Path, best: Path) -> None:
    """The chosen trial's model as a normal model folder, checked (every file against its card) before it is
    copied, where an error names the trial's file, and once copied."""
    from distill.models import load_model
    from distill.models.card import RESUME_FILE, read_model_card, verify_model_files
    verify_model_files(trial_folder, read_model_card(trial_folder))
    with atomic_directory(best) as tmp:
        for item in trial_folder.iterdir():
            if item.name != RESUME_FILE and not item.name.startswith("."):
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
        load_model(tmp)


def _test_score(model_dir: Path, test: Any, job: Job) -> dict:
    from distill.inference import evaluate
    from distill.metrics import headline
    from distill.models import load_model
    model = load_model(model_dir)
    metrics = evaluate(model, test, data=job.data)
    return {"data": str(test), "score": headline(model.task, metrics), "metrics": metrics}


def _default_summary(record: dict | None, test: Any, job: Job, previous: dict, chosen: dict | None) -> dict | None:
    """The best default student within the budget as the report holds it, scored on `test` too (a fixed
    rule picked it, not the test set: the comparison the search is for), once when it is the chosen one."""
    if record is None:
        return None
    summary = {"trial": record["number"], "student": record["default"], "dev_score": record["dev_score"],
               "mean_dev": record["mean_dev"], "dev_scores": record["dev_scores"],
               "latency_ms": record["latency_ms"], "size_mb": record["size_mb"]}
    if chosen is not None and chosen["trial"] == record["number"] and "test" in chosen:
        summary["test"] = chosen["test"]
    elif test is not None:
        summary["test"] = _test_score(job.output / record["folder"], test, job)
    elif previous.get("trial") == record["number"] and "test" in previous:
        summary["test"] = previous["test"]
    return summary


def write_reports(study, job: Job, test: Any, wall_seconds: float, stopped: str | None = None) -> dict:
    """trials.json, trials.md, trials.png and the best model (copied and exported; scored on `test`, alone
    with the best default student); `stopped`: why this process started no more trials."""
    from distill.export import export_model
    output = job.output
    held = study.get_trials(deepcopy=False)
    records = [trial_record(t, job.budget) for t in held]
    add_seed_means(records)
    best = choose_best(records, job.reseed_top)
    previous: dict = {}
    if (output / TRIALS_JSON).is_file():
        with contextlib.suppress(ValueError, OSError):
            previous = json.loads((output / TRIALS_JSON).read_text(encoding="utf-8"))
    previous_default = previous.get("default") or {}
    previous = previous.get("best") or {}
    chosen: dict | None = None
    if best is not None:
        chosen = {"trial": best["number"], "folder": BEST_FOLDER, "settings": best["settings"],
                  "dev_score": best["dev_score"], "mean_dev": best["mean_dev"], "dev_scores": best["dev_scores"],
                  "latency_ms": best["latency_ms"], "runtime": best["runtime"], "size_mb": best["size_mb"]}
        source = output / best["folder"]
        # the chosen trial's folder whole first (a damaged one is named with its file by the copy's check), then
        # whether best/ is still its copy: a damaged copy is made again
        same = previous.get("trial") == best["number"] and _whole(source) and \
            previous.get("card_sha256") == file_sha256(source / "distill.json") and _copies(source, output)
        if not same:
            _copy_best(source, output / BEST_FOLDER)
            try:
                export_model(str(output / BEST_FOLDER), str(output / BEST_EXPORT_FOLDER), "onnx", overwrite=True)
            except DistillError as err:
                chosen["export_error"] = str(err)
        chosen["card_sha256"] = file_sha256(source / "distill.json")
        chosen["export"] = BEST_EXPORT_FOLDER if (output / BEST_EXPORT_FOLDER).is_dir() else None
        if test is not None:
            chosen["test"] = _test_score(output / BEST_FOLDER, test, job)
        elif same and "test" in previous:
            chosen["test"] = previous["test"]
    else:  # nothing within the budget now (a rerun with a smaller one): an earlier choice is no longer the search's
        for folder in (BEST_FOLDER, BEST_EXPORT_FOLDER):
            if (output / folder).is_dir() and not (output / folder).is_symlink():
                shutil.rmtree(output / folder)
    counts = _counts(study)
    finished = [r["seconds"] for r in records if r["seconds"] is not None]
    default = _default_summary(best_default(records, job.reseed_top), test, job, previous_default, chosen)
    report = {"search": {"teacher": job.teacher, "train": str(job.train), "dev": str(job.dev),
                         "unlabeled": None if job.unlabeled is None else str(job.unlabeled),
                         "space": job.space.given, "space_source": job.space.source,
                         "budget": {"max_latency_ms": job.budget.max_latency_ms, "max_mb": job.budget.max_mb,
                                    **({"as_fast_as": job.reference} if job.reference else {})},
                         "latency": {"batch_size": job.batch_size, "threads": job.threads,
                                     "examples": len(job.dev_examples[:TIMING_EXAMPLES])},
                         "cpu": _cpu(), "date": datetime.date.today().isoformat()},
              "states": {k.lower(): v for k, v in counts.items()},
              "wall_seconds": round(wall_seconds, 1), "trial_seconds": round(sum(finished), 1),
              "time_budget": {"seconds": job.time_budget, "spent": round(spent_seconds(held), 1)},
              "stopped": stopped,
              "reseeding": {"top": job.reseed_top,  # the seeds its runs trained with (each after its trial's own)
                            "seeds": sorted({r["seed"] for r in records if r["reseed_of"] is not None}),
                            "candidates": [r["number"] for r in reseed_candidates(records, job.reseed_top)]
                            if job.reseed_top and job.seeds else []},
              "best": chosen, "default": default,
              "pareto_latency": pareto_front(records, "latency_ms"),
              "pareto_size": pareto_front(records, "size_mb"), "trials": records}
    write_json(output / TRIALS_JSON, report)
    write_text(output / TRIALS_TABLE, table(records, best, job.budget))
    plot(records, best, job.budget, output / TRIALS_PLOT)
    return report


def _cpu() -> str:
    from distill.export_speed import cpu_model
    return cpu_model()


def _counts(study) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    return counts


def spent_seconds(trials: list) -> float:
    """The time-budget's count: the seconds of every trial the study holds (finished, pruned, failed, and the
    running ones so far), over every process and every resume; two processes spend it twice as fast."""
    now = datetime.datetime.now()  # optuna's own clock: naive local time
    return sum(((t.datetime_complete or now) - t.datetime_start).total_seconds()
               for t in trials if t.datetime_start is not None)
