"""Every command-line option and public name of 568d4dd still resolves (issue 39: a restructuring keeps the
interface; an old spelling may warn, but it is taken). `tests/data/interface_568d4dd.json` lists them as they were."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

import distill

RECORDED = json.loads((Path(__file__).parent / "data" / "interface_568d4dd.json").read_text())


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}


@pytest.mark.parametrize("command", sorted(RECORDED["commands"]))
def test_every_recorded_option_is_still_taken(command):
    from procedures.cli import cli
    found = _options(cli) if command == "(group)" else _options(cli.get_command(click.Context(cli), command))
    assert sorted(set(RECORDED["commands"][command]) - found) == []


def test_every_recorded_public_name_still_resolves():
    missing = [name for name in RECORDED["names"] if not hasattr(distill, name)]
    assert missing == []
