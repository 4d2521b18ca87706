"""`--config FILE` for the training commands, and the resolved options a run records (`distill.config`).

The file fills click's ``default_map``, so a flag on the command line overrides it and every option,
those other modules add too, can be set there, each value checked by the option's own type and callback
and refused with its key named. An option the file sets counts as given (`procedures.options.given`)
unless it holds the option's default, since a run's ``run_config.yaml`` lists the defaults too.

`--threads` and `--precision`, options of the `nlp-train` group that change a run's numbers, may be set
in the file too (the command line wins), and are recorded.

Light on purpose, as `procedures.options`: PyYAML and the library load when a file is read or written.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import click
from click.core import ParameterSource

RAW = "distill.config.raw"  # ctx.meta: the values as typed on the command line
GLOBALS = "distill.config.globals"  # ctx.meta: the group's options that the file set
CONFIG_FILE = "distill.config.file"  # ctx.meta: the --config file, an input of the command
NOT_REPLAYED = ("output", "resume", "overwrite")  # a replay names its own output
GROUP_OPTIONS = ("threads", "precision")
# The data files (their parameter names) the commands read, taken as text (a hub:NAME:SPLIT dataset, '-' for stdin): paths all the same.
DATA_FILES = frozenset({"train_path", "dev_path", "test_path", "unlabeled_path", "input_path", "input_file",
                        "data_file", "check_data", "llm_shots_from"})
NO_DEFAULT = getattr(click.core, "UNSET", None)  # click >= 8.3: an option declared without a default
NATIVE_TYPES = (click.types.IntParamType, click.types.FloatParamType, click.types.BoolParamType, click.Choice,
                click.Path, click.types.StringParamType)  # casting their value again gives it back


class ConfigOption(click.Option):
    """--config, processed before every other option (eager): it keeps the command line's raw values,
    which a run records for options whose parsed value is an object (a student class, a task spec)."""

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> tuple[Any, list[str]]:
        ctx.meta[RAW] = dict(opts)
        return super().handle_parse_result(ctx, opts, args)


def option_name(param: click.Parameter) -> str:
    """An option's key in a config file: its long name without the dashes (``kd-loss``)."""
    return next(opt for opt in param.opts if opt.startswith("--"))[2:]


def _options(command: click.Command) -> dict[str, click.Option]:
    return {option_name(param): param for param in command.params
            if isinstance(param, click.Option) and param.expose_value}


def _takes_list(param: click.Parameter) -> bool:
    """Whether an option takes comma-separated values (its metavar says so: N,N,...), which a file may give as
    a list."""
    return "," in (param.metavar or "")


def _takes(ctx: click.Context, param: click.Parameter) -> str:
    """What an option takes, in words."""
    kind = param.type
    if isinstance(kind, click.types.IntParamType):
        return "a whole number"
    if isinstance(kind, click.types.FloatParamType):
        return "a number"
    if isinstance(kind, click.Path):
        return "a path"
    if isinstance(kind, click.Choice):
        return "one of " + ", ".join(map(str, kind.choices))
    return param.make_metavar(ctx)


def _typed(ctx: click.Context, param: click.Parameter, key: str, value: Any, path: str) -> str:
    """A file's scalar as it would be typed on the command line, so the option's type judges it as it judges a
    flag's: a number is its text (``epochs: 1.5`` is refused as ``--epochs 1.5`` is, not cut to 1), true or
    false is for an on/off option alone (``lr: true`` is no learning rate), and a value of another type (YAML's
    ``!!binary``) is refused, not handed to a type that would fail on it with a traceback."""
    if isinstance(value, bool):
        if not isinstance(param.type, click.types.BoolParamType):
            raise click.UsageError(f"{path}: {key}: takes {_takes(ctx, param)}, not {str(value).lower()}", ctx)
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):  # a tagged YAML value (!!binary, !!timestamp): no option's text
        raise click.UsageError(f"{path}: {key}: takes {_takes(ctx, param)}, not the {type(value).__name__} "
                               f"{value!r}", ctx)
    return value


