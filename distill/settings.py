"""The settings spine: each settings dataclass field knows its command-line option, so the CLI, the run
configs (``run_config.yaml``) and the Python API name one setting one way, from one place.

A field whose option is spelled as the field is (``batch_size`` and ``--batch-size``) needs nothing; one whose
option differs says so with `setting` (``warmup = setting(0.1, option="--warmup-ratio")``), and one whose option
is its negation says that too (``progress = setting(True, option="--quiet", negated=True)``). `config_value`
finds a field's value in a run config under either spelling, and `option_of` is the name an error message
gives the setting: the option on the command line, the field to a Python caller.

The same metadata carries what the command line needs to declare the option (`procedures.settings_cli` builds
every command's options from it): ``help``, ``choices``, bounds (``low``/``high``, ``low_open``/``high_open``),
``aliases`` (other spellings of the option), ``off`` (the flag that turns a boolean off), ``metavar``, ``path``
("file" or "dir": a local path), ``parse`` (text to value, for a value the command line writes as text) and
``default_text`` (the help's default where the field's default, None, stands for a computed one) and
``cli_default`` (the default as the command line writes it, where the field's is not text: ``none`` for None).
"""

from __future__ import annotations

import dataclasses
from typing import Any

_UNSET = object()


CLI_METADATA = ("help", "choices", "low", "high", "low_open", "high_open", "aliases", "off", "metavar", "path",
                "parse", "default_text", "cli_default")


def setting(default: Any = dataclasses.MISSING, *, option: str | None = None, negated: bool = False,
            **arguments: Any) -> Any:
    """A dataclass field whose command-line option is `option` (``--warmup-ratio``), `negated` where the flag
    means the opposite of the field (``--quiet`` for ``progress``); the `CLI_METADATA` keywords describe the
    option (``help="..."``, ``low=0``); the others go to `dataclasses.field`."""
    metadata = dict(arguments.pop("metadata", {}))
    metadata.update({key: arguments.pop(key) for key in CLI_METADATA if key in arguments})
    if option is not None:
        metadata["option"] = option
    if negated:
        metadata["negated"] = True
    return dataclasses.field(default=default, metadata=metadata, **arguments)


def option_key(spec: dataclasses.Field) -> str:
    """The field's key in a run config, in Python spelling: its option's long name (``warmup_ratio``)."""
    option = spec.metadata.get("option") or "--" + spec.name
    return option.lstrip("-").replace("-", "_")


def option_of(spec: dataclasses.Field) -> str:
    """The field's command-line option (``--warmup-ratio``)."""
    return spec.metadata.get("option") or "--" + spec.name.replace("_", "-")


def config_value(spec: dataclasses.Field, config: dict[str, Any]) -> Any:
    """The value a run config (keys in Python spelling) gives field `spec`: under its option's key (negated back
    for a flag such as ``quiet``), else under the field's own name; `_UNSET` when neither is there or it is
    null (the default)."""
    key = option_key(spec)
    if config.get(key) is not None:
        value = config[key]
        return (not value if isinstance(value, bool) else value) if spec.metadata.get("negated") else value
    if config.get(spec.name) is not None:
        return config[spec.name]
    return _UNSET


def values_from(cls: type, config: dict[str, Any]) -> dict[str, Any]:
    """The init fields of dataclass `cls` that `config` sets, by field name."""
    values = {}
    for spec in dataclasses.fields(cls):
        if spec.init:
            value = config_value(spec, config)
            if value is not _UNSET:
                values[spec.name] = value
    return values


def named(cls: type, name: str, api: str | None = None) -> str:
    """Field `name` of settings class `cls` as an error message names it to its reader: the option on the command
    line (``--warmup-ratio``), else `api` or ``name=...`` (`distill.errors.option`)."""
    from distill.errors import option
    return option(option_of(field_of(cls, name)), api or f"{name}=...")


def field_of(cls: type, name: str) -> dataclasses.Field:
    """Settings class `cls`'s field `name` (its metadata: the option, help and bounds)."""
    return next(spec for spec in dataclasses.fields(cls) if spec.name == name)
