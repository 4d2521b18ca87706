"""`nlp-train search`: students and distillation settings searched within a latency or size budget
(`distill.student_search`), imported only when the command runs or shows its help."""

from __future__ import annotations

import json

import click

from procedures.options import NON_NEGATIVE, POSITIVE_INT, FiniteFloatRange, command, data_options, device_option, \
    quiet_option, report

POSITIVE = FiniteFloatRange(min=0, min_open=True)


def print_space(context: click.Context, task: str | None) -> None:
    """--print-space TASK: the default space of `task` as YAML, then exit."""
    if task is None or context.resilient_parsing:
        return
    import yaml

    from distill.student_search import DEFAULT_SPACES
    click.echo(yaml.safe_dump(DEFAULT_SPACES[task], sort_keys=False), nl=False)
    context.exit()


@command(epilog="Budget: --max-latency-ms is the time of a batch of --batch-size dev examples at the global --threads "
                "(nlp-train --threads K search ..., or --threads K after the command; default: all cores), in "
                "PyTorch or ONNX Runtime, whichever is faster on this machine; --max-mb is the size of that "
                "runtime's model folder. Give either, both or none (then the best dev score wins). Trials over the "
                "budget are still trained and recorded. Under torchrun each process runs its own trials on the "
                "one storage (docs/search.md).")
@click.option("--teacher", "teacher_dir", required=True, type=click.Path(),
              help="The teacher directory (or its ONNX export) every trial distils.")
@click.option("--train", "train_path", required=True, help="Training data file.")
@click.option("--dev", "dev_path", required=True,
              help="Dev data file: picks each trial's best epoch, drives pruning, and is what latency is timed on.")
@click.option("--unlabeled", "unlabeled_path", help="Unlabeled text for every trial's transfer set (as kd).")
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="The search's folder: study.db, trials/NNNN, trials.json, trials.md, trials.png, best/ and "
                   "best-onnx/. The same command again resumes the search there.")
@click.option("--trials", default=20, show_default=True, type=POSITIVE_INT,
              help="Trials the study should hold finished (trained to the end, or pruned), counted over every "
                   "resume and every process that joins it; the default students are the first, and the reseeded "
                   "runs (--reseed-top) come on top.")
@click.option("--space", "space_path", type=click.Path(dir_okay=False),
              help="The search space as a YAML or JSON file: students with their config fields, and loss, training "
                   "and distiller settings (docs/search.md) [default: the task's, see --print-space].")
@click.option("--print-space", type=click.Choice(["classification", "tagging"]), expose_value=False, is_eager=True,
              callback=lambda c, p, v: print_space(c, v),
              help="Print the task's default search space as YAML (a start for --space FILE) and exit.")
@click.option("--max-latency-ms", type=POSITIVE, help="Budget: milliseconds a batch of --batch-size may take.")
@click.option("--as-fast-as", "as_fast_as", type=click.Path(file_okay=False), metavar="MODEL_DIR",
              help="Budget: as fast as this model (e.g. the student you use now): its latency, timed here when the "
                   "search starts, in the same way as every trial's, is --max-latency-ms.")
@click.option("--batch-size", default=32, show_default=True, type=POSITIVE_INT,
              help="The batch size latency is measured at.")
@click.option("--max-mb", type=POSITIVE, help="Budget: megabytes the model folder may take.")
@click.option("--storage", metavar="URL",
              help="An Optuna storage URL that several processes or machines share, e.g. "
                   "postgresql://host/db or sqlite:////shared/study.db [default: sqlite:///OUTPUT/study.db].")
@click.option("--study-name", default="distill-search", show_default=True, help="The study's name in --storage.")
@click.option("--timeout", type=NON_NEGATIVE, metavar="SECONDS",
              help="Start no trial after this many seconds (the running one finishes).")
@click.option("--time-budget", type=POSITIVE, metavar="SECONDS",
              help="The whole search's time: start no trial once the study's trials have taken this long in all "
                   "(over every resume and process; keeping the time the reseeding needs). A running trial "
                   "finishes or is pruned.")
@click.option("--reseed-top", default=3, show_default=True, type=click.IntRange(0),
              help="Train the best N trials within the budget (and the best default student) again with --seeds "
                   "other seeds, and choose the best mean dev score (0: the best single run).")
@click.option("--seeds", default=2, show_default=True, type=click.IntRange(0),
              help="Other seeds each of the --reseed-top trials is trained with (--seed + 1, + 2, ...).")
@click.option("--test", "test_path",
              help="Labelled test data the chosen model and the best default student alone are scored on "
                   "(recorded in trials.json).")
@click.option("--prune/--no-prune", default=True, show_default=True,
              help="Stop a trial whose dev score falls below the median of its own student's other trials at the "
                   "same epoch (after two of them and its second epoch); the default students are never stopped.")
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seeds the sampler and every trial's training.")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Teacher-logit cache folder, shared by every trial and with kd and pseudo-label "
                   "(default: $DISTILL_CACHE/teacher-logits).")
@quiet_option
@data_options
@device_option
@click.pass_context
def search(context, teacher_dir, train_path, dev_path, unlabeled_path, output, trials, space_path, max_latency_ms,
           as_fast_as, batch_size, max_mb, storage, study_name, timeout, time_budget, reseed_top, seeds, test_path,
           prune, seed, cache_dir, quiet, data, device):
    """Search students and KD settings for the best dev score within a latency or size budget (Optuna)."""
    from distill.student_search import search as run_search
    threads = context.find_root().params.get("threads")
    result = run_search(teacher_dir, train_path, dev_path, output, trials, unlabeled_path, space_path,
                        max_latency_ms, batch_size, threads, max_mb, storage, study_name, timeout, test_path, prune,
                        seed=seed, cache_dir=cache_dir, device=device, data=data, progress=not quiet,
                        as_fast_as=as_fast_as, reseed_top=reseed_top, seeds=seeds, time_budget=time_budget)
    summary = result.report
    states = ", ".join(f"{count} {state}" for state, count in summary["states"].items()) or "no"
    report(f"search: {states} trials ({summary['wall_seconds']:.0f} s here); table {output}/trials.md, "
           f"plot {output}/trials.png, every trial in {output}/trials.json")
    best = summary["best"]
    if best is None:
        report("search: no finished trial within the budget: nothing chosen (raise the budget or run more trials)")
        return
    for name, chosen in (("best trial", best), ("best default", summary["default"])):
        if chosen is None:
            continue
        test = f"; test {chosen['test']['score']:.4f}" if "test" in chosen else ""
        what = f"kd --model {chosen['student']}" if name == "best default" else \
            f"{chosen['settings']['student']} {json.dumps(chosen['settings']['config'])}"
        saved = f"; saved to {output}/best" if chosen is best else ""
        report(f"search: {name} {chosen['trial']}: {what}, dev {chosen['dev_score']:.4f} (mean "
               f"{chosen['mean_dev']:.4f} over {len(chosen['dev_scores'])} runs), {chosen['latency_ms']:.2f} ms a "
               f"batch, {chosen['size_mb']:.2f} MB{test}{saved}")
