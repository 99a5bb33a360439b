"""`shopfloor status ID`: where a run stands — an agent run, or an issue's or a pull request's
run with the tool calls its agent runs wait on an operator for."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from shopfloor.agents.call_waits import status_lines
from shopfloor.agents.progress import ProgressView
from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings
from shopfloor.models.agent_run import AgentStatus, PendingApproval
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.models.inbox import ISSUE_WORKFLOW, PULL_REQUEST_WORKFLOW
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def status(
        workflow_id: str = typer.Argument(..., metavar="ID", help="Workflow id."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Print a run's status: stage, step, state, and the final answer when done."""
        settings = load_settings()
        client = await connect(settings)
        handle = client.get_workflow_handle(workflow_id)
        try:
            desc = await handle.describe()
        except RPCError as exc:
            fail(f"no workflow {workflow_id!r} in namespace {settings.temporal_namespace}: {exc.message}", EXIT_FAILURE)
        temporal_state = desc.status.name if desc.status else "UNKNOWN"
        if desc.workflow_type in (ISSUE_WORKFLOW, PULL_REQUEST_WORKFLOW):
            await _print_factory_status(handle, workflow_id, temporal_state, settings, as_json)
            return
        try:
            st = await handle.query(AgentWorkflow.status)
        except Exception as exc:  # a closed run with no worker to replay it, or another type
            st = None
            query_error = str(exc).splitlines()[0]
        if as_json:
            data = {
                "workflow_id": workflow_id,
                "temporal_status": temporal_state,
                "url": settings.workflow_url(workflow_id),
            }
            if st is not None:
                data |= st.model_dump(mode="json")
            typer.echo(json.dumps(data, indent=2))
            return
        typer.echo(f"workflow  {workflow_id}")
        typer.echo(f"temporal  {temporal_state}")
        if st is None:
            typer.echo(f"status    unavailable ({query_error})")
        else:
            _print_status(st)
            for line in status_lines([_as_wait(workflow_id, st.agent, p) for p in st.pending]):
                typer.echo(line)
        typer.echo(f"ui        {settings.workflow_url(workflow_id)}")


async def _print_factory_status(
    handle: WorkflowHandle[Any, Any], workflow_id: str, temporal_state: str, settings: Settings, as_json: bool
) -> None:
    """An issue's or a pull request's run: where its pipeline stands, and the tool calls its agent
    runs wait on an operator for."""
    view: ProgressView | None = None
    waits: list[CallWait] = []
    query_error = ""
    try:
        view = await handle.query("progress", result_type=ProgressView)
        waits = await handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])
    except Exception as exc:  # a closed run with no worker to replay it
        query_error = str(exc).splitlines()[0]
    if as_json:
        data: dict[str, Any] = {
            "workflow_id": workflow_id,
            "temporal_status": temporal_state,
            "url": settings.workflow_url(workflow_id),
            "waiting_calls": [w.model_dump(mode="json") for w in waits],
        }
        if view is not None:
            data["progress"] = view.model_dump(mode="json")
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(f"workflow  {workflow_id}")
    typer.echo(f"temporal  {temporal_state}")
    if query_error:
        typer.echo(f"status    unavailable ({query_error})")
    elif view is None:
        typer.echo("state     received (no work started yet)")
    else:
        typer.echo(f"state     {view.state}" + (f" · waiting for {view.waiting_for}" if view.waiting_for else ""))
        typer.echo(f"stage     {view.stage} · step {view.step} · ${view.cost_usd:.2f}")
        if view.reason:
            typer.echo(f"reason    {view.reason}")
    for line in status_lines(waits):
        typer.echo(line)
    typer.echo(f"ui        {settings.workflow_url(workflow_id)}")


def _as_wait(workflow_id: str, agent: str, p: PendingApproval) -> CallWait:
    since = p.since or datetime.now(UTC)
    return CallWait(
        workflow_id=workflow_id,
        agent=agent,
        call_id=p.call_id,
        step=p.step,
        summary=p.summary[:300],
        reason=p.reason[:300],
        since=since,
        until=p.until or since,
    )


def _print_status(st: AgentStatus) -> None:
    typer.echo(f"state     {st.state}")
    typer.echo(f"agent     {st.agent} · {st.model}")
    typer.echo(f"repo      {st.repo}")
    typer.echo(f"stage     {st.stage} · step {st.step}/{st.max_steps}")
    typer.echo(f"tokens    in {st.usage.input_tokens} / out {st.usage.output_tokens}")
    if st.reason:
        typer.echo(f"reason    {st.reason}")
    if st.events:
        typer.echo(f"last      {st.events[-1].summary}")
    if st.final_answer:
        typer.echo("answer")
        for line in st.final_answer.splitlines():
            typer.echo(f"  {line}")
