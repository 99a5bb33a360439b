"""`shopfloor dev` (embedded stack), `shopfloor worker`, `shopfloor webhooks`, `shopfloor setup`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import structlog
import typer
from temporalio.client import Client

from shopfloor.blobs import open_blob_store
from shopfloor.cli.common import command, load_settings
from shopfloor.cli.signals import run_until, stop_on_signals
from shopfloor.cli.simulator import EmbeddedSimulator, serve_simulator, simulator_for, webhook_target
from shopfloor.devserver import DevServer, ensure_port_free
from shopfloor.http_server import serve_as_job
from shopfloor.models.factory_config import NO_MODEL_TRIAGE
from shopfloor.reconcile_schedule import ensure_reconcile_schedule
from shopfloor.settings import DEFAULT_MODEL, Settings
from shopfloor.temporal import connect, ensure_search_attributes
from shopfloor.webhooks.app import create_app
from shopfloor.worker import run_worker

log = structlog.get_logger(__name__)


HOST_HELP = "Address the webhook server listens on (default: SHOPFLOOR_WEBHOOK_HOST, else 127.0.0.1)."
PORT_HELP = "Port of the webhook server (default: SHOPFLOOR_WEBHOOK_PORT, else 8000)."
WEBHOOK_PORT_SETTING = "--port or SHOPFLOOR_WEBHOOK_PORT"


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def dev(
        host: str | None = typer.Option(None, "--host", help=HOST_HELP),
        port: int | None = typer.Option(None, "--port", min=1, max=65535, help=PORT_HELP),
        simulator_port: int | None = typer.Option(
            None,
            "--simulator-port",
            min=1,
            max=65535,
            help="Port of the GitHub simulator, when it runs (default: SHOPFLOOR_SIMULATOR_PORT, else 8100).",
        ),
    ) -> None:
        """Run the whole factory on this machine: Temporal dev server with UI, worker, webhook server, and
        the GitHub simulator when no GitHub credentials are configured."""
        settings = with_no_model_triage(
            load_settings(webhook_host=host, webhook_port=port, simulator_port=simulator_port)
        )
        async with running_stack(settings) as stack:
            _banner(stack.settings, embedded=stack.embedded, sim=stack.sim)
            await run_until(stack.stop, *stack.jobs)
        typer.echo("shopfloor dev stopped")

    @app.command()
    @command
    async def worker() -> None:
        """Run a worker alone, against SHOPFLOOR_TEMPORAL_ADDRESS (default: the `shopfloor dev` server)."""
        settings = load_settings()
        client = await connect(settings)
        stop = stop_on_signals()
        typer.echo(f"worker on {settings.effective_temporal_address}, task queue {settings.task_queue}")
        await run_until(stop, asyncio.create_task(run_worker(client, settings)))

    @app.command()
    @command
    async def webhooks(
        host: str | None = typer.Option(None, "--host", help=HOST_HELP),
        port: int | None = typer.Option(None, "--port", min=1, max=65535, help=PORT_HELP),
    ) -> None:
        """Run the webhook server alone."""
        settings = load_settings(webhook_host=host, webhook_port=port)
        ensure_port_free(settings.webhook_host, settings.webhook_port, "webhook server", WEBHOOK_PORT_SETTING)
        client = await connect(settings)
        stop = stop_on_signals()
        await run_until(stop, asyncio.create_task(_serve_webhooks(client, settings, stop)))

    @app.command()
    @command
    async def setup() -> None:
        """Register shopfloor's search attributes and the reconcile schedule on a Temporal cluster (idempotent)."""
        settings = load_settings()
        client = await connect(settings)
        added = await ensure_search_attributes(client, settings.temporal_namespace)
        typer.echo(f"added: {', '.join(added)}" if added else "search attributes already registered")
        outcome = await ensure_reconcile_schedule(client, settings)  # without SHOPFLOOR_REPOS: logged only
        if outcome != "not configured":
            every = settings.reconcile_every_minutes
            typer.echo(f"reconcile schedule {outcome}: every {every} min, {len(settings.repos)} repositories")


@dataclass
class Stack:
    """The whole factory running in this process (`running_stack`)."""

    settings: Settings  # pointed at the simulator when it runs
    client: Client
    sim: EmbeddedSimulator | None
    embedded: bool  # True: our own Temporal dev server
    stop: asyncio.Event  # set on SIGINT/SIGTERM, and to stop everything
    jobs: list[asyncio.Task[None]]  # worker, webhook server, simulator


@asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[Stack]:
    """Start what `shopfloor dev` runs: the embedded Temporal dev server (unless
    `settings.temporal_address` names one), search attributes and reconcile schedule, a worker,
    the webhook server, and the GitHub simulator when no GitHub credentials are configured.

    Inside the block the jobs run; leaving it (or a signal, which sets `stack.stop`) stops them
    all and then the dev server. Also used by `shopfloor demo`."""
    ensure_port_free(settings.webhook_host, settings.webhook_port, "webhook server", WEBHOOK_PORT_SETTING)
    # No GitHub credentials: run against the simulator, wired to our own webhook server.
    sim = None
    if not settings.github_configured:
        sim = simulator_for(settings, webhook_url=webhook_target(settings), invent_secret=True)
        settings = sim.settings
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
    jobs: list[asyncio.Task[None]] = []
    try:
        stop = stop_on_signals()
        if server is not None:
            await server.wait_ready()
        client = await connect(settings)
        await ensure_search_attributes(client, settings.temporal_namespace)
        await ensure_reconcile_schedule(client, settings)  # redeliver what the edge missed
        jobs = [
            # One machine, one Ctrl-C: stop at once (running activities are retried on the next start).
            asyncio.create_task(run_worker(client, settings, graceful=False)),
            asyncio.create_task(_serve_webhooks(client, settings, stop)),
        ]
        if sim is not None:
            jobs.append(asyncio.create_task(serve_simulator(sim, stop)))
        try:
            yield Stack(settings=settings, client=client, sim=sim, embedded=server is not None, stop=stop, jobs=jobs)
        finally:
            stop.set()
            running = [job for job in jobs if not job.done()]  # the others ended, seen by the caller
            for job in running:
                job.cancel()
            for job in running:
                with suppress(asyncio.CancelledError):
                    await job
    finally:
        if server is not None:
            server.stop()


async def _serve_webhooks(client: Client, settings: Settings, stop: asyncio.Event) -> None:
    async def get_client() -> Client:
        return client

    blobs = open_blob_store(url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url)
    app = create_app(get_client, settings, blobs)
    await serve_as_job(app, settings.webhook_host, settings.webhook_port, stop)


def _banner(settings: Settings, *, embedded: bool, sim: EmbeddedSimulator | None) -> None:
    where = "embedded dev server" if embedded else "external server"
    lines = [
        "shopfloor dev is running (Ctrl-C stops everything)",
        f"  Temporal    {settings.effective_temporal_address} ({where})",
        f"  Temporal UI {settings.ui_url}" if embedded else "",
        f"  webhooks    http://{settings.webhook_host}:{settings.webhook_port} (POST /webhooks/github, /webhooks/alerts/<source>; GET /healthz, /readyz, /metrics)",
        *(sim.describe() if sim else [f"  GitHub API  {settings.github_api_url}"]),
        f"  task queue  {settings.task_queue} · model {settings.model}",
        f"  data        {settings.data_dir}",
        "  try:        shopfloor agent explore --repo . --goal 'What does this project do?'",
        *model_warnings(settings),
    ]
    typer.echo("\n".join(line for line in lines if line))


def with_no_model_triage(settings: Settings) -> Settings:
    """With no real model configured, the factory's triage runs the built-in no-model script: it
    says so on the issue and the run parks for a person, instead of failing on the explore
    agent's script."""
    if settings.model != DEFAULT_MODEL or "triage" in settings.agent_models:
        return settings
    return settings.model_copy(update={"agent_models": {**settings.agent_models, "triage": NO_MODEL_TRIAGE}})


def model_warnings(settings: Settings) -> list[str]:
    """What a new user should know before opening an issue: the factory has no real model, or
    this process (which runs the worker) lacks a configured model's key."""
    from shopfloor.activities.providers.registry import missing_key
    from shopfloor.models.model_spec import ModelSpec

    if settings.model == DEFAULT_MODEL and all(m == NO_MODEL_TRIAGE for m in settings.agent_models.values()):
        return [
            "  note:       no real model is configured (SHOPFLOOR_MODEL): the agents run a scripted demo model, so "
            "an issue opened now is answered 'not triaged' and left for a person. Set SHOPFLOOR_MODEL=openai:<model> "
            "or anthropic:<model> (and its key) here and restart to have issues triaged and fixed."
        ]
    keys = {
        "openai_api_key": settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
        "openai_base_url": settings.openai_base_url,
        "anthropic_api_key": settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None,
    }
    warnings = []
    for model in dict.fromkeys([settings.model, *settings.agent_models.values()]):
        try:
            absent = missing_key(ModelSpec.parse(model), **keys)
        except ValueError:
            continue  # the worker refuses it with its own message
        if absent is not None:
            warnings.append(
                f"  warning:    {model} needs {absent}, which is not set here, where the worker runs: "
                "every agent run on it fails at its first model call"
            )
    return warnings
