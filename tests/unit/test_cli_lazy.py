"""The lazily loaded top-level group lists every command with the command's own help."""

from __future__ import annotations

import importlib

import pytest
import typer

from shopfloor.cli.lazy import COMMANDS, load

pytestmark = pytest.mark.fast


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_command_loads_with_the_help_it_is_listed_with(name: str):
    real = load(name)
    assert real.name == name
    assert _first_paragraph(real.help) == " ".join(COMMANDS[name].help.split())


def test_every_command_a_module_registers_is_listed():
    for module_name in sorted({entry.module for entry in COMMANDS.values()}):
        app = typer.Typer()
        importlib.import_module(module_name).register(app)
        registered = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}  # type: ignore[union-attr]
        registered |= {g.name for g in app.registered_groups if g.name}
        listed = {name for name, entry in COMMANDS.items() if entry.module == module_name}
        assert registered == listed, module_name
