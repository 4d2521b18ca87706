"""The benchmark's report: gather finished stages, derive ratios and targets, write Markdown, JSON, PNGs.

Everything here reads what `scripts/benchmark.py` stored; nothing is measured. A stage that has
not finished shows as missing, never as a number.
"""

from __future__ import annotations

import datetime
import statistics
from pathlib import Path

from distill.distillation import DEFAULT_DISTILL_WEIGHT, DEFAULT_STUDENT_WEIGHT, DEFAULT_TEMPERATURE
from distill.errors import DistillError, import_extra
from distill.io import read_json, write_bytes, write_json, write_text
from distill.student_search.space import TRIALS_JSON

BENCH_EXTRA = "pip install -e '.[bench]'"  # matplotlib, for the plots

VARIANT_SUFFIXES = ("", "+teacher-emb", "+kd-kl", "+kd-mse", "+kd-kl+unlabelled", "+kd-kl+augment")
KD_SUFFIXES = VARIANT_SUFFIXES[2:]
SEGMENTS = "segments.json"  # the code of a run spread over starts: each commit, when and for which tasks it began
SEGMENT_KEYS = ("started", "commit", "tasks")  # of each start in it
UNLABELED_SUFFIX = VARIANT_SUFFIXES[4]  # its own transfer set: a logit cache of its own, not the shared one
QUALITY_METRICS = {"classification": ("accuracy", "macro_f1"), "tagging": ("f1", "precision", "recall")}
TARGETS = {"kd_gain_points": 3.0, "retention": 0.95, "speedup_b32": 25.0, "cached_epoch_ratio": 1.2,
           "inference_ratio": 3.0, "transformer_retention": 0.98, "transformer_speedup_b32": 1.8,
           "int8_kd_points": 0.3, "ensemble_points": 0.5, "search_test_points": 0.5, "search_tasks_ahead": 2,
           "search_wall_ratio": 3.0}
# Students cut from the teacher's layers (docs/models/transformer-student.md): they have targets of their
# own, between the teacher and the small students; the KD-gain, retention and speed targets are the
# small students'.
TRANSFORMER_STUDENTS = ("transformer", "transformer-tagger")


# The ensemble runs: a second teacher (the next seed) and the first student distilled from it alone and from
# both teachers; the first teacher's student is its `+kd-kl` run.
ENSEMBLE_TEACHER, SECOND_TEACHER_SUFFIX, ENSEMBLE_SUFFIX = "teacher-2", "+kd-kl@teacher-2", "+kd-kl@ensemble"


def variant_suffixes(student: str) -> tuple[str, ...]:
    """The runs of one student: a transformer student has no augmented run, whose transfer set of (1 + N)
    times the labelled data would make its kd run (already the benchmark's longest) N + 1 times as long."""
    return tuple(s for s in VARIANT_SUFFIXES if s != "+kd-kl+augment" or student not in TRANSFORMER_STUDENTS)
PLOTS = {"quality_vs_speed": "img/bench-quality-vs-speed.png", "kd_gain": "img/bench-kd-gain.png"}
# The section scripts/bench_export.py writes into a report: a re-render keeps it as it is.
EXPORT_BEGIN, EXPORT_END = "<!-- bench_export.py: begin -->", "<!-- bench_export.py: end -->"


LEGEND = [
    "Models: `teacher` is the fine-tuned encoder + Linear; `S` is student S trained alone on gold labels from "
    "random embeddings; `S+teacher-emb` the same with word embeddings started from the teacher's (PCA-reduced); "
    "for `transformer` (3 of the encoder's 6 layers), `S` starts from the pretrained encoder's layers and "
    "`S+teacher-emb` from the fine-tuned teacher's, as its kd runs do; "
    f"`S+kd-kl` / `S+kd-mse` are `nlp-train kd` runs (teacher embeddings, loss {DEFAULT_STUDENT_WEIGHT:g} x NLL + "
    f"{DEFAULT_DISTILL_WEIGHT:g} x KL at T={DEFAULT_TEMPERATURE:g}, or x MSE between logits, teacher logits from "
    "the cache); `S+kd-kl+unlabelled` adds in-domain unlabelled text (at most one line per labelled example) "
    "with the teacher's argmax as the hard label; `S+kd-kl+augment` adds no text but N synthetic examples per "
    "labelled one, made from it (`kd --augment N`, the task's default methods; N in the commands below) and "
    "labelled by the teacher (not run for transformer students). Retention is the score over the teacher's; `x teacher` "
    "columns are speed ratios to the teacher.", ""]


JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false",
              type(None): "null"}


class Record(dict):
    """A stored record's JSON object (a stage's result, a model's summary, segments.json): a key it lacks is one
    line naming the file (a record of older code, or one edited by hand), not a KeyError's traceback hours into a
    resumed run or in the middle of a report."""

    path = ""

    def __missing__(self, key: str):
        raise DistillError(f"{self.path}: has no {key!r} (written by older code, or edited?): remove it, and the "
                           "benchmark's next run writes it again")


def as_record(value, path: Path):
    """`value` read from `path`, with each JSON object in it a `Record` of that file."""
    if isinstance(value, dict):
        record = Record({key: as_record(item, path) for key, item in value.items()})
        record.path = str(path)
        return record
    return [as_record(item, path) for item in value] if isinstance(value, list) else value


def read(path: Path) -> Record | None:
    """The record stored at `path`, None while its stage has not run: the one reader of the benchmark's records,
    so that one that is not a JSON object, or lacks a key, is one line naming it (`Record`)."""
    if not path.exists():
        return None
    value = read_json(path)
    if not isinstance(value, dict):
        raise DistillError(f"{path}: holds {JSON_KINDS.get(type(value), 'a value')}, not the JSON object the benchmark "
                           "writes (edited, or another file?): remove it, and the benchmark's next run writes it again")
    return as_record(value, path)


