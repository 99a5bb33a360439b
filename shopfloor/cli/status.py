"""`shopfloor status ID`: where a run stands — an agent run, or an issue's, a pull request's or an
alert's run (its stage, what it waits for, its pull request, cost, agent runs, and the tool calls
they wait on an operator for)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer
from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from shopfloor.agents.call_waits import status_lines
from shopfloor.cli.common import Run, command, load_settings, resolve_run
from shopfloor.cli.control import pipeline_status
from shopfloor.cli.live import retry_lines
from shopfloor.models.agent_run import AgentStatus, PendingApproval
from shopfloor.models.call_waits import CallWait
from shopfloor.models.pipeline_status import PipelineStatus
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def status(
        workflow_id: str = typer.Argument(
            ..., metavar="ID", help="An agent run's id, or an issue's, a PR's or an alert's run."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Print a run's status: stage, step, state, cost, pending approvals, and the final answer when done."""
        settings = load_settings()
        client = await connect(settings)
        run = await resolve_run(client, workflow_id, "status")
        if run.kind != "agent":
            await _print_pipeline_status(client, run, settings, as_json)
            return
        retrying = await retry_lines(client, await run.handle.describe())  # a model call failing now
        st: AgentStatus | None = None
        try:
            st = await run.handle.query(AgentWorkflow.status)
        except (WorkflowQueryFailedError, RPCError, ValidationError):
            pass  # a closed run with no worker to replay it
        if as_json:
            typer.echo(json.dumps(_as_json(run, settings, st, retrying), indent=2))
            return
        typer.echo(f"workflow  {workflow_id}")
        typer.echo(f"temporal  {run.status}")
        if st is None:
            typer.echo(f"status    unavailable ({NO_ANSWER})")
        else:
            _print_status(st, workflow_id)
            for line in status_lines([_as_wait(workflow_id, st.agent, p) for p in st.pending]):
                typer.echo(line)
        for line in retrying:
            typer.echo(f"retrying  {line}")
        typer.echo(f"ui        {settings.workflow_url(workflow_id)}")


NO_ANSWER = "no worker answered: the run has ended and no worker replays it, or no worker serves its task queue"


async def _print_pipeline_status(client: Client, run: Run, settings: Settings, as_json: bool) -> None:
    """An issue's, a pull request's or an alert's run: where its pipeline stands, what it waits
    for, its pull request, cost and agent runs, the tool calls its agent runs wait on, and a model
    call of its running agent that is failing and being retried."""
    st = await pipeline_status(run)
    retrying: list[str] = []
    if st is not None and st.running_agent:
        try:
            retrying = await retry_lines(client, await client.get_workflow_handle(st.running_agent).describe())
        except RPCError:
            pass  # the agent run ended between the two looks
    if as_json:
        data = _as_json(run, settings, st, retrying)
        if st is not None:
            data["waiting_calls"] = data["pending"]  # the name this output had before
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(f"workflow  {run.workflow_id}")
    typer.echo(f"temporal  {run.status}")
    if st is None:
        typer.echo(f"status    unavailable ({NO_ANSWER})")
    else:
        for line in pipeline_lines(st):
            typer.echo(line)
    for line in retrying:
        typer.echo(f"retrying  {line}")
    typer.echo(f"ui        {settings.workflow_url(run.workflow_id)}")


def pipeline_lines(st: PipelineStatus) -> list[str]:
    """The human lines of a pipeline's status (after `workflow` and `temporal`)."""
    what = {"issue": f"issue #{st.number}", "pull_request": f"pull request #{st.number}", "alert": "alert"}[st.kind]
    lines = [f"run       {what} of {st.repo}" if st.repo else f"run       {what}"]
    if st.kind == "alert":
        lines.append(f"phase     {st.stage}" + (f" · issue #{st.number}" if st.number else ""))
    elif not st.started:
        lines.append(f"state     {st.state} (no work started yet)")
    else:
        lines.append(f"state     {st.state}" + (" · paused" if st.paused else ""))
        lines.append(f"stage     {st.stage}")
    if st.waiting_for:
        lines.append(f"waits for {st.waiting_for}")
    if st.reason:
        lines.append(f"reason    {st.reason[:300]}")
    if st.pr_number is not None:
        head = f" · head {st.head_sha[:12]}" if st.head_sha else ""
        lines.append(f"pr        #{st.pr_number}{head}" + (f" · {st.pr_url}" if st.pr_url else ""))
    lines.append(f"cost      ${st.cost_usd:.4f} (finished agent runs)")
    if st.paused:
        lines.append(f"paused    yes: `shopfloor resume {st.workflow_id}` resumes it")
    if st.stopped_by:
        lines.append(f"stopped   by {st.stopped_by}")
    lines += [f"warning   {w[:300]}" for w in st.warnings]
    for agent in st.agent_runs:
        lines.append(f"agent run {agent}" + (" (running)" if agent == st.running_agent else ""))
    lines += status_lines(st.pending)
    return lines


def _as_json(run: Run, settings: Settings, st: BaseModel | None, retrying: list[str]) -> dict[str, Any]:
    """A run's status as `--json` prints it: where to find the run, its status query's answer
    (when a worker gave one) and a model call being retried."""
    data: dict[str, Any] = {
        "workflow_id": run.workflow_id,
        "temporal_status": run.status,
        "url": settings.workflow_url(run.workflow_id),
    }
    if st is not None:
        data |= st.model_dump(mode="json")
    data["retrying"] = retrying
    return data


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


def _print_status(st: AgentStatus, workflow_id: str) -> None:
    typer.echo(f"state     {st.state}" + (" · paused" if st.paused and st.state == "running" else ""))
    typer.echo(f"agent     {st.agent} · {st.model}")
    typer.echo(f"repo      {st.repo}")
    if st.started_from:
        typer.echo(f"from      {st.started_from}")
    typer.echo(f"stage     {st.stage} · step {st.step}/{st.max_steps}")
    typer.echo(f"tokens    in {st.usage.input_tokens} / out {st.usage.output_tokens}")
    typer.echo(f"cost      ${st.cost_usd:.4f}")
    if st.paused:
        typer.echo(f"paused    yes: `shopfloor resume {workflow_id}` resumes it")
    for warning in st.warnings:
        typer.echo(f"warning   {warning[:300]}")
    if st.reason:
        typer.echo(f"reason    {st.reason}")
    if st.events:
        typer.echo(f"last      {st.events[-1].summary}")
    if st.final_answer:
        typer.echo("answer")
        for line in st.final_answer.splitlines():
            typer.echo(f"  {line}")
