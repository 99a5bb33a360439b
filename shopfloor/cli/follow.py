"""Following an agent run as it works: its step events printed as they happen, until it ends
(`shopfloor agent` follows the run it started)."""

from __future__ import annotations

import asyncio
from typing import Any

import typer
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from shopfloor.models.agent_run import AgentResult, StepEvent
from shopfloor.workflows.agent import AgentWorkflow

POLL_S = 0.5


def _print_event(event: StepEvent) -> None:
    mark = "·" if event.kind == "model" else ("✓" if event.ok else "✗")
    typer.echo(f"  {mark} step {event.step:>3}  {event.summary}")
    if event.kind == "tool" and not event.ok and event.preview:
        typer.echo(f"              {event.preview[:140]}")


async def _print_new_events(handle: WorkflowHandle[Any, Any], seen: int) -> int:
    """Print the run's events after `seen`; return the last one printed."""
    try:
        status = await handle.query(AgentWorkflow.status)
    except RPCError:
        return seen  # no worker has picked the run up yet
    for event in status.events:
        if event.seq > seen:
            _print_event(event)
            seen = event.seq
    return seen


async def follow_run(client: Client, workflow_id: str) -> AgentResult:
    handle = client.get_workflow_handle_for(AgentWorkflow.run, workflow_id)
    result_task = asyncio.create_task(handle.result())
    seen = 0
    while True:
        seen = await _print_new_events(handle, seen)
        done, _ = await asyncio.wait({result_task}, timeout=POLL_S)
        if done:
            await _print_new_events(handle, seen)
            return result_task.result()


def register(app: typer.Typer) -> None:
    """`shopfloor follow ID` lives here (none yet: `shopfloor agent` follows the run it starts)."""