def read_segments(path: Path) -> list[Record]:
    """OUT/segments.json's starts of a run (`scripts/benchmark.py`'s record_segment), each with `SEGMENT_KEYS`:
    checked whole when read, as a resumed run adds its start to them and the report renders each."""
    record = read(path)
    segments = [] if record is None else record["segments"]
    if not isinstance(segments, list) or not all(isinstance(segment, dict) and set(SEGMENT_KEYS) <= set(segment)
                                                 for segment in segments):
        raise DistillError(f"{path}: its 'segments' are not a list of the run's starts (each with its "
                           f"{', '.join(SEGMENT_KEYS)}; edited?): remove it, and the benchmark's next run writes it "
                           "again")
    return segments


def collect(out: Path, specs: dict) -> dict:
    """Every finished stage of every task under `out`, plus derived ratios and target checks."""
    machine = read(out / "machine.json")
    segments = read_segments(out / SEGMENTS)
    tasks = {}
    for key, spec in specs.items():
        base = out / key
        speed = read(base / "speed.json")
        names = ["teacher"] + [student + suffix for student in spec["students"] for suffix in variant_suffixes(student)]
        models, missing = {}, []
        for name in names:
            summary, metrics = read(base / name / "train_summary.json"), read(base / name / "test_metrics.json")
            if summary is None or metrics is None:
                missing.append(name)
                continue
            history = summary["history"]
            test = as_record({k: v for k, v in metrics.items() if k not in ("model", "data")},  # paths of this machine
                             base / name / "test_metrics.json")
            models[name] = {"score": metrics[spec["metric"]], "test": test, "parameters": summary["parameters"],
                            "best_epoch": summary["best"]["epoch"], "epochs_run": len(history),
                            "mean_epoch_seconds": statistics.mean(h["epoch_seconds"] for h in history),
                            "teacher_logits_seconds": summary.get("teacher_logits_seconds"),
                            "cache_hit": summary["cached_examples"] > 0 if "cached_examples" in summary
                            else summary.get("cache_hit"),
                            **((speed or {}).get("models", {}).get(name, {}))}
        task = {"name": spec["name"], "task": spec["task"], "metric": spec["metric"], "students": spec["students"],
                "models": models, "tfidf": read(base / "tfidf.json"),
                "speed": as_record({k: v for k, v in speed.items() if k != "models"}, base / "speed.json") if speed
                else None,
                "training_cost": read(base / "training_cost.json"),
                "teacher_inference": read(base / "teacher_inference.json"), "export": read(base / "export.json"),
                "onnx_teacher": read(base / "onnx_teacher.json"), "augment_targets": spec.get("augment_targets", {})}
        task["ensemble"] = ensemble_scores(base, spec, models) if spec.get("ensemble") else None
        task["static_peers"] = read(base / "static_peers.json")
        task["static_target"] = spec.get("static_target")
        task["search"] = with_seeds(read(base / "search.json"), base / "search" / TRIALS_JSON, spec.get("seed"))
        expected = ["speed", "training_cost", "teacher_inference", "onnx_teacher", "export"] + \
            (["tfidf"] if spec["task"] == "classification" else []) + (["ensemble"] if spec.get("ensemble") else []) + \
            (["static_peers"] if "static" in spec["students"] else []) + (["search"] if spec.get("search") else [])
        task["missing"] = missing + [stage for stage in expected if task[stage] is None]
        task["models_complete"] = not missing
        derive(task)
        tasks[key] = task
    return {"machine": machine, "segments": segments, "tasks": tasks, "targets": search_across_tasks(tasks),
            "complete": machine is not None and not any(t["missing"] for t in tasks.values())}


def check_records(out: Path, specs: dict) -> None:
    """Read every record under `out` that a report of `specs` reads, and render them: a resumed run says at its
    start which one it could not read (`Record`), not when it writes its report after the hours of its stages."""
    markdown(collect(out, specs), "", [], {})


def with_seeds(search: dict | None, trials: Path, seed: int | None) -> dict | None:
    """The search stage with the seeds of its chosen and best default students' dev scores, in their order
    (the trial's own run with the search's `seed`, then its finished reseeded runs, from the search's
    trials.json) where the stage does not hold them; left out when the trials or the seed are unknown."""
    if search is None or seed is None or not trials.is_file():
        return search
    records = read(trials)["trials"]
    for role in ("best", "default"):
        summary = search.get(role)
        if summary is not None and "seeds" not in summary:
            seeds = [seed] + [r["seed"] for r in records if r["reseed_of"] == summary["trial"]
                              and r["state"] == "complete"]
            if len(seeds) == len(summary["dev_scores"]):
                summary["seeds"] = seeds
    return search


def ensemble_scores(base: Path, spec: dict, models: dict) -> dict | None:
    """Test scores of both teachers and of the first student distilled from each and from both; None until
    all are scored."""
    student = spec["students"][0] if spec["students"] else None
    named = {"teacher": "teacher", "teacher-2": ENSEMBLE_TEACHER, "student of teacher": f"{student}+kd-kl",
             "student of teacher-2": f"{student}{SECOND_TEACHER_SUFFIX}", "student of both": f"{student}{ENSEMBLE_SUFFIX}"}
    scores = {}
    for role, name in named.items():
        metrics = read(base / name / "test_metrics.json")
        if metrics is None:
            return None
        scores[role] = metrics[spec["metric"]]
    return {"student": student, "scores": scores,
            "gain_points": 100 * (scores["student of both"] - max(scores["student of teacher"],
                                                                  scores["student of teacher-2"]))}


