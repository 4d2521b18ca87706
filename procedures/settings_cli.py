"""Click options built from the settings dataclasses' field metadata (`distill.settings`): one declaration of
each setting, read by the API, the run configs and here.

`settings_options(TrainSettings, "settings")` adds an option per field of `TrainSettings` (its flag, help,
type and bounds from the field) and hands the command one `TrainSettings` built from them, under the keyword
``settings``. A command that shows a setting otherwise (another default or help) says so in `defaults` /
`helps`; a field the command does not take is left out with `exclude`.

A parameter is named as its option is spelled (``warmup_ratio`` for ``--warmup-ratio``), so a run's
``run_config.yaml`` keys and `procedures.options.given` read as they did before the options were generated,
and `distill.settings.values_from` maps them back to the fields.

Light, as `procedures.options`: the settings classes are plain dataclasses; nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Iterable

import click

from distill.errors import DistillError
from distill.settings import option_key, option_of, values_from

KEEP = object()  # `defaults`: the field's own default


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf, which would surface only later as a NaN loss."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number

    def _describe_range(self) -> str:
        """No range in the help of an unbounded number (click would print `x<=None`)."""
        return super()._describe_range() if self.min is not None or self.max is not None else ""


def _kind(spec: dataclasses.Field) -> str:
    """The field's value type, from its annotation (a string under ``from __future__ import annotations``): the
    first of bool, int, float it names, else str."""
    words = str(spec.type).replace("|", " ").replace("[", " ").split()
    return next((word for word in words if word in ("bool", "int", "float")), "str")


def _default(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return spec.default_factory()  # type: ignore[misc]
    return None


def _parsed(parse: Callable[[str], Any]) -> Callable:
    """A click callback from a text-to-value `parse` that raises DistillError on bad text."""
    def callback(context: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except DistillError as err:
            raise click.BadParameter(str(err)) from None
    return callback


def field_option(spec: dataclasses.Field, default: Any = KEEP, help: str | None = None,
                 default_text: str | None = None) -> Callable:
    """The click option of one settings field, its parameter named as the option is spelled; `default`, `help`
    and `default_text` where the command shows it otherwise than the field's metadata."""
    meta = spec.metadata
    default = meta.get("cli_default", _default(spec)) if default is KEEP else default
    text = help if help is not None else meta.get("help")
    text = text() if callable(text) else text
    declarations = [option_of(spec), *meta.get("aliases", ()), option_key(spec)]
    kind = _kind(spec)
    if kind == "bool":
        if meta.get("negated"):  # --quiet sets progress False
            return click.option(*declarations, is_flag=True, default=not default, help=text)
        if "off" in meta:
            declarations[0] = f"{declarations[0]}/{meta['off']}"
            return click.option(*declarations, default=default, show_default=True, help=text)
        return click.option(*declarations, is_flag=True, default=default, help=text)
    settings: dict[str, Any] = {"default": default, "show_default": default is not None, "help": text,
                                "metavar": meta.get("metavar")}
    shown = default_text or meta.get("default_text")
    if default is None and shown:
        settings["help"] = f"{text or ''} [default: {shown() if callable(shown) else shown}]".strip()
    bounds = {"min": meta.get("low"), "max": meta.get("high")}
    if "parse" in meta:
        settings["callback"] = _parsed(meta["parse"])
    elif "choices" in meta:
        choices = meta["choices"]
        settings["type"] = click.Choice(list(choices() if callable(choices) else choices))
    elif "path" in meta:
        settings["type"] = click.Path(file_okay=meta["path"] != "dir", dir_okay=meta["path"] != "file")
    elif kind == "int":
        settings["type"] = click.IntRange(**bounds) if any(v is not None for v in bounds.values()) else click.INT
    elif kind == "float":
        settings["type"] = FiniteFloatRange(**bounds, min_open=meta.get("low_open", False),
                                            max_open=meta.get("high_open", False))
    return click.option(*declarations, **settings)


def cli_fields(cls: type, exclude: Iterable[str] = ()) -> list[dataclasses.Field]:
    """The fields of settings class `cls` that the command line sets: those with help, less `exclude`."""
    return [spec for spec in dataclasses.fields(cls)
            if spec.init and spec.metadata.get("help") and spec.name not in exclude]


def settings_options(cls: type, into: str, exclude: Iterable[str] = (), defaults: dict[str, Any] | None = None,
                     helps: dict[str, str] | None = None, default_texts: dict[str, str] | None = None) -> Callable:
    """A decorator adding an option per field of settings dataclass `cls` (but `exclude`) and passing the command
    `cls(...)` of their values as keyword `into` (its `__post_init__` checks them, as for an API caller);
    `defaults`, `helps` and `default_texts` by field name where the command shows a field otherwise."""
    specs = cli_fields(cls, exclude)
    defaults, helps, default_texts = defaults or {}, helps or {}, default_texts or {}

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {option_key(spec): kwargs.pop(option_key(spec)) for spec in specs}
            kwargs[into] = cls(**values_from(cls, values))
            return func(*args, **kwargs)
        for spec in reversed(specs):
            wrapper = field_option(spec, defaults.get(spec.name, KEEP), helps.get(spec.name),
                                   default_texts.get(spec.name))(wrapper)
        return wrapper
    return decorate
