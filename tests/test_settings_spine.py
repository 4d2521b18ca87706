"""The settings spine (issue 39): every settings field that has help is an option of each command that takes its
group, declared from the field alone, with the field's bounds; and a value the option refuses the API refuses too."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import click
import pytest

from distill.data import DataOptions
from distill.distiller import DistillSettings
from distill.errors import DistillError
from distill.loss_settings import LossSettings
from distill.models.multitask import TaskSampling
from distill.models.teacher import TeacherConfig, TeacherTraining
from distill.pseudo_label import PseudoLabelSettings
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
    from distill.settings import field_of
    spec = field_of(cls, name)
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


def test_threads_past_the_cap_are_refused_before_torch_takes_them(capsys):
    """--threads 20000 stopped the run with libgomp's 'Thread creation failed' at the first parallel step, and
    100000 aborted the process; the option and Runtime refuse more than MAX_THREADS alike."""
    from distill.runtime import MAX_THREADS
    from tests.conftest import run_main
    with pytest.raises(DistillError, match=f"threads must be a whole number from 1 to {MAX_THREADS}, got 100000"):
        Runtime(threads=100000)
    status, err = run_main(capsys, "--threads", "20000", "evaluate", "model", "data.csv")
    assert status == 2 and f"'--threads': 20000 is not in the range 1<=x<={MAX_THREADS}" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("directory", ["", "  "])
def test_output_to_an_empty_directory_name_is_refused(directory, tmp_path, monkeypatch):
    """Output(directory='') (a variable unset) wrote the model into the working folder, as --output '' is refused."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DistillError, match=f"^directory={directory!r}: an empty or blank path names no folder"):
        Output(directory)


SPELLING = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Each name a module binds by an import (function-local ones too), to what it names: ``option`` ->
    ``distill.errors.option``, ``errors`` -> ``distill.errors``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
        elif isinstance(node, ast.Import):
            names.update({alias.asname: alias.name for alias in node.names if alias.asname})
    return names


def _literal_text(node: ast.expr) -> str | None:
    """The text a message argument spells literally (an f-string's fixed parts), None for a computed one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "{}".join(part.value for part in node.values if isinstance(part, ast.Constant))
    return None


def message_spellings() -> list[tuple[str, str]]:
    """(where, option) for every command-line spelling the library's messages give: the literal ``--flag``
    words of each `distill.errors.option` call's CLI half, and the option of each `distill.settings.named`
    field."""
    import distill
    classes = {cls.__name__: cls for cls in (TrainSettings, TeacherConfig, TeacherTraining, TaskSampling,
                                             DistillSettings, LossSettings, DataOptions, Runtime, Output,
                                             PseudoLabelSettings, SearchSettings)}
    root = Path(distill.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = _imported_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            target = imported.get(func.id) if isinstance(func, ast.Name) else \
                f"{imported.get(func.value.id)}.{func.attr}" if isinstance(func, ast.Attribute) and \
                isinstance(func.value, ast.Name) else None
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            if target == "distill.errors.option":
                text = _literal_text(node.args[0])
                found += [(where, spelling) for spelling in SPELLING.findall(text or "")]
            elif target == "distill.settings.named":
                cls, name = node.args[0], node.args[1]
                assert isinstance(cls, ast.Name) and cls.id in classes, f"{where}: named() of an unknown class"
                fields = {spec.name: spec for spec in dataclasses.fields(classes[cls.id])}
                if isinstance(name, ast.Constant):  # else a field chosen at run time: `named` finds it or fails
                    assert name.value in fields, f"{where}: {cls.id} has no field {name.value!r}"
                    found.append((where, option_of(fields[name.value])))
    return found


def test_every_option_a_message_names_is_an_option_of_a_command():
    """A message that tells a command-line user to give or drop an option names one that exists: a renamed or
    removed option cannot live on in the library's error messages."""
    from procedures.cli import cli
    context = click.Context(cli)
    params = list(cli.params)  # the group's own: --threads, --precision
    for name in cli.list_commands(context):
        params += cli.get_command(context, name).params
    options = {spelling for param in params if isinstance(param, click.Option)
               for spelling in param.opts + param.secondary_opts}
    spellings = message_spellings()
    assert len(spellings) > 100 and any(option == "--tag-column" for _, option in spellings)  # the scan finds them
    unknown = [f"{where}: {option}" for where, option in spellings if option not in options]
    assert not unknown, "messages name options no command has:\n" + "\n".join(unknown)


def test_no_commands_help_shows_a_range_it_does_not_have():
    """An unbounded number has no range in --help (click printed `[default: -1; x<=None]` for --tag-column)."""
    from click.testing import CliRunner

    from procedures.cli import cli
    for name in sorted(cli.commands):
        shown = CliRunner().invoke(cli, [name, "--help"], terminal_width=200).output
        assert "None" not in shown, f"nlp-train {name} --help: {[line for line in shown.splitlines() if 'None' in line]}"