def derive(task: dict) -> None:
    """Ratios to the teacher, KD gains, cost and inference ratios, and the targets, in place."""
    models, teacher = task["models"], task["models"].get("teacher")
    for row in models.values():
        row["retention"] = row["score"] / teacher["score"] if teacher and teacher["score"] else None
        timed = teacher and "examples_per_second_b32" in teacher and "examples_per_second_b32" in row
        row["speedup_b32"] = row["examples_per_second_b32"] / teacher["examples_per_second_b32"] if timed else None
        row["latency_speedup_b1"] = teacher["latency_ms_b1"] / row["latency_ms_b1"] if timed else None
    task["kd_gain"] = {}
    for student in task["students"]:
        if student not in models:
            continue
        alone, embedded = models[student]["score"], models.get(student + "+teacher-emb", {}).get("score")
        task["kd_gain"][student] = {
            suffix: {"points": 100 * (models[student + suffix]["score"] - alone),
                     "points_over_teacher_emb": None if embedded is None
                     else 100 * (models[student + suffix]["score"] - embedded)}
            for suffix in KD_SUFFIXES if student + suffix in models}
    cost = task["training_cost"]
    if cost:
        seconds = cost["epoch_seconds"]
        cost["cached_over_plain"] = min(seconds["cached"]) / min(seconds["plain"])
        cost["online_over_plain"] = min(seconds["online"]) / min(seconds["plain"])
    inference = task["teacher_inference"]
    if inference:
        for side in ("pseudo_label", "pipeline"):
            seconds = inference[f"{side}_seconds"]
            inference[f"{side}_examples_per_second"] = inference["examples"] / seconds
            inference[f"{side}_gflops"] = inference["flops_real_tokens"] / seconds / 1e9
            inference[f"{side}_fraction_of_fp32_peak"] = (inference[f"{side}_gflops"]
                                                          / inference["matmul_gflops_fp32"])
        inference["speedup_over_pipeline"] = inference["pipeline_seconds"] / inference["pseudo_label_seconds"]
        if inference.get("bf16"):
            bf16 = inference["bf16"]
            bf16["examples_per_second"] = inference["examples"] / bf16["seconds"]
            bf16["gflops"] = inference["flops_real_tokens"] / bf16["seconds"] / 1e9
            bf16["fraction_of_bf16_peak"] = bf16["gflops"] / inference["matmul_gflops_bf16"]
            bf16["speedup_over_pipeline"] = inference["pipeline_seconds"] / bf16["seconds"]
    onnx = task["onnx_teacher"]
    if onnx:
        scores = {variant: run["test"][task["metric"]] for variant, run in onnx["kd"].items()}
        onnx["kd_int8_minus_fp32_points"] = 100 * (scores["onnx-int8"] - scores["onnx-fp32"])
    task["targets"] = targets(task)


def targets(task: dict) -> list[dict]:
    """The issue's targets for one task: what was measured and whether it is met (None: not measured).
    KD gain and the best student are judged only once every model of the task has been scored."""
    models, checks = task["models"] if task["models_complete"] else {}, []
    gains = [(gain["points"], f"{student}{suffix}") for student, variants in task["kd_gain"].items()
             for suffix, gain in variants.items() if student not in TRANSFORMER_STUDENTS] \
        if task["models_complete"] else []
    best_gain = max(gains, default=None)
    checks.append({"target": f"KD gain >= {TARGETS['kd_gain_points']:g} points over the same student alone",
                   "measured": f"{best_gain[0]:+.1f} points ({best_gain[1]})" if best_gain else None,
                   "met": best_gain[0] >= TARGETS["kd_gain_points"] if best_gain else None})
    distilled = {name: row for name, row in models.items() if name.endswith(KD_SUFFIXES)
                 and not name.startswith(TRANSFORMER_STUDENTS)}
    best_name = max(distilled, key=lambda name: distilled[name]["score"], default=None)
    best = distilled.get(best_name)
    keeps = best is not None and best["retention"] is not None
    checks.append({"target": f"best distilled student keeps >= {TARGETS['retention']:.0%} of the teacher's score",
                   "measured": f"{best['retention']:.1%} ({best_name})" if keeps else None,
                   "met": best["retention"] >= TARGETS["retention"] if keeps else None})
    fast = best is not None and best.get("speedup_b32") is not None
    checks.append({"target": f"... and is >= {TARGETS['speedup_b32']:g}x the teacher's batch-32 throughput",
                   "measured": f"{best['speedup_b32']:.1f}x ({best_name})" if fast else None,
                   "met": best["speedup_b32"] >= TARGETS["speedup_b32"] if fast else None})
    if task["task"] == "classification":
        baseline = task["tfidf"][task["metric"]] if task["tfidf"] else None
        known = best is not None and baseline is not None
        checks.append({"target": "... and beats TF-IDF + logistic regression",
                       "measured": f"{best['score']:.4f} against {baseline:.4f} ({best_name})" if known else None,
                       "met": best["score"] > baseline if known else None})
    for student in (s for s in task["students"] if s in TRANSFORMER_STUDENTS):
        row = task["models"].get(student + "+kd-kl")
        timed = row is not None and row.get("speedup_b32") is not None
        checks.append({"target": f"{student}+kd-kl keeps >= {TARGETS['transformer_retention']:.0%} of the teacher's "
                                 f"score at >= {TARGETS['transformer_speedup_b32']:g}x its batch-32 throughput",
                       "measured": f"{row['retention']:.1%} at {row['speedup_b32']:.1f}x" if timed else None,
                       "met": row["retention"] >= TARGETS["transformer_retention"]
                       and row["speedup_b32"] >= TARGETS["transformer_speedup_b32"] if timed else None})
    for student, threshold in ((s, t) for s, t in task["augment_targets"].items() if s in task["students"]):
        row = models.get(student + "+kd-kl+augment")
        checks.append({"target": f"{student}+kd-kl+augment (no unlabeled text) >= {threshold:g}",
                       "measured": f"{row['score']:.4f} ({row['retention']:.1%} of the teacher)" if row else None,
                       "met": row["score"] >= threshold if row else None})
    checks += static_targets(task)
    checks += search_targets(task)
    ensemble = task.get("ensemble")
    if ensemble is not None or "ensemble" in task["missing"]:
        checks.append({"target": f"a student of two teachers beats the better single teacher's by >= "
                                 f"{TARGETS['ensemble_points']:g} points",
                       "measured": f"{ensemble['gain_points']:+.2f} points ({ensemble['student']})" if ensemble
                       else None,
                       "met": ensemble["gain_points"] >= TARGETS["ensemble_points"] if ensemble else None})
    cost = task["training_cost"]
    checks.append({"target": f"cached KD epoch <= {TARGETS['cached_epoch_ratio']:g}x a plain student epoch",
                   "measured": f"{cost['cached_over_plain']:.2f}x" if cost else None,
                   "met": cost["cached_over_plain"] <= TARGETS["cached_epoch_ratio"] if cost else None})
    inference = task["teacher_inference"]
    checks.append({"target": f"teacher inference (pseudo-label) >= {TARGETS['inference_ratio']:g}x the "
                             f"transformers pipeline",
                   "measured": f"{inference['speedup_over_pipeline']:.2f}x" if inference else None,
                   "met": inference["speedup_over_pipeline"] >= TARGETS["inference_ratio"] if inference else None})
    bf16 = inference.get("bf16") if inference else None
    if bf16:
        checks.append({"target": "... with the bf16 lever (`--precision bf16`; the pipeline stays at its fp32 default)",
                       "measured": f"{bf16['speedup_over_pipeline']:.2f}x, {bf16['labels_changed']} of "
                                   f"{bf16['labels_compared']:,} labels changed",
                       "met": bf16["speedup_over_pipeline"] >= TARGETS["inference_ratio"]})
    onnx = task["onnx_teacher"]
    int8 = onnx["pseudo_label"]["variants"]["onnx-int8"] if onnx else None
    ratio = onnx["pseudo_label"]["ratios"].get("int8 / pipeline") if onnx else None
    checks.append({"target": f"pseudo-label with the int8 ONNX teacher >= {TARGETS['inference_ratio']:g}x the "
                             "transformers pipeline",
                   "measured": f"{ratio:.2f}x, {int8['labels_changed']:,} of {int8['labels_compared']:,} labels "
                               "changed against the PyTorch teacher" if ratio is not None else None,
                   "met": ratio >= TARGETS["inference_ratio"] if ratio is not None else None})
    gap = onnx["kd_int8_minus_fp32_points"] if onnx else None
    checks.append({"target": f"a student distilled from int8 teacher logits within {TARGETS['int8_kd_points']:g} "
                             "points of one from fp32 logits",
                   "measured": f"{gap:+.2f} points ({onnx['student']})" if gap is not None else None,
                   "met": abs(gap) <= TARGETS["int8_kd_points"] if gap is not None else None})
    return checks


