"""The `shopfloor` command: one Typer app, each group of commands in its own module, imported
only when one of its commands runs (lazy.py)."""

from __future__ import annotations

import logging
import os
import sys

import typer

from shopfloor.cli.lazy import LazyGroup

app = typer.Typer(
    name="shopfloor",
    cls=LazyGroup,
    help="An event-driven software factory: durable LLM agents on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _shopfloor() -> None:
    """An event-driven software factory: durable LLM agents on Temporal."""


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
