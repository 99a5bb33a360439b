"""`shopfloor agent`: start one agent run on a local checkout and follow it live."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError

from shopfloor.agents.registry import AGENTS, get_agent
from shopfloor.agents.tools import TOOLS
from shopfloor.blobs import open_blob_store
from shopfloor.cli.common import EXIT_FAILURE, command, load_settings, usable_model
from shopfloor.cli.follow import follow_run
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import AgentInput, WorkspaceRef
from shopfloor.models.model_spec import ModelSpec
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow


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
            result = await follow_run(client, workflow_id)
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
