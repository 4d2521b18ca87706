"""`nlp-train search`: students and distillation settings searched within a latency or size budget
(`distill.student_search`), imported only when the command runs or shows its help."""

from __future__ import annotations

import dataclasses
import json

import click

from distill.runtime import Runtime
from distill.student_search.study import SearchSettings
from procedures.options import command, data_options, report
from procedures.settings_cli import settings_options


class PrintSpaceOption(click.Option):
    """--print-space, which prints and exits before any other option is read: given with others, they would be
    dropped in silence (a --space FILE among them), so it is refused unless alone."""

    def handle_parse_result(self, ctx: click.Context, opts, args):
        others = [param.opts[0] for param in ctx.command.params if param.name in opts and param is not self]
        if opts.get(self.name) is not None and others and not ctx.resilient_parsing:
            raise click.UsageError("--print-space prints a default space and exits: give it alone (it would ignore "
                                   f"{', '.join(others)})", ctx)
        return super().handle_parse_result(ctx, opts, args)


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
@click.option("--teacher", "teacher_dirs", required=True, multiple=True, type=click.Path(),
              help="The teacher directory (or its ONNX export) every trial distils: one teacher (an ensemble, "
                   "--teacher repeated, is refused in one line: the trials distil one teacher's cached logits).")
@click.option("--train", "train_path", required=True, help="Training data file.")
@click.option("--dev", "dev_path", required=True,
              help="Dev data file: picks each trial's best epoch, drives pruning, and is what latency is timed on.")
@click.option("--unlabeled", "unlabeled_path", help="Unlabeled text for every trial's transfer set (as kd).")
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="The search's folder: study.db, trials/NNNN, trials.json, trials.md, trials.png, best/ and "
                   "best-onnx/. The same command again resumes the search there.")
@click.option("--space", "space_path", type=click.Path(dir_okay=False),
              help="The search space as a YAML or JSON file: students with their config fields, and loss, training "
                   "and distiller settings (docs/search.md) [default: the task's, see --print-space].")
@click.option("--print-space", cls=PrintSpaceOption, type=click.Choice(["classification", "tagging"]),
              expose_value=False, is_eager=True,
              callback=lambda c, p, v: print_space(c, v),
              help="Print the task's default search space as YAML (a start for --space FILE) and exit.")
@click.option("--test", "test_path",
              help="Labelled test data the chosen model and the best default student alone are scored on "
                   "(recorded in trials.json).")
@settings_options(SearchSettings, "settings")
@settings_options(Runtime, "env")
@data_options
@click.pass_context
def search(context, teacher_dirs, train_path, dev_path, unlabeled_path, output, space_path, test_path, settings, env,
           data):
    """Search students and KD settings for the best dev score within a latency or size budget (Optuna)."""
    from distill.student_search import search as run_search
    threads = context.find_root().params.get("threads")
    teacher = list(teacher_dirs) if len(teacher_dirs) > 1 else teacher_dirs[0]  # the library refuses an ensemble
    result = run_search(teacher, train_path, dev_path, output, unlabeled=unlabeled_path, space=space_path,
                        test=test_path, threads=threads, device=env.device, data=data, progress=env.progress,
                        **dataclasses.asdict(settings))
    summary = result.report
    states = ", ".join(f"{count} {state}" for state, count in summary["states"].items()) or "none"
    report(f"search: trials {states} ({summary['wall_seconds']:.0f} s here); table {output}/trials.md, "
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
