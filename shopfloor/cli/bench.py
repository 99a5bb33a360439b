"""`shopfloor bench`: measurements side by side with their reference, from one run."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(help="Benchmarks, each measured side by side with its reference in one run.")
    app.add_typer(bench_app, name="bench")

    @bench_app.command("loop")
    def loop() -> None:
        """Durable agent loop vs the same loop in memory."""
        raise NotImplementedError
