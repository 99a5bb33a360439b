"""The `shopfloor` command: one Typer app, each group of commands in its own module."""

from __future__ import annotations

import typer

from shopfloor.cli import agent, bench, dev, replay

app = typer.Typer(
    name="shopfloor",
    help="An event-driven software factory: durable LLM agents on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dev.register(app)
agent.register(app)
bench.register(app)
replay.register(app)


def main() -> None:
    app()