def static_targets(task: dict) -> list[dict]:
    """Issue 33's bars for the static student: a test score at model2vec's batch-32 speed or more (measured side
    by side, `static_peers`), and where the task has the n-gram bag, its speed at the bag's accuracy."""
    if "static" not in task["students"]:
        return []
    checks, peers, models = [], task.get("static_peers"), task["models"]
    if task.get("static_target") is not None:
        static, m2v = (peers or {}).get("static"), (peers or {}).get("model2vec")
        known = static is not None and m2v is not None and "examples_per_second_b32" in m2v
        checks.append({"target": f"static+kd-kl >= {task['static_target']:g} at >= model2vec's batch-32 throughput",
                       "measured": f"{static['test_accuracy']:.4f} at {static['examples_per_second_b32']:,.0f} ex/s "
                                   f"against model2vec's {m2v['test_accuracy']:.4f} at "
                                   f"{m2v['examples_per_second_b32']:,.0f}" if known else None,
                       "met": static["test_accuracy"] >= task["static_target"]
                       and static["examples_per_second_b32"] >= m2v["examples_per_second_b32"] if known else None})
    if "ngram" in task["students"]:
        static, bag = models.get("static+kd-kl"), models.get("ngram+kd-kl")
        known = static is not None and bag is not None and static.get("examples_per_second_b32") and \
            bag.get("examples_per_second_b32")
        checks.append({"target": "static+kd-kl is faster than ngram+kd-kl at its accuracy (within 0.5 points)",
                       "measured": f"{static['score']:.4f} at {static['examples_per_second_b32']:,.0f} ex/s against "
                                   f"{bag['score']:.4f} at {bag['examples_per_second_b32']:,.0f}" if known else None,
                       "met": static["examples_per_second_b32"] > bag["examples_per_second_b32"]
                       and static["score"] >= bag["score"] - 0.005 if known else None})
    return checks


def search_targets(task: dict) -> list[dict]:
    """Issue 42's bars for the student search (`--as-fast-as` the first student's `+kd-kl` run): its chosen
    student against the best default student within the same budget (both in the search's own report, their dev
    scores the means over the same seeds; test: each one's run with the search's seed), and its wall time
    against training the task's students one by one."""
    search = task.get("search")
    if search is None and "search" not in task["missing"]:
        return []
    chosen, default = (search.get("best"), search.get("default")) if search else (None, None)
    known = chosen is not None and default is not None
    seeds = (", ".join(map(str, chosen["seeds"])) if chosen.get("seeds")
             else f"{len(chosen['dev_scores'])} (not recorded)") if known else None
    versus = (f"trial {chosen['trial']} ({chosen['settings']['student']}) against the default "
              f"{default['student']} (trial {default['trial']})") if known else ""
    lacking = None if search is None else "no trial within the budget" if chosen is None else \
        "no default student within the budget" if default is None else None
    dev_gap = 100 * (chosen["mean_dev"] - default["mean_dev"]) if known else None
    checks = [{"target": "the searched student's mean dev score over its seeds is never below the best default "
                         "student's within the same budget",
               "measured": f"{chosen['mean_dev']:.4f} against {default['mean_dev']:.4f}, {dev_gap:+.2f} points: "
                           f"{versus}; seeds {seeds}"
               if known else lacking,
               "met": dev_gap >= 0 if known else (False if chosen is None and search else None)}]
    tests = known and "test" in chosen and "test" in default
    test_gap = 100 * (chosen["test"]["score"] - default["test"]["score"]) if tests else None
    seed = chosen["seeds"][0] if tests and chosen.get("seeds") else "the search's"
    checks.append({"target": f"... and on test it is ahead of it by >= {TARGETS['search_test_points']:g} points",
                   "measured": f"{chosen['test']['score']:.4f} against {default['test']['score']:.4f}, "
                               f"{test_gap:+.2f} points (each one's seed-{seed} run)" if tests else lacking,
                   "met": test_gap >= TARGETS["search_test_points"] if tests
                   else (False if chosen is None and search else None)})
    models = task["models"] if task["models_complete"] else {}
    students = sum(row["mean_epoch_seconds"] * row["epochs_run"] for name, row in models.items() if name != "teacher")
    timed = search is not None and students > 0
    checks.append({"target": f"the search's wall time <= {TARGETS['search_wall_ratio']:g}x training the task's "
                             "students one by one",
                   "measured": f"{search['wall_seconds']:,.0f} s against {students:,.0f} s "
                               f"({search['wall_seconds'] / students:.2f}x)" if timed else None,
                   "met": search["wall_seconds"] <= TARGETS["search_wall_ratio"] * students if timed else None})
    return checks


