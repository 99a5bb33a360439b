"""`shopfloor bench`: measurements side by side with their reference, from one run."""

from __future__ import annotations

from pathlib import Path

import typer

from shopfloor.cli.common import command, load_settings


def _machine() -> str:
    from shopfloor.bench.webhooks import machine

    return machine()


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(
        help="Benchmarks, each measured side by side with its reference in one run. Without a command: all of them, one table."
    )
    app.add_typer(bench_app, name="bench")

    @bench_app.callback(invoke_without_command=True)
    def everything(
        ctx: typer.Context,
        quick: bool = typer.Option(False, "--quick", help="CI-sized parameters: every row in a minute or two."),
        only: str | None = typer.Option(
            None, "--only", help="Comma-separated benchmarks to run: loop, history, concurrency, webhooks, resume."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a markdown table."),
        profile_worker: Path | None = typer.Option(
            None,
            "--profile-worker",
            help="Run the concurrent runs' worker under cProfile and write its statistics to this file (python -m pstats FILE).",
        ),
    ) -> None:
        """Without a command: every benchmark, one table, each figure beside its reference."""
        if ctx.invoked_subcommand is not None:
            return
        _suite(quick=quick, only=only, as_json=as_json, profile_worker=profile_worker)

    @command
    async def _suite(*, quick: bool, only: str | None, as_json: bool, profile_worker: Path | None) -> None:
        from shopfloor.bench.suite import GROUPS, QUICK, SuiteParams, run_suite
        from shopfloor.errors import UsageError

        load_settings()  # logging as configured; each benchmark starts its own servers
        chosen = tuple(g.strip() for g in only.split(",") if g.strip()) if only else GROUPS
        unknown = sorted(set(chosen) - set(GROUPS))
        if unknown:
            raise UsageError(f"--only: unknown benchmark {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
        report = await run_suite(
            QUICK if quick else SuiteParams(),
            quick=quick,
            only=chosen,
            progress=lambda line: typer.echo(f"bench: {line}", err=True),
            worker_profile=profile_worker.resolve() if profile_worker else None,
        )
        typer.echo(report.model_dump_json(indent=2) if as_json else report.markdown())
        if report.errors:
            raise typer.Exit(1)

    @bench_app.command("loop")
    @command
    async def loop(
        steps: int = typer.Option(20, "--steps", min=2, help="Steps per run."),
        concurrent: int = typer.Option(
            50, "--concurrent", min=0, help="Concurrent runs for the throughput row (0: skip)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a markdown table."),
    ) -> None:
        """Durable agent loop vs the same loop in memory: time per step and history bytes per step."""
        from shopfloor.bench.loop import bench_loop

        load_settings()  # logging as configured; the bench starts its own Temporal and model server
        report = await bench_loop(steps=steps, concurrent=concurrent)
        if as_json:
            typer.echo(report.model_dump_json(indent=2))
            return
        typer.echo(f"agent loop, {steps} steps a run, on {_machine()}\n")
        typer.echo(report.markdown())

    @bench_app.command("webhooks")
    @command
    async def webhooks(
        requests: int = typer.Option(500, "--requests", min=1, help="Requests per row."),
        concurrency: int = typer.Option(32, "--concurrency", min=1, help="Requests in flight at once."),
        payload: Path | None = typer.Option(
            None, "--payload", help="An issues.opened payload to send (default: the real fixture)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a markdown table."),
    ) -> None:
        """Webhook edge vs a bare start_workflow loop (the ceiling), and rejected deliveries: requests/s, p50/p99."""
        from shopfloor.bench.webhooks import bench_webhooks

        load_settings()  # logging as configured; the bench starts its own Temporal and webhook server
        report = await bench_webhooks(requests=requests, concurrency=concurrency, payload_path=payload)
        if as_json:
            typer.echo(report.model_dump_json(indent=2))
            return
        typer.echo(f"webhook edge, {requests} requests a row at concurrency {concurrency}, on {report.machine}\n")
        typer.echo(report.markdown())
