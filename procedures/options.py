"""What the `nlp-train` commands share: option types, common options, one-use options, printing a result.

Light on purpose: `procedures.cli` imports it to build the group, and `nlp-train --help` must not
import torch or transformers. The library is imported inside the functions that need it.
"""

from __future__ import annotations

import functools
import math

import click

from distill.data import DataOptions


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf, which would surface only later as a NaN loss."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


POSITIVE_INT = click.IntRange(min=1)
NON_NEGATIVE = FiniteFloatRange(min=0.0)
PROBABILITY = FiniteFloatRange(0, 1)
DROPOUT = FiniteFloatRange(0, 1, max_open=True)
# Adam steps larger than 1 diverge at once: refuse them here rather than as a NaN loss later.
LEARNING_RATE = FiniteFloatRange(min=0, max=1, min_open=True)


def given(context: click.Context, name: str) -> bool:
    """Whether the user set option `name` (rather than it taking its default): on the command line, or in
    the --config file to other than its default (a run's run_config.yaml lists the defaults too)."""
    from procedures.config import set_in_file
    source = context.get_parameter_source(name)
    return source is not None and (source.name in ("COMMANDLINE", "ENVIRONMENT") or
                                   source.name == "DEFAULT_MAP" and set_in_file(context, name))


def column_options(func):
    """--text-column/--label-column/--tag-column, packed into a DataOptions, for commands that read labelled
    data with a trained model: the model's own label hierarchy (and separator) reads the labels."""
    @click.option("--text-column", default="text", show_default=True, help="CSV/TSV/JSONL column with the text.")
    @click.option("--label-column", default="label", show_default=True, help="Column with the class label.")
    @click.option("--tag-column", default=-1, show_default=True, type=int,
                  help="CoNLL field holding the tag (-1 = last, e.g. NER in CoNLL-2003; 1 = POS).")
    @functools.wraps(func)
    def wrapper(*args, text_column, label_column, tag_column, label_separator="/", **kwargs):
        if text_column == label_column:
            raise click.BadParameter("--text-column and --label-column name the same column",
                                     param_hint="'--label-column'")
        options = DataOptions(text_column, label_column, tag_column, label_separator or None)
        return func(*args, data=options, **kwargs)
    return wrapper


def data_options(func):
    """`column_options` and --label-separator, for commands that build a label hierarchy from training data."""
    return click.option("--label-separator", default="/", show_default=True,
                        help="Separator of hierarchical labels such as Science/Physics; '' for flat labels.")(
        column_options(func))


device_option = click.option("--device", default="auto", show_default=True,
                             help="auto (GPU if available), cpu, cuda or cuda:N.")
quiet_option = click.option("--quiet", is_flag=True, help="No progress bars.")
resume_option = click.option("--resume", is_flag=True,
                             help="Continue an interrupted run in --output from its last finished epoch "
                                  "(model, optimizer, RNG and data order restored; same options and "
                                  "unchanged input files required, else it is refused).")
overwrite_option = click.option("--overwrite", is_flag=True,
                                help="Replace what --output already holds (a model, an interrupted run, an "
                                     "earlier result). The old content comes back if this run fails.")


def refuse_repeated_options(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """A single-value option may be given once: click keeps the last of two silently (`--head sent
    --head ner` scored `ner`), and an option that would be ignored is refused."""
    seen: dict[str, str] = {}
    single = {name: param for param in command.params if isinstance(param, click.Option) and not param.multiple
              and not param.count for name in (*param.opts, *param.secondary_opts)}
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name not in single:
            continue
        if single[name].name in seen:
            first = seen[single[name].name]
            also = "" if first == name else f" (as {first} and {name})"
            raise click.UsageError(f"{first if first == name else single[name].opts[0]} is given twice{also}: "
                                   "give it once", ctx)
        seen[single[name].name] = name


class OnceCommand(click.Command):
    """A command whose single-value options may be given once (`refuse_repeated_options`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        refuse_repeated_options(self, ctx, args)
        return super().parse_args(ctx, args)


def command(name: str | None = None, **settings):
    """`click.command` making a `OnceCommand`: how every `nlp-train` command is declared."""
    return click.command(name, cls=OnceCommand, **settings)


def report(message: str) -> None:
    """Print a command's result once: on rank 0 under a launcher."""
    from distill import distributed
    if distributed.is_main():
        click.echo(message)