def search_across_tasks(tasks: dict) -> list[dict]:
    """Issue 42's bar across tasks: the searched student ahead of the best default on test (the per-task row's
    margin) on at least `search_tasks_ahead` of the tasks searched; judged once that many are or cannot be."""
    rows = {task["name"]: next((c["met"] for c in task["targets"] if c["target"].startswith("... and on test")),
                               None) for task in tasks.values() if task.get("search") or "search" in task["missing"]}
    if not rows:
        return []
    ahead = [name for name, met in rows.items() if met]
    open_ = [name for name, met in rows.items() if met is None]
    needed = TARGETS["search_tasks_ahead"]
    return [{"target": f"the searched student ahead on test (>= {TARGETS['search_test_points']:g} points) on at "
                       f"least {needed} of the {len(rows)} tasks searched",
             "measured": f"ahead on {len(ahead)} of {len(rows)}" + (f" ({', '.join(ahead)})" if ahead else "")
             + (f"; not yet measured: {', '.join(open_)}" if open_ else ""),
             "met": True if len(ahead) >= needed else False if len(ahead) + len(open_) < needed else None}]


def search_section(search: dict) -> list[str]:
    """What the student search tried and chose (its own trials.md and trials.png have every trial)."""
    states = ", ".join(f"{count} {state}" for state, count in search["states"].items() if count)
    best = search.get("best")
    lines = [f"Student search (`nlp-train search --as-fast-as {search['reference']['model']}`, labelled data only): "
             f"budget {search['budget']['max_latency_ms']:.2f} ms for a batch of {search['latency']['batch_size']} "
             f"at {search['latency']['threads']} thread(s); {search['trials']} trials ({states}) in "
             f"{search['wall_seconds']:,.0f} s wall. Every trial: `{search['output']}/trials.md`.", ""]
    if best is None:
        return lines + ["No completed trial fitted the budget.", ""]
    chosen = best["settings"]
    rows = [("chosen", best, chosen["student"] + ": " + ", ".join(
        f"{name}={format(value, '.3g') if isinstance(value, float) else value}"
        for part in ("config", "loss", "training", "distiller") for name, value in chosen.get(part, {}).items()))]
    if search.get("default"):
        rows.append(("best default", search["default"], f"{search['default']['student']}: kd's defaults"))
    lines += ["| student (trial) | settings | dev | mean dev (seeds) | test | latency ms | MB |",
              "|---|---|---|---|---|---|---|"]
    for role, row, settings in rows:
        seeds = ", ".join(map(str, row["seeds"])) if row.get("seeds") else f"{len(row['dev_scores'])} runs"
        lines.append(f"| {role} ({row['trial']}) | {settings} | {row['dev_score']:.4f} | {row['mean_dev']:.4f} "
                     f"({seeds}) | {number(row.get('test', {}).get('score'))} | {row['latency_ms']:.2f} | "
                     f"{row['size_mb']:.1f} |")
    return lines + ["", "Dev: the trial's own run (the search's seed); mean dev: over it and its reseeded runs, what "
                        "the choice is made on; test: the trial's own run.", ""]


def number(value, spec: str = ".4f", missing: str = "–") -> str:
    return missing if value is None else format(value, spec)


def code_lines(segments: list[dict]) -> list[str]:
    """The code that measured: its commit, or each commit of a run resumed with newer code, from when (a stage
    ran at the commit of the last start before its line in the run's log)."""
    if not segments:
        return ["Code: commit not recorded (the run began before the benchmark recorded it).", ""]
    if len(segments) == 1:
        return [f"Code: commit {segments[0]['commit']} (run started {segments[0]['started']}).", ""]
    starts = "; ".join(f"{s['commit']} from {s['started']} ({', '.join(s['tasks'])})" for s in segments)
    return [f"Code: the run was resumed with newer code (finished stages were kept): {starts}.", ""]


def markdown(results: dict, command: str, commands: list[str], plots: dict) -> str:
    machine, lines = results["machine"], ["# Benchmarks", ""]
    if results["complete"]:
        lines += ["Status: **complete** (every stage of the command below finished).", ""]
    else:
        unfinished = [f"{key}: {', '.join(task['missing'])}" for key, task in results["tasks"].items()
                      if task["missing"]] + ([] if machine else ["machine peaks"])
        lines += ["Status: **PARTIAL**: these stages had not finished when this report was rendered, and their",
                  "rows or figures are missing (never estimated): " + "; ".join(unfinished) + ". Running the "
                  "command below again continues the run (finished stages are skipped); with `--report-only` "
                  "it re-renders this report.", ""]
    if machine:
        lines += [f"Run on {machine['cpu']}, {machine['logical_cores']} logical cores, "
                  f"{machine['memory_bytes'] / 2 ** 30:.0f} GiB; Python {machine['python']}, torch {machine['torch']}, "
                  f"transformers {machine['transformers']}; measured {machine['date']}: matmul peak "
                  f"({machine['matmul_size']}x{machine['matmul_size']}, {machine['threads']} torch thread(s)): fp32 "
                  f"{machine['matmul_gflops_fp32']:.0f} GFLOP/s, bf16 {machine['matmul_gflops_bf16']:.0f} GFLOP/s; "
                  "it moves with other jobs' load, so the teacher-inference sections measure it again just before "
                  "their runs.", ""]
    lines += code_lines(results.get("segments", []))
    lines += [f"Report rendered {datetime.date.today()}. Command:", "", "```{code-block} bash", command, "```", "",
              "The machine is shared with other jobs: speed figures are the best of two rounds, and every ratio",
              "compares models measured one after another in one process.", ""] + LEGEND + ["## Targets", "",
              "| task | target | measured | met |", "|---|---|---|---|"]
    rows = [(task["name"], check) for task in results["tasks"].values() for check in task["targets"]]
    for name, check in rows + [("across tasks", check) for check in results.get("targets", [])]:
        met = {True: "yes", False: "**no**", None: "not measured"}[check["met"]]
        lines.append(f"| {name} | {check['target']} | {check['measured'] or '–'} | {met} |")
    lines.append("")
    for task in results["tasks"].values():
        lines += task_section(task)
    if plots:
        lines += ["## Plots", ""] + [f"![{name.replace('_', ' ')}]({path})" for name, path in plots.items()] + [""]
    lines += ["## Commands", "", "Every training and evaluation stage, as `nlp-train` commands (a record of this run; "
              "tests/test_benchmark.py runs the same path on tiny models):", "", "```{code-block} bash"]
    return "\n".join(lines + commands + ["```", ""])


