"""Operator controls on any shopfloor run: approve, reject, pause, resume, cancel, steer, raise-limits.

An agent run takes them itself; an issue's or a pull request's run applies them to its pipeline
and forwards them to its running agent run (workflows/pipeline_controls.py). An alert run takes
none: it runs no pipeline of its own (the issue it filed has the run that does the work), and its
assessing agent is short and read-only. What does not apply says why in one line and exits 1;
no SDK wording reaches the user.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import ValidationError
from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from shopfloor.cli.common import (
    EXIT_FAILURE,
    Run,
    command,
    ended,
    fail,
    load_settings,
    resolve_run,
    sdk_reason,
)
from shopfloor.models.agent_run import ApprovalDecision, Limits, LimitsRaise, ModelSwitch
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.pipeline_status import STATUS_QUERY, PipelineStatus
from shopfloor.temporal import connect

NO_AGENT_FOR_STEER = "no agent is running; `/shopfloor fix <text>` starts a round"


async def _target(workflow_id: str, name: str) -> Run:
    """The run the command acts on, running, of a kind the command applies to."""
    run = await resolve_run(await connect(load_settings()), workflow_id, name)
    if run.kind == "alert":
        fail(
            f"{name.replace('_', '-')} does not apply to an alert run ({workflow_id}): it runs no pipeline of its "
            "own; the issue it filed has the run that does the work (`shopfloor status "
            f"{workflow_id}` names the issue), which takes {name.replace('_', '-')}",
            EXIT_FAILURE,
        )
    if not run.running:
        ended(run, name)
    return run


async def _update(run: Run, name: str, arg: Any, result_type: type | None = None) -> Any:
    try:
        return await run.handle.execute_update(name, arg, result_type=result_type)
    except WorkflowUpdateFailedError as exc:
        fail(f"{name.replace('_', '-')} refused: {sdk_reason(exc)}", EXIT_FAILURE)
    except RPCError as exc:
        fail(f"{name.replace('_', '-')} failed: {sdk_reason(exc)}", EXIT_FAILURE)


async def _signal(run: Run, name: str, *args: Any) -> None:
    try:
        await run.handle.signal(name, args=list(args))
    except RPCError as exc:
        fail(f"{name} failed: {sdk_reason(exc)}", EXIT_FAILURE)


async def pipeline_status(run: Run) -> PipelineStatus | None:
    """An issue's, a pull request's or an alert's `status` (None: no worker could answer it)."""
    try:
        return await run.handle.query(STATUS_QUERY, result_type=PipelineStatus)
    except (WorkflowQueryFailedError, RPCError, ValidationError):
        return None


def _on(run: Run, agent: str | None) -> str:
    """Where a forwarded command went, for the confirmation line."""
    return f" (its running agent {agent})" if run.kind != "agent" and agent else ""


WORKFLOW_ID = typer.Argument(
    ..., metavar="ID", help="An agent run's id, or an issue's or a pull request's run (issue/…, pr/…)."
)
CALL_ID = typer.Option(None, "--call", help="Call id (default: the only pending one).")


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def approve(
        workflow_id: str = WORKFLOW_ID,
        call: str | None = CALL_ID,
        note: str = typer.Option("", "--note", help="A note for the record."),
    ) -> None:
        """Approve a tool call the run (or its agent run) is waiting on."""
        run = await _target(workflow_id, "approve")
        call_id = await _update(run, "approve", ApprovalDecision(call_id=call, note=note), str)
        typer.echo(f"approved {call_id}")

    @app.command()
    @command
    async def reject(
        workflow_id: str = WORKFLOW_ID,
        call: str | None = CALL_ID,
        reason: str = typer.Option("", "--reason", help="Why: the model reads it."),
    ) -> None:
        """Reject a tool call the run (or its agent run) is waiting on; the model is told it was not run."""
        run = await _target(workflow_id, "reject")
        call_id = await _update(run, "reject", ApprovalDecision(call_id=call, note=reason), str)
        typer.echo(f"rejected {call_id}")

    @app.command()
    @command
    async def pause(workflow_id: str = WORKFLOW_ID) -> None:
        """Pause before the next step (an issue's or a PR's run: the pipeline and its running agent)."""
        run = await _target(workflow_id, "pause")
        await _signal(run, "pause")
        typer.echo("pause requested")

    @app.command()
    @command
    async def resume(workflow_id: str = WORKFLOW_ID) -> None:
        """Resume a paused run."""
        run = await _target(workflow_id, "resume")
        await _signal(run, "resume")
        typer.echo("resume requested")

    @app.command()
    @command
    async def cancel(
        workflow_id: str = WORKFLOW_ID, reason: str = typer.Option("", "--reason", help="Why, for the record.")
    ) -> None:
        """End the run at the next step boundary, keeping its last checkpoint (an issue's or a PR's
        run: the pipeline ends, as `/shopfloor stop` ends it, and its running agent first)."""
        run = await _target(workflow_id, "cancel")
        await _signal(run, "cancel", reason)
        typer.echo("cancel requested")

    @app.command()
    @command
    async def steer(
        workflow_id: str = WORKFLOW_ID,
        text: str = typer.Argument("", help="Message for the model."),
        model: str | None = typer.Option(None, "--model", help="Switch the model from the next step on (P:M)."),
    ) -> None:
        """Give the (running) agent a message before its next step, or switch its model."""
        if not text.strip() and model is None:
            fail("the message is empty (give a message, or --model provider:model)")
        if model is not None:
            try:
                ModelSpec.parse(model)
            except ValueError as exc:
                fail(str(exc))
        run = await _target(workflow_id, "steer")
        agent: str | None = None
        if run.kind != "agent":
            st = await pipeline_status(run)
            agent = st.running_agent if st is not None else None
            if agent is None:
                fail(NO_AGENT_FOR_STEER, EXIT_FAILURE)
        if model is not None:
            now = await _update(run, "switch_model", ModelSwitch(model=model, by="operator"), str)
            used = model if run.kind != "agent" else now
            typer.echo(f"model switched to {used} from the next step{_on(run, agent)}")
        if text.strip():
            await _signal(run, "steer", text)
            typer.echo(f"message queued for the next step{_on(run, agent)}")

    @app.command("raise-limits")
    @command
    async def raise_limits(
        workflow_id: str = WORKFLOW_ID,
        steps: int | None = typer.Option(None, "--steps", min=1),
        tokens: int | None = typer.Option(None, "--tokens", min=1),
        cost: float | None = typer.Option(None, "--cost", min=0.0001, help="USD"),
        wall_s: float | None = typer.Option(None, "--wall-s", min=1),
    ) -> None:
        """Raise a running agent's limits (an issue's or a PR's run: its running agent's)."""
        if steps is None and tokens is None and cost is None and wall_s is None:
            fail("name a limit: --steps, --tokens, --cost or --wall-s")
        change = LimitsRaise(max_steps=steps, max_tokens=tokens, max_cost_usd=cost, max_wall_s=wall_s)
        run = await _target(workflow_id, "raise_limits")
        if run.kind == "agent":
            limits = await _update(run, "raise_limits", change, Limits)
            now = ", ".join(f"{k}={v}" for k, v in limits.model_dump().items() if v is not None)
            typer.echo(f"limits now: {now}")
        else:
            agent = await _update(run, "raise_limits", change, str)
            raised = ", ".join(f"{k}={v}" for k, v in change.model_dump().items() if v is not None)
            typer.echo(f"limits raised ({raised}) on its running agent {agent}")
