"""Operator controls on a running agent: approve, reject, pause, resume, cancel, steer, raise-limits."""

from __future__ import annotations

from typing import Any

import typer
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from shopfloor.cli.common import EXIT_FAILURE, agent_run_handle, command, fail, load_settings
from shopfloor.models.agent_run import ApprovalDecision, LimitsRaise
from shopfloor.temporal import connect


async def _handle(workflow_id: str, name: str) -> tuple[Client, WorkflowHandle[Any, Any]]:
    client = await connect(load_settings())
    return client, await agent_run_handle(client, workflow_id, name)


async def _update(workflow_id: str, name: str, arg: Any, result_type: type | None = None) -> Any:
    _, handle = await _handle(workflow_id, name)
    try:
        return await handle.execute_update(name, arg, result_type=result_type)
    except WorkflowUpdateFailedError as exc:
        fail(f"{name} refused: {exc.cause}", EXIT_FAILURE)
    except RPCError as exc:
        fail(f"{name} failed: {exc.message}", EXIT_FAILURE)


async def _signal(workflow_id: str, name: str, *args: Any) -> None:
    _, handle = await _handle(workflow_id, name)
    try:
        await handle.signal(name, *args) if args else await handle.signal(name)
    except RPCError as exc:
        fail(f"{name} failed: {exc.message}", EXIT_FAILURE)


WORKFLOW_ID = typer.Argument(..., metavar="ID", help="The agent run's workflow id.")
CALL_ID = typer.Option(None, "--call", help="Call id (default: the only pending one).")


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def approve(
        workflow_id: str = WORKFLOW_ID,
        call: str | None = CALL_ID,
        note: str = typer.Option("", "--note", help="A note for the record."),
    ) -> None:
        """Approve a tool call the run is waiting on."""
        call_id = await _update(workflow_id, "approve", ApprovalDecision(call_id=call, note=note), str)
        typer.echo(f"approved {call_id}")

    @app.command()
    @command
    async def reject(
        workflow_id: str = WORKFLOW_ID,
        call: str | None = CALL_ID,
        reason: str = typer.Option("", "--reason", help="Why: the model reads it."),
    ) -> None:
        """Reject a tool call the run is waiting on; the model is told it was not run."""
        call_id = await _update(workflow_id, "reject", ApprovalDecision(call_id=call, note=reason), str)
        typer.echo(f"rejected {call_id}")

    @app.command()
    @command
    async def pause(workflow_id: str = WORKFLOW_ID) -> None:
        """Pause before the next model step."""
        await _signal(workflow_id, "pause")
        typer.echo("pause requested")

    @app.command()
    @command
    async def resume(workflow_id: str = WORKFLOW_ID) -> None:
        """Resume a paused run."""
        await _signal(workflow_id, "resume")
        typer.echo("resume requested")

    @app.command()
    @command
    async def cancel(
        workflow_id: str = WORKFLOW_ID, reason: str = typer.Option("", "--reason", help="Why, for the record.")
    ) -> None:
        """End the run at the next step boundary, keeping its last checkpoint."""
        await _signal(workflow_id, "cancel", reason)
        typer.echo("cancel requested")

    @app.command()
    @command
    async def steer(
        workflow_id: str = WORKFLOW_ID, text: str = typer.Argument(..., help="Message for the model.")
    ) -> None:
        """Give the model a message before its next step."""
        if not text.strip():
            fail("the message is empty")
        await _signal(workflow_id, "steer", text)
        typer.echo("message queued for the next step")

    @app.command("raise-limits")
    @command
    async def raise_limits(
        workflow_id: str = WORKFLOW_ID,
        steps: int | None = typer.Option(None, "--steps", min=1),
        tokens: int | None = typer.Option(None, "--tokens", min=1),
        cost: float | None = typer.Option(None, "--cost", min=0.0001, help="USD"),
        wall_s: float | None = typer.Option(None, "--wall-s", min=1),
    ) -> None:
        """Raise a running agent's limits."""
        if steps is None and tokens is None and cost is None and wall_s is None:
            fail("name a limit: --steps, --tokens, --cost or --wall-s")
        limits = await _update(
            workflow_id,
            "raise_limits",
            LimitsRaise(max_steps=steps, max_tokens=tokens, max_cost_usd=cost, max_wall_s=wall_s),
        )
        typer.echo(f"limits now: {limits}")
