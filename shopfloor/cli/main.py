"""The `shopfloor` command: one Typer app, each group of commands in its own module."""

from __future__ import annotations

import logging
import os
import sys

import typer

from shopfloor.cli import agent, bench, control, demo, dev, follow, replay, run, simulator, status, transcript

app = typer.Typer(
    name="shopfloor",
    help="An event-driven software factory: durable LLM agents on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dev.register(app)
agent.register(app)
status.register(app)
follow.register(app)
bench.register(app)
replay.register(app)
control.register(app)
simulator.register(app)
transcript.register(app)
run.register(app)
demo.register(app)


def main() -> None:
    """The console script. Once a command is done, leave without interpreter finalization: the
    Temporal SDK's Rust threads can abort it ("Fatal Python error: PyGILState_Release",
    temporalio/sdk-python#300), turning a finished command's exit status into 134 or 139."""
    try:
        app()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`shopfloor status ID | head -1`)
            pass
    logging.shutdown()
    os._exit(code)
