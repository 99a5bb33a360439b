"""`shopfloor agent` (start and follow one agent run) and `shopfloor status` (of an agent run, or of an
issue's or a pull request's run, with the tool calls waiting for an operator)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError

from shopfloor.agents.call_waits import status_lines
from shopfloor.agents.progress import ProgressView
from shopfloor.agents.registry import AGENTS, get_agent
from shopfloor.agents.tools import TOOLS
from shopfloor.blobs import open_blob_store
from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings, usable_model
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import AgentInput, AgentResult, AgentStatus, PendingApproval, StepEvent, WorkspaceRef
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.models.inbox import ISSUE_WORKFLOW, PULL_REQUEST_WORKFLOW
from shopfloor.models.model_spec import ModelSpec
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow

POLL_S = 0.5


def validate_agent_args(name: str, repo: Path, goal: str, model: str, settings: Settings) -> tuple[Path, ModelSpec]:
    """Everything a user can get wrong, checked before anything starts."""
    if name not in AGENTS:
        raise UsageError(f"unknown agent {name!r}; known agents: {', '.join(sorted(AGENTS))}")
    if not goal.strip():
        raise UsageError("the goal is empty: say what the agent should do with --goal")
    if not repo.is_dir():
        raise UsageError(f"--repo {repo} is not a directory")
    spec = usable_model(settings, model)
    return repo.resolve(), spec


def workspace_for(name: str, root: Path) -> WorkspaceRef:
    """Read-only agents look at the checkout in place; agents that change things work on a
    portable copy of its HEAD commit, so your files are never touched and any worker can help."""
    repo = f"local/{_slug(root.name)}"
    if all(TOOLS[t].risk == "read" for t in get_agent(name).tools):
        return WorkspaceRef(repo=repo, path=str(root))
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        raise UsageError(
            f"agent {name} changes files, so --repo must be a git repository with a commit "
            f"(it works on a copy of HEAD): {root} is not"
        )
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    if dirty.stdout.strip():
        typer.echo("note: uncommitted changes are not part of the run: it starts from HEAD", err=True)
    return WorkspaceRef(repo=repo, clone_url=str(root), base_sha=head.stdout.strip())


async def _save_patch(settings: Settings, workflow_id: str, ref: WorkspaceRef) -> Path | None:
    if ref.patch_digest is None:
        return None
    blobs = open_blob_store(url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url)
    out = settings.data_dir / "patches" / f"{_slug(workflow_id)}.patch"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(await blobs.get(ref.patch_digest))
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "repo"


async def _has_pollers(client: Client, settings: Settings) -> bool:
    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=settings.temporal_namespace,
                task_queue=TaskQueue(name=settings.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # cannot tell: do not warn
    return bool(resp.pollers)


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


async def _follow(client: Client, workflow_id: str) -> AgentResult:
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
    @app.command()
    @command
    async def agent(
        name: str = typer.Argument(..., help=f"Agent to run ({', '.join(sorted(AGENTS))})."),
        repo: Path = typer.Option(..., "--repo", help="A local checkout the agent works in."),
        goal: str = typer.Option(..., "--goal", help="What the agent should do."),
        model: str | None = typer.Option(None, "--model", help="provider:model (default: SHOPFLOOR_MODEL)."),
        max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="Step limit (default: the agent's)."),
        detach: bool = typer.Option(False, "--detach", help="Print the workflow id and exit."),
    ) -> None:
        """Run an agent on a local checkout and follow it live."""
        settings = load_settings()
        root, spec = validate_agent_args(name, repo, goal, model or settings.model, settings)
        definition = get_agent(name)
        limits = definition.limits.model_copy(update={"max_steps": max_steps} if max_steps else {})
        client = await connect(settings)
        workflow_id = f"agent/{_slug(root.name)}/{name}-{uuid.uuid4().hex[:8]}"
        inp = AgentInput(
            agent=name,
            model=str(spec),
            goal=goal.strip(),
            workspace=workspace_for(name, root),
            limits=limits,
        )
        if not detach and not await _has_pollers(client, settings):
            typer.echo(
                f"warning: no worker polls task queue {settings.task_queue!r}; "
                "the run waits until `shopfloor dev` or `shopfloor worker` runs",
                err=True,
            )
        await client.start_workflow(
            AgentWorkflow.run,
            inp,
            id=workflow_id,
            task_queue=settings.task_queue,
            static_summary=f"{name}: {goal.strip()[:120]}",
        )
        if detach:
            typer.echo(workflow_id)
            return
        scripted = " (scripted model: replays a cassette)" if spec.provider == "scripted" else ""
        typer.echo(f"{name} on {root} with {spec}{scripted}")
        typer.echo(f"workflow {workflow_id}")
        try:
            result = await _follow(client, workflow_id)
        except WorkflowFailureError as exc:
            cause: BaseException | None = exc.cause
            while isinstance(cause, TemporalError) and cause.cause is not None:
                cause = cause.cause
            typer.echo(f"\nfailed: {cause}", err=True)
            typer.echo(f"see {settings.workflow_url(workflow_id)}", err=True)
            raise typer.Exit(EXIT_FAILURE) from None
        typer.echo("")
        if result.state == "completed":
            # An agent with an output model ends with its submitted result, not a text answer.
            answer = json.dumps(result.output, indent=2) if result.output is not None else result.final_answer
            typer.echo(answer or "(no answer)")
        else:
            typer.echo(f"ended: {result.state}: {result.reason}")
        typer.echo(f"\n{result.steps} steps · tokens in {result.usage.input_tokens} / out {result.usage.output_tokens}")
        if result.workspace is not None:
            patch = await _save_patch(settings, workflow_id, result.workspace)
            typer.echo(f"changes: git -C {root} apply {patch}" if patch else "changes: none")
        typer.echo(settings.workflow_url(workflow_id))

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
