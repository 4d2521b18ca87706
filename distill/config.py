"""Run configs: a run's options in a YAML or JSON file, which `nlp-train teacher|student|kd|pseudo-label
--config FILE` reads and every training run writes into its folder as ``run_config.yaml``.

A file maps option names, spelled as on the command line without the dashes (``kd-loss``; ``kd_loss``
is read too), to values: numbers, strings, true/false, a list for an option given several times
(``task-spec``), null for the option's default. A written file holds every option of the run, its
defaults too, but ``output``, ``resume`` and ``overwrite``, so that ``nlp-train kd --config
runs/x/run_config.yaml --output runs/y`` replays the run; its input paths are absolute, so the replay
finds them from any folder. Relative paths in a file you write are read from the working directory,
as on the command line (see docs/configs.md).

The Python API reads the same files: `load_run_config` gives the options as a dict keyed by Python
names (``kd_loss``), and `settings_from` fills one of the API's settings classes from it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from distill.errors import DistillError

RUN_CONFIG = "run_config.yaml"  # in a training run's folder, beside the model: not part of the model's card
CONFIG_SUFFIX = ".config.yaml"  # beside a one-file output: OUTPUT.config.yaml
HEADER = "# nlp-train {command}: the options of a run"  # the first line of a written config

Settings = TypeVar("Settings")


def _option_spelling(key: Any, path: str | os.PathLike) -> str:
    """A config key in the CLI's spelling (``kd_loss`` as ``kd-loss``), so both spellings are one option."""
    if not isinstance(key, str):
        raise DistillError(f"{path}: {key!r} is not an option name; keys are option names such as kd-loss")
    return key.replace("_", "-")


def _unique_keys(pairs: list[tuple[Any, Any]], path: str | os.PathLike,
                 spelling: Callable[[Any, str | os.PathLike], Any] | None) -> dict:
    """A mapping's items (each key as `spelling` gives it): a key given twice is refused, as an option given twice
    on the command line is, where YAML and JSON readers keep the last in silence."""
    found: dict = {}
    for key, value in pairs:
        name = spelling(key, path) if spelling else key
        if name in found:
            raise DistillError(f"{path}: {name} is given twice; give it once")
        found[name] = value
    return found


TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


def _yaml_loader(path: str | os.PathLike, spelling: Callable | None):
    """PyYAML's safe loader, refusing a key given twice (which it would silently keep the last of). A plain
    2024-01-01 stays the text written: no option takes a date (`seed: 2024-01-01` is refused as its flag's
    text is, not by int()'s traceback), and a folder may be named so (`output: 2024-01-01`)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            pairs = [(self.construct_object(key, deep=deep), self.construct_object(value, deep=deep))
                     for key, value in node.value]
            return _unique_keys(pairs, path, spelling)

    Loader.yaml_implicit_resolvers = {first: [(tag, pattern) for tag, pattern in resolvers if tag != TIMESTAMP_TAG]
                                      for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    return Loader


def read_settings_file(path: str | os.PathLike, what: str, spelling: Callable | None = None) -> Any:
    """A YAML or JSON file of settings (`what`: "config", "search space"): JSON for a ``.json`` file, else YAML,
    a key given twice in any mapping refused; None for an empty file. Every problem with the file is one
    `DistillError` naming it."""
    import yaml
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DistillError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise DistillError(f"{path}: is a folder, not a {what} file") from None
    except UnicodeDecodeError:
        raise DistillError(f"{path}: not a text file (a {what} file is UTF-8 YAML or JSON)") from None
    except OSError as err:
        raise DistillError(f"{path}: cannot read the {what} file ({err.strerror})") from None
    if str(path).endswith(".json"):
        try:
            return json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, path, spelling))
        except json.JSONDecodeError as err:
            raise DistillError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    try:
        return yaml.load(text, Loader=_yaml_loader(path, spelling))  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise DistillError(f"{path}: not valid YAML ({where}{problem})") from None


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The options a config file sets, keyed as on the command line (``kd-loss``)."""
    values = read_settings_file(path, "config", _option_spelling)
    if values is None or values == {}:  # given as the run's options, it would run every default in silence
        raise DistillError(f"{path}: sets no option (the file is empty, or comments alone): give option names with "
                           "their values (such as epochs: 3)")
    if not isinstance(values, dict):
        kind = type(values).__name__
        raise DistillError(f"{path}: holds {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not option names with their "
                           "values (such as epochs: 3)")
    return values


def load_run_config(path: str | os.PathLike) -> dict[str, Any]:
    """A config file's options keyed by Python names (``kd_loss``), for the API: pass those of a settings
    class with `settings_from`, the others by name (``Distiller(..., cache_dir=config["cache_dir"])``)."""
    return {key.replace("-", "_"): value for key, value in read_config(path).items()}


def settings_from(cls: type[Settings], config: dict[str, Any] | str | os.PathLike, **changes: Any) -> Settings:
    """The settings dataclass `cls` (`TrainSettings`, `TeacherTraining`, `TeacherConfig`...) with every field a
    run config sets (a dict of `load_run_config`, or the file's path), null ones left at their default, then
    `changes`. A field is read under its option's key (``warmup-ratio`` for `TeacherTraining.warmup`: the
    field's metadata, `distill.settings`) or its own name. Its own checks apply, as to any settings given in
    Python."""
    if not dataclasses.is_dataclass(cls):
        raise DistillError(f"settings_from fills a settings dataclass such as TrainSettings, not {cls!r}")
    if not isinstance(config, dict):
        config = load_run_config(config)
    from distill.settings import values_from
    return cls(**{**values_from(cls, config), **changes})


def write_run_config(path: str | os.PathLike, config: dict[str, Any], command: str) -> None:
    """Write `config` (option names as on the command line, their values) as YAML, atomically, under a
    header that says how to replay it."""
    import yaml
    from distill.errors import option
    from distill.io import write_text
    name = Path(path).name
    replay = option(f"nlp-train {command} --config {name} --output NEW_OUTPUT",
                    f"distill.config.load_run_config({name!r}), then settings_from(...)")
    header = f"{HEADER.format(command=command)}, its defaults too (null: the command's default).\n# Replay it: {replay}\n"
    write_text(path, header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False))


def is_run_config(path: str | os.PathLike, command: str) -> bool:
    """Whether `path` is a config that `write_run_config` wrote for `command` (a rerun may replace it)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline(200).startswith(HEADER.format(command=command))
    except (OSError, UnicodeDecodeError):
        return False