def task_section(task: dict) -> list[str]:
    metrics = QUALITY_METRICS[task["task"]]
    speed = task["speed"]
    lines = [f"## {task['name']} (test set)", ""]
    if speed:
        lines += [f"Speed: batch 32 over {speed['examples_b32']} test examples, batch 1 over {speed['examples_b1']}, "
                  f"{speed['threads']} torch thread(s), CPU.", ""]
    lines += ["| model | " + " | ".join(metrics) + " | retention | parameters | weights MB | disk MB | ex/s @32 "
              "| x teacher @32 | ms @1 | x teacher @1 | epochs (best) | s/epoch |",
              "|---|" + "---|" * (len(metrics) + 10)]
    for name, row in task["models"].items():
        cells = [number(row["test"].get(m)) for m in metrics]
        cells += [number(row["retention"], ".1%"), f"{row['parameters']:,}",
                  number(row.get("weight_bytes") and row["weight_bytes"] / 1e6, ".1f"),
                  number(row.get("disk_bytes") and row["disk_bytes"] / 1e6, ".1f"),
                  number(row.get("examples_per_second_b32"), ",.0f"), number(row["speedup_b32"], ".1f"),
                  number(row.get("latency_ms_b1"), ".2f"), number(row["latency_speedup_b1"], ".1f"),
                  f"{row['epochs_run']} ({row['best_epoch']})", f"{row['mean_epoch_seconds']:.1f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if task["tfidf"]:
        lines.append("| TF-IDF (1-2 grams) + logistic regression | "
                     + " | ".join(number(task["tfidf"].get(m)) for m in metrics) + " |" + " – |" * 10)
    lines.append("")
    if task["kd_gain"]:
        lines += [f"KD gain in points of {task['metric']} over the same student alone (random embeddings); in "
                  "brackets over the student whose embeddings start from the teacher's, as `kd`'s do:", "",
                  "| student | " + " | ".join(s.lstrip("+") for s in KD_SUFFIXES) + " |",
                  "|---|" + "---|" * len(KD_SUFFIXES)]
        for student, gains in task["kd_gain"].items():
            cells = [f"{gains[s]['points']:+.1f} ({number(gains[s]['points_over_teacher_emb'], '+.1f')})"
                     if s in gains else "–" for s in KD_SUFFIXES]
            lines.append(f"| {student} | " + " | ".join(cells) + " |")
        lines.append("")
    cost = task["training_cost"]
    if cost:
        seconds = cost["epoch_seconds"]
        lines += [f"Training cost: one epoch of `{cost['student']}` on the training set, {cost['threads']} thread(s), "
                  "one after another in one process (best of the runs listed):", "",
                  "| plain student s | KD, logit cache s | KD, online teacher s | cache / plain | online / plain |",
                  "|---|---|---|---|---|",
                  f"| {', '.join(map(str, seconds['plain']))} | {', '.join(map(str, seconds['cached']))} | "
                  f"{', '.join(map(str, seconds['online']))} | {cost['cached_over_plain']:.2f}x | "
                  f"{cost['online_over_plain']:.1f}x |", ""]
        built = [row["teacher_logits_seconds"] for name, row in task["models"].items()
                 if row.get("cache_hit") is False and not name.endswith(UNLABELED_SUFFIX)]
        if built:
            lines += [f"Building the logit cache (teacher over the training set, once): {built[0]:.1f} s.", ""]
    inference = task["teacher_inference"]
    if inference:
        lines += [f"Teacher inference over {inference['examples']:,} unlabeled lines, batch "
                  f"{inference['batch_size']}, {inference['threads']} torch thread(s), each side's best of "
                  f"two alternating runs; GFLOP/s counts the encoder's FLOPs on real (unpadded) tokens; matmul "
                  f"peak measured just before: fp32 {inference['matmul_gflops_fp32']:.0f}, bf16 "
                  f"{inference['matmul_gflops_bf16']:.0f} GFLOP/s:", "",
                  "| | ex/s | GFLOP/s | of fp32 matmul peak |", "|---|---|---|---|"]
        for side, label in (("pseudo_label", "`nlp-train pseudo-label`"),
                            ("pipeline", f"`transformers.pipeline(\"{inference['pipeline']}\")`")):
            share = f"{inference[f'{side}_fraction_of_fp32_peak']:.0%}"
            lines.append(f"| {label} | {inference[f'{side}_examples_per_second']:,.1f} | "
                         f"{inference[f'{side}_gflops']:.1f} | {share} |")
        if inference.get("bf16"):
            bf16 = inference["bf16"]
            lines.append(f"| `nlp-train --precision bf16 pseudo-label` | {bf16['examples_per_second']:,.1f} | "
                         f"{bf16['gflops']:.1f} | ({bf16['fraction_of_bf16_peak']:.0%} of the bf16 peak) |")
        agreement = inference["label_agreement"]
        padding = inference["flops_padded"] / inference["flops_real_tokens"]
        lines += ["", f"pseudo-label is {inference['speedup_over_pipeline']:.2f}x the pipeline. Same model: the "
                      f"pipeline runs the teacher converted by `distill.hf_model.to_transformers` (largest logit "
                      f"difference {inference['max_logit_difference']:.1e})"
                  + (f"; labels agree on {agreement:.1%} of the lines." if agreement is not None else ".")
                  + f" Padding makes the computed FLOPs {padding:.2f}x the real-token count." + needed_peak(inference),
                  ""]
        if inference.get("bf16"):
            bf16 = inference["bf16"]
            lines += [f"With bf16 autocast pseudo-label is {bf16['speedup_over_pipeline']:.2f}x the (fp32) pipeline; "
                      f"{bf16['labels_changed']} of {bf16['labels_compared']:,} labels differ from the fp32 run.", ""]
    if task["onnx_teacher"]:
        lines += onnx_teacher_section(task["onnx_teacher"], task["metric"])
    if task.get("static_peers"):
        lines += static_peers_section(task["static_peers"])
    if task.get("search"):
        lines += search_section(task["search"])
    if task.get("ensemble"):
        ensemble = task["ensemble"]
        lines += [f"Teacher ensemble: a second teacher (the same recipe, the next seed) and `{ensemble['student']}` "
                  f"distilled (kd-kl) from each teacher and from both (`kd --teacher A --teacher B`, equal "
                  f"weights), {task['metric']} on the test set:", "", "| model | " + task["metric"] + " |", "|---|---|"]
        lines += [f"| {role} | {score:.4f} |" for role, score in ensemble["scores"].items()]
        lines += ["", f"The student of both is {ensemble['gain_points']:+.2f} points over the better single "
                      "teacher's student.", ""]
    return lines


def static_peers_section(peers: dict) -> list[str]:
    """The static student beside model2vec and TF-IDF (scripts/bench_static.py): test accuracy, and batch-32
    throughput timed in alternating rounds in one run."""
    lines = [f"Static student and its peers, side by side: batch-32 throughput at {peers['threads']} thread(s), best "
             f"of {peers['rounds']} alternating rounds; model2vec runs in its own environment (it pins "
             "transformers<5.4):", "", "| model | test accuracy | ex/s @32 |", "|---|---|---|"]
    rows = [("static+kd-kl", peers["static"]), ("model2vec (its distill + classifier)", peers.get("model2vec"))]
    for name, row in rows:
        lines.append(f"| {name} | {number(row and row.get('test_accuracy'))} | "
                     f"{number(row and row.get('examples_per_second_b32'), ',.0f')} |" if row else
                     f"| {name} | not run (no --model2vec-python) | – |")
    lines += [f"| TF-IDF (1-2 grams) + logistic regression | {peers['tfidf']['accuracy']:.4f} | – |", ""]
    return lines


def onnx_teacher_section(onnx: dict, metric: str) -> list[str]:
    """The exported teacher for the bulk pass: pseudo-label speed per teacher form, and kd from int8 vs fp32 logits."""
    stage = onnx["pseudo_label"]
    lines = [f"The exported teacher for the bulk pass (`nlp-train export --quantize int8`, docs/export.md): "
             f"`pseudo-label` over {stage['examples']:,} unlabeled lines, batch {stage['batch_size']}, "
             f"{onnx['threads']} thread(s) on {onnx['cpu']}, onnxruntime {onnx['onnxruntime']}, each teacher's best "
             "of two alternating rounds, the transformers pipeline (fp32) on the same model; labels changed count "
             "against the PyTorch teacher's (words for tagging):", "",
             "| teacher | ex/s | x pipeline | labels changed |", "|---|---|---|---|"]
    pipeline = stage["variants"].get("pipeline", {}).get("examples_per_second")
    for name, entry in stage["variants"].items():
        moved = f"{entry['labels_changed']:,} of {entry['labels_compared']:,}" if "labels_changed" in entry else "–"
        times = number(pipeline and entry["examples_per_second"] / pipeline, ".2f")
        lines.append(f"| {name} | {entry['examples_per_second']:,.1f} | {times} | {moved} |")
    lines += ["", f"`{onnx['student']}` distilled from each export's logits (same seed, data and settings; the "
                  "training data plus those lines as unlabeled text):", "",
              f"| teacher logits | best epoch | dev {metric} | test {metric} |", "|---|---|---|---|"]
    for name, run in onnx["kd"].items():
        lines.append(f"| {name} | {run['best_epoch']} | {run['dev'][metric]:.4f} | {run['test'][metric]:.4f} |")
    lines += ["", f"int8 minus fp32: {onnx['kd_int8_minus_fp32_points']:+.2f} points of test {metric}.", ""]
    return lines


def needed_peak(inference: dict) -> str:
    """What the inference target would take in fp32, so a miss reads as a hardware bound or not."""
    share = inference["pipeline_fraction_of_fp32_peak"]
    return (f" {TARGETS['inference_ratio']:g}x the pipeline in fp32 would take "
            f"{TARGETS['inference_ratio'] * share:.0%} of the fp32 matmul peak on real tokens.")


def frontier(points: dict[str, tuple[float, float]]) -> list[str]:
    """The Pareto-optimal names of (speed, score) `points`, fastest first: no other point is at least as
    fast and scores higher."""
    kept, best = [], float("-inf")
    for name, (_, score) in sorted(points.items(), key=lambda item: (-item[1][0], -item[1][1])):
        if score > best:
            kept.append(name)
            best = score
    return kept


def plotted(results: dict) -> dict[str, list[dict]]:
    """The tasks each plot of `PLOTS` shows (none: not drawn): the timed ones, those with a KD gain."""
    tasks = results["tasks"].values()
    return {"quality_vs_speed": [t for t in tasks
                                 if any(r.get("examples_per_second_b32") for r in t["models"].values())],
            "kd_gain": [t for t in tasks if t["kd_gain"]]}


def plotting():
    """matplotlib, drawing to files (no display), or one line naming the `bench` extra: the report's plots need it,
    so the benchmark asks for it before its first stage, not at the report hours later."""
    module = import_extra("matplotlib", "the benchmark report's plots", BENCH_EXTRA)
    module.use("Agg")
    return module


def plot(results: dict, folder: Path) -> None:
    """PNG plots next to the report (those `plotted` names): score vs batch-32 throughput with the frontier of the
    models no other is both faster and better than, and KD gain per task."""
    plotting()
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter
    timed, gained = plotted(results).values()
    if timed:
        figure, axes = plt.subplots(1, len(timed), figsize=(6.5 * len(timed), 4.8), squeeze=False)
        for axis, task in zip(axes[0], timed):
            points = {}  # name -> (speed, score) of every timed model
            for name, row in task["models"].items():
                if row.get("examples_per_second_b32") is None:
                    continue
                points[name] = (row["examples_per_second_b32"], row["score"])
                kind = "teacher" if name == "teacher" else "KD" if name.endswith(KD_SUFFIXES) else "student alone"
                style = {"teacher": ("k", "s"), "KD": ("tab:blue", "o"), "student alone": ("tab:orange", "^")}[kind]
                axis.scatter(row["examples_per_second_b32"], row["score"], c=style[0], marker=style[1],
                             label=kind)
                axis.annotate(name, (row["examples_per_second_b32"], row["score"]), fontsize=7,
                              xytext=(4, 2), textcoords="offset points")
            best = [points[name] for name in frontier(points)]
            axis.plot(*zip(*best), color="tab:green", linewidth=1, zorder=0, label="frontier (Pareto-optimal)")
            if task["tfidf"]:
                axis.axhline(task["tfidf"][task["metric"]], color="tab:gray", linestyle=":",
                             label="TF-IDF + logistic regression")
            handles = dict(zip(*reversed(axis.get_legend_handles_labels())))
            axis.legend(handles.values(), handles.keys(), fontsize=8, loc="lower left")
            axis.set(xscale="log", xlabel="examples/s, batch 32, CPU (log)", ylabel=f"test {task['metric']}",
                     title=task["name"])
            axis.xaxis.set_minor_formatter(NullFormatter())  # a narrow range labels them all
            axis.grid(alpha=0.3)
        save(figure, folder, PLOTS["quality_vs_speed"])
    if gained:
        figure, axes = plt.subplots(1, len(gained), figsize=(6.5 * len(gained), 4.2), squeeze=False)
        for axis, task in zip(axes[0], gained):
            students = list(task["kd_gain"])
            width = 0.8 / len(KD_SUFFIXES)
            for offset, suffix in enumerate(KD_SUFFIXES):
                values = [task["kd_gain"][s].get(suffix, {}).get("points", float("nan")) for s in students]
                axis.bar([i + offset * width for i in range(len(students))], values, width, label=suffix.lstrip("+"))
            axis.axhline(TARGETS["kd_gain_points"], color="k", linestyle="--", linewidth=1, label="target")
            axis.axhline(0, color="k", linewidth=0.5)
            axis.set_xticks([i + width * (len(KD_SUFFIXES) - 1) / 2 for i in range(len(students))], students)
            axis.set(ylabel=f"points of test {task['metric']} over the student alone", title=task["name"])
            axis.legend(fontsize=8)
        save(figure, folder, PLOTS["kd_gain"])


def save(figure, folder: Path, relative: str) -> None:
    """`figure` as the PNG at `folder`/`relative`, written whole (temp + rename) as every file of the report."""
    import io

    import matplotlib.pyplot as plt
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    write_bytes(folder / relative, image.getvalue())


def check_report(report: Path, inputs: list[Path]) -> None:
    """The rule for `write_report`'s files, checked before a run's first stage: the Markdown and the JSON beside it
    are two files, neither an input nor in a model's folder (a model's README.md was replaced, and its checksum
    failed), and an existing one is an earlier report (a re-render replaces it whole); the plots' img/ folder lies
    in no input and no model either."""
    from distill.outputs import check_output_file, check_written_folder
    data = report.with_suffix(".json")
    if data == report:
        raise DistillError(f"{report}: the report is Markdown, with its JSON beside it under that name with .json: "
                           "give a .md name")
    for path, ours in ((report, lambda text: text.startswith("# Benchmarks") or EXPORT_BEGIN in text),
                       (data, lambda text: '"tasks"' in text and '"commands"' in text)):
        check_output_file(path, inputs, "the benchmark's report", beside_model=False)
        if path.is_file() and path.stat().st_size and not ours(path.read_text(encoding="utf-8", errors="replace")):
            raise DistillError(f"{path}: exists and is not a report of this benchmark, which a re-render replaces "
                               "whole: choose another report name")
    check_written_folder(report.parent / "img", inputs)


def write_report(results: dict, report: Path, command: str, commands: list[str]) -> None:
    """`report` (Markdown), the same results as JSON next to it, and plots in its img/ folder. The Markdown is
    rendered first: a record it cannot read (`Record`) leaves the report as it was, not its plots and JSON new."""
    plots = {name: PLOTS[name] for name, tasks in plotted(results).items() if tasks}
    text = markdown(results, command, commands, plots)
    earlier = report.read_text(encoding="utf-8") if report.exists() else ""
    if EXPORT_BEGIN in earlier and EXPORT_END in earlier:
        kept = earlier.partition(EXPORT_BEGIN)[2].partition(EXPORT_END)[0]
        text = text.rstrip("\n") + f"\n\n{EXPORT_BEGIN}{kept}{EXPORT_END}\n"
    report.parent.mkdir(parents=True, exist_ok=True)
    plot(results, report.parent)
    write_json(report.with_suffix(".json"), {**results, "command": command, "commands": commands, "plots": plots})
    write_text(report, text)


if __name__ == "__main__":  # a module of the benchmark scripts: run on its own it would do nothing in silence
    raise SystemExit(f"{__file__}: a module that scripts/benchmark.py imports, not a script; run scripts/benchmark.py "
                     "--help")