def _checked(ctx: click.Context, param: click.Parameter, key: str, value: Any, path: str) -> Any:
    """A file's value for `param`, as the command line would give it, after the option's own type and
    callback accepted it: a list for an option given several times, a list joined with commas for one
    that takes comma-separated values (--class-weights 1,2 as [1, 2]); each scalar as its text (`_typed`)."""
    if isinstance(value, list) and not param.multiple and not _takes_list(param):
        raise click.UsageError(f"{path}: {key} takes one value; got the list {value!r}", ctx)
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(item, (list, dict)) for item in value)):
        takes = "a list of values" if param.multiple else \
            "one value, or a list joined with commas" if _takes_list(param) else "one value"
        raise click.UsageError(f"{path}: {key} takes {takes}; got {value!r}", ctx)
    if param.multiple:
        value = [_typed(ctx, param, key, item, path) for item in (value if isinstance(value, list) else [value])]
    elif isinstance(value, list):
        value = ",".join(_typed(ctx, param, key, item, path) for item in value)
    else:
        value = _typed(ctx, param, key, value, path)
    try:
        param.process_value(ctx, value)
    except click.BadParameter as err:
        raise click.UsageError(f"{path}: {key}: {err.message}", ctx) from None
    if isinstance(param.type, NATIVE_TYPES):  # as a number, a flag's true: what a default is compared with
        return param.type_cast_value(ctx, value)
    return value  # the text that gives an object (a student class): what a run records


def load_config(ctx: click.Context, param: click.Parameter, path: str | None) -> None:
    """--config's callback: the file's values become the command's defaults (flags override them)."""
    if path is None:
        return
    from distill.config import read_config
    options, root = _options(ctx.command), ctx.find_root()
    ctx.meta[CONFIG_FILE] = path
    defaults, group = {}, {}
    for key, value in read_config(path).items():
        if key in GROUP_OPTIONS and root is not ctx:
            target = next(p for p in root.command.params if p.name == key)
            if value is not None:
                group[key] = target.process_value(root, _checked(root, target, key, value, path))
            continue
        if key not in options:
            others = _siblings_taking(ctx, key)
            close = difflib.get_close_matches(key, [*options, *GROUP_OPTIONS], n=1)
            hint = f": it is an option of {' and '.join(others)}" if others else \
                f"; did you mean {close[0]!r}?" if close else ""  # the --help to see is named after it
            raise click.UsageError(f"{path}: unknown option {key!r} for {ctx.command.name}{hint}", ctx)
        if value is not None:  # null: the option's default
            defaults[options[key].name] = _checked(ctx, options[key], key, value, path)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    _apply_group_options(root, group)
    ctx.meta[GLOBALS] = group


def _siblings_taking(ctx: click.Context, key: str) -> list[str]:
    """The commands defined beside this one (those that take --config, loaded with it) that have option `key`: a
    config of another command's run (a kd run_config.yaml given to student) is said to be one."""
    group = ctx.find_root().command
    lazy = getattr(group, "lazy_commands", {})
    if ctx.command.name not in lazy:
        return []
    module = lazy[ctx.command.name][0].partition(":")[0]
    siblings = [group.get_command(ctx, name) for name, (where, _) in lazy.items()
                if name != ctx.command.name and where.partition(":")[0] == module]
    return [command.name for command in siblings if key in _options(command)]


def _apply_group_options(root: click.Context, values: dict[str, Any]) -> None:
    """--threads and --precision from the file, where the command line did not give them."""
    from distill.precision import set_precision
    for name, value in values.items():
        if root.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            continue
        if name == "precision":
            set_precision(value)
        else:
            import torch
            torch.set_num_threads(value)


def set_in_file(ctx: click.Context, name: str) -> bool:
    """Whether the config file set option `name` to other than its default (`procedures.options.given`)."""
    param = next(p for p in ctx.command.params if p.name == name)
    value, default = (ctx.default_map or {}).get(name), _own_default(ctx, param)
    if param.multiple:
        return list(value or ()) != list(default or ())
    return value != default


def _own_default(ctx: click.Context, param: click.Parameter) -> Any:
    """An option's default as declared, not the file's (asked through a context without its defaults)."""
    value = param.get_default(click.Context(ctx.command, info_name=ctx.info_name), call=True)
    return None if value is NO_DEFAULT else value


def config_option(func: Callable) -> Callable:
    """Add --config to a training command."""
    return click.option("--config", cls=ConfigOption, is_eager=True, expose_value=False, callback=load_config,
                        metavar="FILE", help="Read the options from a YAML or JSON file (keys: the long option "
                        "names below without their dashes); options given here override it. Every run records its "
                        "own: run_config.yaml in a model's folder, OUTPUT.config.yaml beside pseudo-label's output "
                        "(docs/configs.md).")(func)


