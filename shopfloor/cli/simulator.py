"""`shopfloor simulator`: the GitHub simulator alone; `embedded_simulator` is how `shopfloor dev` runs it."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass

import typer
from pydantic import SecretStr

from shopfloor.cli.common import command, load_settings
from shopfloor.cli.signals import run_until, stop_on_signals
from shopfloor.devserver import ensure_port_free
from shopfloor.http_server import serve_as_job
from shopfloor.settings import Settings
from shopfloor.simulator.app import create_app
from shopfloor.simulator.config import SIMULATOR_BOT_TOKEN, SimulatorConfig


@dataclass(frozen=True)
class EmbeddedSimulator:
    config: SimulatorConfig
    settings: Settings  # the caller's settings, pointed at the simulator

    @property
    def api_url(self) -> str:
        return f"{self.config.base_url}/api/v3"

    def describe(self) -> list[str]:
        target = self.config.default_hook_url or "none (add hooks with POST /repos/{owner}/{repo}/hooks)"
        signed = "signed with SHOPFLOOR_WEBHOOK_SECRET" if self.config.default_hook_secret else "unsigned"
        return [
            f"  GitHub API  {self.api_url} (simulator; act as a human with `Authorization: token user:<login>`)",
            f"  git         {self.config.base_url}/{{owner}}/{{repo}}.git",
            f"  webhooks -> {target} ({signed})" if self.config.default_hook_url else f"  webhooks -> {target}",
        ]


def simulator_for(
    settings: Settings,
    *,
    webhook_url: str | None,
    invent_secret: bool,
    port_setting: str = "--simulator-port or SHOPFLOOR_SIMULATOR_PORT",
) -> EmbeddedSimulator:
    """The simulator's configuration, and settings that send shopfloor's GitHub calls to it.

    With `invent_secret` (`shopfloor dev`, which runs both ends) a missing webhook secret is made up
    for this run, so deliveries are signed and verified end to end. Alone, the simulator signs with
    SHOPFLOOR_WEBHOOK_SECRET or, like GitHub for a hook without a secret, not at all.
    """
    ensure_port_free(settings.simulator_host, settings.simulator_port, "GitHub simulator", port_setting)
    secret = settings.webhook_secret
    if secret is None and invent_secret:
        secret = SecretStr(secrets.token_hex(16))
    host = "127.0.0.1" if settings.simulator_host in ("0.0.0.0", "::") else settings.simulator_host
    config = SimulatorConfig(
        base_url=f"http://{host}:{settings.simulator_port}",
        data_dir=settings.data_dir / "simulator",
        default_hook_url=webhook_url,
        default_hook_secret=secret if webhook_url and secret else None,
    )
    pointed = settings.model_copy(
        update={
            "github_api_url": f"{config.base_url}/api/v3",
            "github_token": SecretStr(SIMULATOR_BOT_TOKEN),
            "webhook_secret": secret,
        }
    )
    return EmbeddedSimulator(config=config, settings=pointed)


async def serve_simulator(sim: EmbeddedSimulator, stop: asyncio.Event) -> None:
    sim.config.data_dir.mkdir(parents=True, exist_ok=True)
    await serve_as_job(create_app(sim.config), sim.settings.simulator_host, sim.settings.simulator_port, stop)


def github_or_simulator(settings: Settings) -> Settings:
    """Settings for a command that talks to GitHub: the configured GitHub, or else the simulator
    that `shopfloor dev` (or `shopfloor simulator`) runs with these settings."""
    if settings.github_configured:
        return settings
    host = "127.0.0.1" if settings.simulator_host in ("0.0.0.0", "::") else settings.simulator_host
    return settings.model_copy(
        update={
            "github_api_url": f"http://{host}:{settings.simulator_port}/api/v3",
            "github_token": SecretStr(SIMULATOR_BOT_TOKEN),
        }
    )


def webhook_target(settings: Settings) -> str:
    host = "127.0.0.1" if settings.webhook_host in ("0.0.0.0", "::") else settings.webhook_host
    return f"http://{host}:{settings.webhook_port}/webhooks/github"


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def simulator(
        webhook_url: str = typer.Option(
            None, help="Where repositories' default hook delivers (default: shopfloor's webhook server)."
        ),
        no_webhooks: bool = typer.Option(False, "--no-webhooks", help="Create repositories without a default hook."),
        host: str | None = typer.Option(
            None, "--host", help="Address it listens on (default: SHOPFLOOR_SIMULATOR_HOST, else 127.0.0.1)."
        ),
        port: int | None = typer.Option(
            None, "--port", min=1, max=65535, help="Its port (default: SHOPFLOOR_SIMULATOR_PORT, else 8100)."
        ),
    ) -> None:
        """Run the GitHub simulator alone: GitHub's REST API, git over HTTP, signed webhooks, simulated CI."""
        settings = load_settings(simulator_host=host, simulator_port=port)
        target = None if no_webhooks else (webhook_url or webhook_target(settings))
        sim = simulator_for(
            settings, webhook_url=target, invent_secret=False, port_setting="--port or SHOPFLOOR_SIMULATOR_PORT"
        )
        stop = stop_on_signals()
        lines = ["GitHub simulator is running (Ctrl-C stops it)", *sim.describe()]
        if target and settings.webhook_secret is None:
            lines.append("  note        SHOPFLOOR_WEBHOOK_SECRET is not set, so deliveries go out unsigned")
        lines.append(f"  data        {sim.config.data_dir}")
        typer.echo("\n".join(lines))
        await run_until(stop, asyncio.create_task(serve_simulator(sim, stop)))
        typer.echo("GitHub simulator stopped")
