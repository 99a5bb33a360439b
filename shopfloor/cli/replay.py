"""`shopfloor replay HISTORY.json`: does the current code still replay a recorded run?"""

from __future__ import annotations

from pathlib import Path

import typer

from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def replay(
        history: Path = typer.Argument(..., help="History JSON (Temporal UI/CLI export, or tests/histories/)."),
    ) -> None:
        """Replay a workflow history against this code: a nondeterminism error means it diverged."""
        from shopfloor.replay import replay as replay_history

        load_settings()
        if not history.is_file():
            fail(f"{history} is not a file")
        try:
            await replay_history(history)
        except ValueError as exc:
            fail(f"{history} is not a workflow history: {exc}")
        except Exception as exc:  # the replayer's failure is the answer, not a crash
            fail(f"{history} does not replay: {exc}", EXIT_FAILURE)
        typer.echo(f"{history}: replays cleanly")
