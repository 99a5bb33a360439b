"""What every command shares: settings, logging, and turning errors into one clear line."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor import event_loop
from shopfloor.errors import ShopfloorError, TemporalUnreachable, UsageError
from shopfloor.logs import configure_logging
from shopfloor.models.inbox import ALERT_WORKFLOW, ISSUE_WORKFLOW, PULL_REQUEST_WORKFLOW
from shopfloor.models.model_spec import ModelSpec
from shopfloor.settings import Settings

P = ParamSpec("P")
T = TypeVar("T")

EXIT_USAGE = 2
EXIT_FAILURE = 1


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"shopfloor: {message}", err=True)
    raise typer.Exit(code)


# The control commands (controls, transcript, status) act on any shopfloor run: an agent run, or
# an issue's, a pull request's or an alert's run, which takes them for its pipeline and its
# running agent (workflows/pipeline_controls.py). Temporal accepts a signal no handler waits for,
# so the kind is checked before anything is sent: a command that does not apply says why.
AGENT_WORKFLOW = "AgentWorkflow"
RunKind = Literal["agent", "issue", "pull_request", "alert"]
RUN_KINDS: dict[str, RunKind] = {
    AGENT_WORKFLOW: "agent",
    ISSUE_WORKFLOW: "issue",
    PULL_REQUEST_WORKFLOW: "pull_request",
    ALERT_WORKFLOW: "alert",
}


@dataclass
class Run:
    """A shopfloor run an operator names: its handle, its kind and whether it still runs."""

    workflow_id: str
    kind: RunKind
    handle: WorkflowHandle[Any, Any]
    status: str  # Temporal's: RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, TIMED_OUT, ...

    @property
    def running(self) -> bool:
        return self.status == "RUNNING"

    @property
    def what(self) -> str:
        return {
            "agent": "agent run",
            "issue": "issue's run",
            "pull_request": "pull request's run",
            "alert": "alert run",
        }[self.kind]


async def resolve_run(client: Client, workflow_id: str, name: str) -> Run:
    """The run `workflow_id` names, or one clear line and exit 1 when there is none or it is not a
    shopfloor run (`name`: the command, for the message)."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            fail(f"no workflow {workflow_id!r}: no shopfloor run has this id", EXIT_FAILURE)
        fail(f"no workflow {workflow_id!r}: Temporal could not describe it ({exc.message})", EXIT_FAILURE)
    kind = RUN_KINDS.get(described.workflow_type)
    if kind is None:
        fail(
            f"{name.replace('_', '-')} acts on a shopfloor run (an agent run, or an issue's, a pull request's "
            f"or an alert's run), and {workflow_id!r} is a {described.workflow_type}",
            EXIT_FAILURE,
        )
    status = described.status.name if described.status else "UNKNOWN"
    return Run(workflow_id=workflow_id, kind=kind, handle=handle, status=status)


def ended(run: Run, name: str) -> NoReturn:
    """One line: `name` does not apply to a run that has ended."""
    fail(
        f"{name.replace('_', '-')} does not apply: the {run.what} {run.workflow_id} has ended "
        f"({run.status.lower().replace('_', ' ')}); `shopfloor status {run.workflow_id}` shows how",
        EXIT_FAILURE,
    )


async def agent_run_handle(client: Client, workflow_id: str, name: str) -> WorkflowHandle[Any, Any]:
    """The handle of agent run `workflow_id`, or one clear line and exit 1 when there is no such
    workflow or it is not an agent run (`name`: the command, for the message). For the commands
    that only an agent run takes (`shopfloor agent continue`, `fork`)."""
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


def sdk_reason(exc: BaseException) -> str:
    """The reason in an update's or a query's failure, without the SDK's wording around it."""
    cause = exc.cause if isinstance(exc, WorkflowUpdateFailedError) else exc
    while isinstance(cause, FailureError) and cause.cause is not None and not str(cause):
        cause = cause.cause
    text = (cause.message if isinstance(cause, ApplicationError | RPCError) else str(cause)) or type(cause).__name__
    return text.splitlines()[0][:500] if text else "no reason given"


def load_settings(**given: Any) -> Settings:
    """The settings from the environment, with what the command line `given` (None: not given) on top."""
    try:
        settings = Settings(**{name: value for name, value in given.items() if value is not None})
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
            return event_loop.run(fn(*args, **kwargs))
        except UsageError as exc:
            fail(str(exc), EXIT_USAGE)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_FAILURE)
        except ShopfloorError as exc:
            fail(str(exc), EXIT_FAILURE)
        except RPCError as exc:  # one the command did not expect: Temporal's own sentence, no traceback
            fail(f"Temporal refused a request: {exc.message}", EXIT_FAILURE)
        except KeyboardInterrupt:
            print(file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper


def usable_model(settings: Settings, model: str, *, called_here: bool) -> ModelSpec:
    """`provider:model` parsed and checked; UsageError when it cannot work.

    `called_here`: this process runs the worker that calls the model (`shopfloor demo`), so a
    missing key is refused at once, naming this terminal. Otherwise a worker elsewhere calls it,
    with its own environment: a key missing here is only a note on stderr saying where it must be.
    """
    from shopfloor.activities.providers.registry import check_credentials, missing_key

    try:
        spec = ModelSpec.parse(model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    keys = {
        "openai_api_key": settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
        "openai_base_url": settings.openai_base_url,
        "anthropic_api_key": settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None,
    }
    absent = missing_key(spec, **keys)
    if absent is not None and not called_here:
        typer.echo(
            f"note: {absent} is not set in this terminal. The worker calls {spec}, so the key must be set where "
            "`shopfloor dev` or `shopfloor worker` runs; if it is not, the run fails on its first model call.",
            err=True,
        )
        return spec
    where = "this terminal (this command runs the worker that calls the model)"
    problem = check_credentials(spec, **keys, anthropic_base_url=settings.anthropic_base_url, where=where)
    if problem:
        raise UsageError(problem)
    return spec
