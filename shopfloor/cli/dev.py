"""`shopfloor dev` (embedded stack), `shopfloor worker`, `shopfloor webhooks`, `shopfloor setup`."""

from __future__ import annotations

import asyncio
import signal
from contextlib import suppress

import structlog
import typer
from temporalio.client import Client

from shopfloor.cli.common import command, load_settings
from shopfloor.devserver import DevServer, ensure_port_free
from shopfloor.http_server import serve_until
from shopfloor.settings import Settings
from shopfloor.temporal import connect, ensure_search_attributes
from shopfloor.webhooks.app import create_app
from shopfloor.worker import run_worker

log = structlog.get_logger(__name__)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _run_until(stop: asyncio.Event, *jobs: asyncio.Task[None]) -> None:
    """Run jobs until a signal or until one of them ends (a crash stops the rest too)."""
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({waiter, *jobs}, return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    for job in jobs:
        job.cancel()
    for job in jobs:
        with suppress(asyncio.CancelledError):
            await job
    waiter.cancel()


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def dev() -> None:
        """Run the whole factory on this machine: Temporal dev server with UI, worker, webhook server."""
        settings = load_settings()
        ensure_port_free(settings.webhook_host, settings.webhook_port, "webhook server", "SHOPFLOOR_WEBHOOK_PORT")
        server: DevServer | None = None
        if settings.temporal_address is None:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            server = DevServer(
                port=settings.temporal_port,
                ip="127.0.0.1",
                ui_port=settings.temporal_ui_port,
                db_file=settings.data_dir / "temporal.sqlite",
                log_file=settings.data_dir / "temporal.log",
                namespace=settings.temporal_namespace,
            )
            server.start()
        try:
            stop = _stop_on_signals()
            if server is not None:
                await server.wait_ready()
            client = await connect(settings)
            await ensure_search_attributes(client, settings.temporal_namespace)
            _banner(settings, embedded=server is not None)
            await _run_until(
                stop,
                asyncio.create_task(run_worker(client, settings)),
                asyncio.create_task(_serve_webhooks(client, settings, stop)),
            )
        finally:
            if server is not None:
                server.stop()
        typer.echo("shopfloor dev stopped")

    @app.command()
    @command
    async def worker() -> None:
        """Run a worker alone, against SHOPFLOOR_TEMPORAL_ADDRESS (default: the `shopfloor dev` server)."""
        settings = load_settings()
        client = await connect(settings)
        stop = _stop_on_signals()
        typer.echo(f"worker on {settings.effective_temporal_address}, task queue {settings.task_queue}")
        await _run_until(stop, asyncio.create_task(run_worker(client, settings)))

    @app.command()
    @command
    async def webhooks() -> None:
        """Run the webhook server alone."""
        settings = load_settings()
        ensure_port_free(settings.webhook_host, settings.webhook_port, "webhook server", "SHOPFLOOR_WEBHOOK_PORT")
        client = await connect(settings)
        stop = _stop_on_signals()
        await _run_until(stop, asyncio.create_task(_serve_webhooks(client, settings, stop)))

    @app.command()
    @command
    async def setup() -> None:
        """Register shopfloor's search attributes on an existing Temporal cluster (idempotent)."""
        settings = load_settings()
        client = await connect(settings)
        added = await ensure_search_attributes(client, settings.temporal_namespace)
        typer.echo(f"added: {', '.join(added)}" if added else "search attributes already registered")


async def _serve_webhooks(client: Client, settings: Settings, stop: asyncio.Event) -> None:
    async def get_client() -> Client:
        return client

    serving = asyncio.ensure_future(
        serve_until(create_app(get_client), settings.webhook_host, settings.webhook_port, stop)
    )
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        # Let uvicorn finish its own shutdown (lifespan included) once `stop` is set: cancelling
        # it mid-way leaves its lifespan task pending and logs a CancelledError traceback on exit.
        stop.set()
        await serving
        raise


def _banner(settings: Settings, *, embedded: bool) -> None:
    where = "embedded dev server" if embedded else "external server"
    lines = [
        "shopfloor dev is running (Ctrl-C stops everything)",
        f"  Temporal    {settings.effective_temporal_address} ({where})",
        f"  Temporal UI {settings.ui_url}" if embedded else "",
        f"  webhooks    http://{settings.webhook_host}:{settings.webhook_port} (GET /healthz, /readyz)",
        f"  task queue  {settings.task_queue} · model {settings.model}",
        f"  data        {settings.data_dir}",
        "  try:        shopfloor agent explore --repo . --goal 'What does this project do?'",
    ]
    typer.echo("\n".join(line for line in lines if line))
