"""The settings spine (issue 39): every settings field that has help is an option of each command that takes its
group, declared from the field alone, with the field's bounds; and a value the option refuses the API refuses too."""

from __future__ import annotations

import dataclasses

import click
import pytest

from distill.data import DataOptions
from distill.distiller import DistillSettings
from distill.errors import DistillError
from distill.loss_settings import LossSettings
from distill.models.multitask import TaskSampling
from distill.models.teacher import TeacherConfig, TeacherTraining
from distill.runtime import Output, Runtime
from distill.settings import option_of
from distill.student_search.study import SearchSettings
from distill.training import TrainSettings
from procedures.settings_cli import cli_fields

GROUPS = {  # command: the settings groups it takes whole (but the fields named)
    "teacher": [(TeacherConfig, ()), (TeacherTraining, ()), (TaskSampling, ()), (DataOptions, ()), (Runtime, ())],
    "student": [(TrainSettings, ()), (DataOptions, ()), (Runtime, ())],
    "kd": [(TrainSettings, ()), (LossSettings, ()), (DistillSettings, ()), (DataOptions, ()), (Runtime, ())],
    "search": [(SearchSettings, ()), (DataOptions, ()), (Runtime, ())],
}


def command(name: str) -> click.Command:
    from procedures.cli import cli
    return cli.get_command(click.Context(cli), name)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_every_setting_of_a_commands_groups_is_its_option_with_the_fields_help(name):
    options = {opt: param for param in command(name).params if isinstance(param, click.Option)
               for opt in param.opts}
    for cls, skipped in GROUPS[name]:
        for spec in cli_fields(cls, skipped):
            flag = option_of(spec)
            assert flag in options, f"{name} lacks {flag} ({cls.__name__}.{spec.name})"
            assert spec.metadata["help"][:40] in (options[flag].help or ""), (name, flag)


def bound_cases():
    """(settings class, field, a value just beyond a bound the field's metadata declares)."""
    for cls in (TrainSettings, TeacherTraining, TeacherConfig, DistillSettings, Runtime):
        for spec in cli_fields(cls):
            meta = spec.metadata
            if meta.get("low") is not None:
                yield cls, spec.name, meta["low"] if meta.get("low_open") else meta["low"] - 1
            if meta.get("high") is not None:
                yield cls, spec.name, meta["high"] if meta.get("high_open") else meta["high"] + 1


@pytest.mark.parametrize("cls, name, value", list(bound_cases()),
                         ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_the_api_refuses_what_the_option_refuses(cls, name, value):
    """The option's bounds come from the field's metadata; the dataclass checks the same bounds for an API caller
    (so the two cannot drift apart)."""
    spec = next(spec for spec in dataclasses.fields(cls) if spec.name == name)
    option = click.Context(click.Command("x"))
    from procedures.settings_cli import field_option
    param = field_option(spec)(lambda **kw: None).__click_params__[0]
    with pytest.raises(click.BadParameter):
        param.type.convert(value, param, option)
    with pytest.raises(DistillError):
        cls(**{name: value})


def test_output_resume_and_overwrite_together_are_refused_as_one_line():
    with pytest.raises(DistillError, match="give one of them"):
        Output("x", overwrite=True, resume=True)