def _absolute(path: str, always: bool = False) -> str:
    """A local path made absolute; a model named otherwise (hub:NAME, openai:MODEL) as written."""
    from distill.models.prompt import SERVED_PREFIXES
    if str(path).startswith(("hub:", *SERVED_PREFIXES)):
        return path
    return os.path.abspath(path) if always or os.path.exists(path) else path


def _absolute_paths(param: click.Option, key: str, value: Any) -> Any:
    """`value` with the local files and folders it names made absolute, so a replay finds them from anywhere."""
    if value is None or isinstance(value, bool):
        return value
    if key == "task-spec":  # NAME:TASK:TRAIN:DEV[:SETTING=VALUE...]
        return [":".join(part if i < 2 or "=" in part else _absolute(part) for i, part in enumerate(spec.split(":")))
                for spec in value]
    if isinstance(param.type, click.Path):
        return [_absolute(item, always=True) for item in value] if isinstance(value, list) else \
            _absolute(value, always=True)
    from distill.models.transformer_student import FROM_TEACHER
    if key == "encoder" and value == FROM_TEACHER:  # a student's layers from its teacher, even beside such a folder
        return value
    return _absolute(value) if param.name in DATA_FILES or key == "encoder" else value  # hub: names aside


def _plain(value: Any) -> bool:
    """Whether a parsed value is written as it is: a YAML scalar, or a list of them."""
    scalars = (str, int, float, bool, type(None))
    values = value if isinstance(value, (list, tuple)) else [value]
    return all(isinstance(item, scalars) for item in values)


def _raw(ctx: click.Context, param: click.Option) -> Any:
    """An option's value as given: typed on the command line, in the file, or its default."""
    source = ctx.get_parameter_source(param.name)
    if source is ParameterSource.COMMANDLINE:
        return ctx.meta[RAW][param.name]
    if source is ParameterSource.DEFAULT_MAP:
        return ctx.default_map[param.name]
    if source is ParameterSource.ENVIRONMENT:
        return param.value_from_envvar(ctx)
    return _own_default(ctx, param)


def resolved_config(ctx: click.Context | None = None) -> dict[str, Any]:
    """Every option of the running command with its final value, as a config file gives it (`--config` reads
    it back): from the flag, the file or the default; all but output, resume and overwrite."""
    from distill.precision import current
    ctx = ctx or click.get_current_context()
    config: dict[str, Any] = {}
    for key, param in _options(ctx.command).items():
        if param.name in NOT_REPLAYED:
            continue
        value = ctx.params[param.name]
        if param.callback is not None or not _plain(value):  # parsed into an object: the text that gave it
            value = _raw(ctx, param)
        if param.multiple and isinstance(param.type, click.Path) and len(value) == 1:
            value = value[0]  # kd's --teacher given once: one path, as recorded before it could be repeated
        config[key] = _absolute_paths(param, key, list(value) if isinstance(value, tuple) else value)
    root = ctx.find_root()
    threads = root.params.get("threads") if root is not ctx else None
    if root.get_parameter_source("threads") is not ParameterSource.COMMANDLINE:
        threads = ctx.meta.get(GLOBALS, {}).get("threads", threads)
    return {**config, "precision": current(), "threads": threads}


@contextlib.contextmanager
def recorded_beside(output: str) -> Iterator[None]:
    """A command whose output is one file (pseudo-label) records its options beside it, in
    OUTPUT.config.yaml: checked first (never a link, nor a file this command did not write), written by
    rank 0 once the command has succeeded."""
    from distill import distributed
    from distill.config import CONFIG_SUFFIX, is_run_config, write_run_config
    from distill.errors import DistillError
    from distill.io import check_target
    ctx = click.get_current_context()
    path = Path(output).with_name(Path(output).name + CONFIG_SUFFIX)
    check_target(path)
    if path.exists() and not is_run_config(path, ctx.command.name):
        raise DistillError(f"{path}: exists and is not the options of an earlier {ctx.command.name} run, which "
                           "this run writes there; move it, or choose another --output")
    config = resolved_config(ctx)
    yield
    if distributed.is_main():
        write_run_config(path, config, ctx.command.name)
