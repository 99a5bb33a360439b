"""What every command shares: settings, logging, and turning errors into one clear line."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from shopfloor.errors import ShopfloorError, TemporalUnreachable, UsageError
from shopfloor.logs import configure_logging
from shopfloor.models.model_spec import ModelSpec
from shopfloor.settings import Settings

P = ParamSpec("P")
T = TypeVar("T")

EXIT_USAGE = 2
EXIT_FAILURE = 1


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"shopfloor: {message}", err=True)
    raise typer.Exit(code)


# The agent-run commands (controls, transcript) speak an AgentWorkflow's signals, updates and
# history. Temporal accepts a signal no handler waits for, so sent to another kind of workflow
# it would be dropped while the command said it was done.
AGENT_WORKFLOW = "AgentWorkflow"


async def agent_run_handle(client: Client, workflow_id: str, name: str) -> WorkflowHandle[Any, Any]:
    """The handle of agent run `workflow_id`, or one clear line and exit 1 when there is no such
    workflow or it is not an agent run (`name`: the command, for the message)."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        fail(f"no workflow {workflow_id!r}: {exc.message}", EXIT_FAILURE)
    if described.workflow_type != AGENT_WORKFLOW:
        fail(
            f"{name.replace('_', '-')} acts on an agent run, and {workflow_id!r} is not one "
            f"(its workflow type is {described.workflow_type}): "
            f"name one of its agent runs (their ids go on from it, such as {workflow_id}/fix-1; "
            f"`shopfloor status {workflow_id}` shows where it stands)",
            EXIT_FAILURE,
        )
    return handle


def load_settings() -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SHOPFLOOR_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        fail(f"bad setting: {problems}")
    configure_logging(level=settings.log_level, json=settings.log_json, secrets=settings.secret_values())
    return settings


def command(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """Run an async command; map shopfloor's errors to one line and an exit status."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return asyncio.run(fn(*args, **kwargs))
        except UsageError as exc:
            fail(str(exc), EXIT_USAGE)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_FAILURE)
        except ShopfloorError as exc:
            fail(str(exc), EXIT_FAILURE)
        except KeyboardInterrupt:
            print(file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper


def usable_model(settings: Settings, model: str) -> ModelSpec:
    """`provider:model` parsed, with the credentials its provider needs present; else UsageError."""
    from shopfloor.activities.providers.registry import check_credentials

    try:
        spec = ModelSpec.parse(model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    problem = check_credentials(
        spec,
        openai_api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
        openai_base_url=settings.openai_base_url,
        anthropic_api_key=settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None,
        anthropic_base_url=settings.anthropic_base_url,
    )
    if problem:
        raise UsageError(problem)
    return spec
