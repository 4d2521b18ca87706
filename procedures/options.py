"""What the `nlp-train` commands share: option types, common options, one-use options, printing a result.

Light on purpose: `procedures.cli` imports it to build the group, and `nlp-train --help` must not
import torch or transformers. The library is imported inside the functions that need it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import click
from click.core import ParameterSource

from distill.data import DataOptions
from distill.runtime import Output, Runtime
from distill.settings import field_of
from procedures.config import CONFIG_FILE, DATA_FILES, option_name, set_in_file
from procedures.settings_cli import FiniteFloatRange, field_option


POSITIVE_INT = click.IntRange(min=1)
# Adam steps larger than 1 diverge at once: refuse them here rather than as a NaN loss later.
LEARNING_RATE = FiniteFloatRange(min=0, max=1, min_open=True)


def given(context: click.Context, name: str) -> bool:
    """Whether the user set option `name` (rather than it taking its default): on the command line, or in
    the --config file to other than its default (a run's run_config.yaml lists the defaults too)."""
    source = context.get_parameter_source(name)
    return source is not None and (source.name in ("COMMANDLINE", "ENVIRONMENT") or
                                   source.name == "DEFAULT_MAP" and set_in_file(context, name))


def column_options(func):
    """--text-column/--label-column/--tag-column, packed into a DataOptions, for commands that read labelled
    data with a trained model: the model's own label hierarchy (and separator) reads the labels."""
    @functools.wraps(func)
    def wrapper(*args, text_column, label_column, tag_column, label_separator="/", **kwargs):
        if text_column == label_column:
            raise click.BadParameter("--text-column and --label-column name the same column",
                                     param_hint="'--label-column'")
        options = DataOptions(text_column, label_column, tag_column, label_separator or None)
        return func(*args, data=options, **kwargs)
    for name in ("tag_column", "label_column", "text_column"):
        wrapper = field_option(field_of(DataOptions, name))(wrapper)
    return wrapper


def data_options(func):
    """`column_options` and --label-separator, for commands that build a label hierarchy from training data."""
    return field_option(field_of(DataOptions, "separator"))(column_options(func))


device_option = field_option(field_of(Runtime, "device"))
quiet_option = field_option(field_of(Runtime, "progress"))
resume_option = field_option(field_of(Output, "resume"))
overwrite_option = field_option(field_of(Output, "overwrite"))


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




def refuse_empty_paths(command: click.Command, ctx: click.Context) -> None:
    """A path option or argument (`DATA_FILES` among them) given an empty value ("$OUTPUT" with the variable unset,
    ``output: ''`` in a --config file) names the current folder to the file system: a model trained into it, a file
    output named by no name, the folder read as data. Refused, named, before anything is read or written."""
    for param in command.params:
        if not isinstance(param.type, click.Path) and param.name not in DATA_FILES:
            continue
        value = ctx.params.get(param.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(item, str) and not item.strip() for item in values):
            blank = next(item for item in values if isinstance(item, str) and not item.strip())
            raise click.BadParameter(f"{blank!r} is an empty or blank path, which names no file or folder (as a "
                                     "path, '' is the current folder): give one", ctx, param)


class OnceCommand(click.Command):
    """A command whose single-value options may be given once (`refuse_repeated_options`), and whose paths name
    something (`refuse_empty_paths`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        refuse_repeated_options(self, ctx, args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, its --config file an input that no output may replace (`distill.outputs.reading`)."""
        if ctx.meta.get(CONFIG_FILE) is None:  # the library loads with the command's own work, not before
            refuse_empty_paths(self, ctx)
            return super().invoke(ctx)
        from distill.outputs import reading
        try:
            refuse_empty_paths(self, ctx)
            with reading(ctx.meta[CONFIG_FILE]):
                return super().invoke(ctx)
        except click.UsageError as err:
            raise _from_file(ctx, err) from None


def _from_file(ctx: click.Context, err: click.UsageError) -> click.UsageError:
    """A refusal that names options the --config file set (`--temperature` judged beside `--kd-loss`) says so, as
    the user wrote no such flag: the keys and the file are added."""
    named = set(re.findall(r"--[a-z][a-z0-9-]*", err.format_message()))
    keys = [option_name(param) for param in ctx.command.params if isinstance(param, click.Option)
            and set(param.opts) & named and ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT_MAP]
    if not keys:
        return err
    where = f"{', '.join(keys)}: set in {ctx.meta[CONFIG_FILE]}"
    if isinstance(err, click.BadParameter):
        err.message = f"{err.message} ({where})"
        return err
    return click.UsageError(f"{err.message} ({where})", ctx)


def command(name: str | None = None, **settings):
    """`click.command` making a `OnceCommand`: how every `nlp-train` command is declared."""
    return click.command(name, cls=OnceCommand, **settings)


def report(message: str) -> None:
    """Print a command's result once: on rank 0 under a launcher."""
    from distill import distributed
    if distributed.is_main():
        click.echo(message)


# a language-model teacher's options, and the `distill.models.prompt.PromptSettings` field each sets
PROMPT_SETTINGS = {"--labels": "labels", "--prompt": "template", "--shots": "shots", "--shots-from": "shots_from",
                   "--base-url": "base_url", "--max-requests": "max_requests"}


def labels_option_value(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | list[str] | None:
    """--labels as the library reads it (`distill.label_names.parse_labels`): given once, its comma-separated text;
    given once per label, the list of them, whose words may hold commas (``--labels "negative=bad, awful"
    --labels positive=good``). A name holding a comma there is refused: several labels meant as one option."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    several = next((value for value in values if "," in value.partition("=")[0]), None)
    if several is not None:
        raise click.BadParameter(f"given once per label, each --labels is one label, and {several!r} names several: "
                                 "give them all in one --labels, or one label per --labels", ctx, param)
    return list(values)


def refuse_unasked(options: list[str], models) -> None:
    """A language-model teacher's options given where no model of the command is one, or a served teacher's where
    none is served, would be ignored in silence: refused in one line (`distill.models.kinds.refuse_unasked`, the
    library's rule for `prompt_settings`), before the command does anything."""
    from distill.errors import DistillError
    from distill.models.kinds import refuse_unasked as refuse
    sources = [models] if isinstance(models, str) else list(models or ())
    try:
        refuse(sources, [PROMPT_SETTINGS[name] for name in options])
    except DistillError as err:  # a usage error: the --config file that set an option is named (`_from_file`)
        raise click.UsageError(str(err)) from None


def llm_teacher_options(models: str, labels_from: str | None = None, shots_from: str | None = None,
                        labels_to: str | None = None):
    """The options of a language-model teacher (`distill.models.prompt`): --labels, --prompt, --shots,
    --shots-from, --base-url, --max-requests, set around the command as `prompt_settings`. `labels_from`: the
    command's parameter naming labelled data whose labels are the label set without --labels (kd's train_path,
    evaluate's data_file); `shots_from`: the one that --shots-from defaults to (kd's train_path; never data
    that a command scores); `labels_to`: the command's parameter that --labels is given to as well (kd's
    label_names, the label set of --soft-labels). `models`: the parameter holding the command's model or models;
    one of them must be a language-model teacher for any of these options to be given (`refuse_unasked`)."""
    def decorate(func):
        @click.option("--labels", "llm_labels", metavar="NAME[=WORDS],...", multiple=True,
                      callback=labels_option_value,
                      help="A language-model teacher's labels (a causal LM folder, openai:MODEL), comma-separated: "
                           "NAME, or NAME=WORDS for the words the prompt uses for it (a name alone after NAME=WORDS "
                           "is refused: write NAME=NAME; repeat --labels, one label each, for words with commas) "
                           "[default: the labels of the labelled data]"
                           + ("; with --soft-labels, the file's label set [default: the labels it names]."
                              if labels_to else "."))
        @click.option("--prompt", "llm_prompt", type=click.Path(dir_okay=False),
                      help="A language-model teacher's prompt template: {text} once, and optionally {labels} and "
                           "{examples} [default: docs/llm-teachers.md].")
        @click.option("--shots", "llm_shots", default=0, show_default=True, type=click.IntRange(min=0),
                      help="Labelled examples a language-model teacher's prompt shows (seeded, every label in turn).")
        @click.option("--shots-from", "llm_shots_from",
                      help="Labelled data the --shots examples (and, without --labels, the labels) come from"
                           + (" [default: --train]." if shots_from else "."))
        @click.option("--base-url", "llm_base_url", metavar="URL",
                      help="A served teacher's endpoint (openai:MODEL, systemone:MODEL), e.g. http://127.0.0.1:8000/v1 "
                           "[default: $OPENAI_BASE_URL]; the key is read from $DISTILL_API_KEY or $OPENAI_API_KEY.")
        @click.option("--max-requests", "llm_max_requests", type=POSITIVE_INT,
                      help="Requests a served teacher has in flight at once [default: 8].")
        @functools.wraps(func)
        def wrapper(*args, llm_labels, llm_prompt, llm_shots, llm_shots_from, llm_base_url, llm_max_requests,
                    **kwargs):
            from distill.models.prompt import prompt_settings
            given = {"--labels": llm_labels, "--prompt": llm_prompt, "--shots": llm_shots or None,
                     "--shots-from": llm_shots_from, "--base-url": llm_base_url,
                     "--max-requests": llm_max_requests}
            soft_labels = labels_to and kwargs.get("soft_labels")
            if soft_labels:  # --labels: the label set of --soft-labels then
                given.pop("--labels")
            refuse_unasked([name for name, value in given.items() if value is not None], kwargs.get(models))
            labels_elsewhere = llm_labels or (labels_from and kwargs.get(labels_from))
            if llm_shots_from and not llm_shots and labels_elsewhere:  # neither examples nor labels come from it
                raise click.UsageError("--shots-from gives the prompt's --shots examples (and, without --labels or "
                                       "labelled data, its labels): with --shots 0 and the labels "
                                       f"{'of --labels' if llm_labels else 'of the labelled data'} it is unused; "
                                       "give --shots N, or drop it")
            if labels_to:
                kwargs[labels_to] = llm_labels
            shots = llm_shots_from or (kwargs.get(shots_from) if shots_from else None)
            with prompt_settings(labels=None if soft_labels else llm_labels, shots_from=shots,
                                 labels_from=kwargs.get(labels_from) if labels_from else None,
                                 data=kwargs.get("data") or DataOptions(),
                                 template=llm_prompt, shots=llm_shots, base_url=llm_base_url,
                                 **({"max_requests": llm_max_requests} if llm_max_requests else {})):
                return func(*args, **kwargs)
        return wrapper
    return decorate
