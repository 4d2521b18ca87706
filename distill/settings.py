"""The settings spine: each settings dataclass field knows its command-line option, so the CLI, the run
configs (``run_config.yaml``) and the Python API name one setting one way, from one place.

A field whose option is spelled as the field is (``batch_size`` and ``--batch-size``) needs nothing; one whose
option differs says so with `setting` (``warmup = setting(0.1, option="--warmup-ratio")``), and one whose option
is its negation says that too (``progress = setting(True, option="--quiet", negated=True)``). `config_value`
finds a field's value in a run config under either spelling, and `option_of` is the name an error message
gives the setting: the option on the command line, the field to a Python caller.
"""

from __future__ import annotations

import dataclasses
from typing import Any

_UNSET = object()


def setting(default: Any = dataclasses.MISSING, *, option: str | None = None, negated: bool = False,
            **field_arguments: Any) -> Any:
    """A dataclass field whose command-line option is `option` (``--warmup-ratio``), `negated` where the flag
    means the opposite of the field (``--quiet`` for ``progress``)."""
    metadata = dict(field_arguments.pop("metadata", {}))
    if option is not None:
        metadata["option"] = option
    if negated:
        metadata["negated"] = True
    return dataclasses.field(default=default, metadata=metadata, **field_arguments)


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
