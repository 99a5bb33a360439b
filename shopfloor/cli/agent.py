"""`shopfloor agent`: start one agent run on a local checkout and follow it live; `continue` and
`fork` start a new run from where a run ended or from one of its steps.

`shopfloor agent NAME --repo --goal` runs an agent (the group's default command, `run`, so its
name may be left out); `continue` and `fork` are the group's other commands, so no agent may be
named `run`, `continue` or `fork`.

A continued or forked run is a new run with a fresh id of the same form as any other
(`agent/<checkout>/<agent>-<hex>`), not one derived from the old id: ids stay bounded however many
times a run goes on, and no new run can collide with an old one. Where it came from is in its input
(`AgentInput.start_from`) and its status ("continued from ID", "forked from ID at step N").
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError
from typer.core import TyperGroup

from shopfloor.agents.registry import AGENTS, get_agent
from shopfloor.agents.tools import TOOLS
from shopfloor.blobs import open_blob_store
from shopfloor.cli.agent_history import RunRecord, Start, read_run
from shopfloor.cli.common import EXIT_FAILURE, agent_run_handle, command, fail, load_settings, usable_model
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
    spec = usable_model(settings, model, called_here=False)
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


DEFAULT_COMMAND = "run"
SUBCOMMANDS = (DEFAULT_COMMAND, "continue", "fork")


class _AgentNamesRun(dict[str, Any]):
    """The group's commands, where an agent's name names `run` (as click's lookup and the
    README's checks ask for it)."""

    def get(self, name: str, default: Any = None) -> Any:
        found = super().get(name)
        if found is None and name in AGENTS:
            found = super().get(DEFAULT_COMMAND)
        return found if found is not None else default


class AgentCommands(TyperGroup):
    """`shopfloor agent`'s commands, `run` the default: `shopfloor agent explore ...` is
    `shopfloor agent run explore ...`, as it was before the group had other commands (an unknown
    agent's name goes to `run` too, which says which agents there are)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _AgentNamesRun(self.commands)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: the click Typer vendors
        if args and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h"):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


def run_id_for(workspace: WorkspaceRef, agent: str) -> str:
    """A new agent run's id, `agent/<checkout>/<agent>-<hex>`, as `shopfloor agent` names its runs."""
    return f"agent/{_slug(workspace.repo.removeprefix('local/'))}/{agent}-{uuid.uuid4().hex[:8]}"


async def _start(client: Client, settings: Settings, inp: AgentInput, workflow_id: str, summary: str) -> None:
    await client.start_workflow(
        AgentWorkflow.run,
        inp,
        id=workflow_id,
        task_queue=settings.task_queue,
        static_summary=f"{inp.agent}: {summary[:120]}",
    )


async def _follow_to_the_end(client: Client, settings: Settings, workflow_id: str, root: Path | None) -> None:
    """Print the run's steps as they happen, then its answer, totals, changes and link."""
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
        if patch is None:
            typer.echo("changes: none")
        else:
            typer.echo(f"changes: git -C {root} apply {patch}" if root else f"changes: {patch}")
    typer.echo(settings.workflow_url(workflow_id))


def _local_root(workspace: WorkspaceRef) -> Path | None:
    """The user's checkout a local run came from (where its patch applies), if it is one."""
    where = workspace.path or workspace.clone_url
    if where and Path(where).is_dir():
        return Path(where)
    return None


async def _agent_run_record(client: Client, workflow_id: str, command_name: str) -> RunRecord:
    await agent_run_handle(client, workflow_id, command_name)
    try:
        return await read_run(client, workflow_id)
    except RPCError as exc:
        fail(f"no workflow {workflow_id!r}: {exc.message}", EXIT_FAILURE)


def _next_input(record: RunRecord, start: Start, model: str | None, max_steps: int | None) -> AgentInput:
    """The new run's input: the old run's (agent, goal, policy, limits), going on from `start`."""
    base = record.input
    limits = base.limits.model_copy(update={"max_steps": max_steps} if max_steps else {})
    return base.model_copy(
        update={
            "model": model or start.model,
            "limits": limits,
            "workspace": start.workspace,
            "carry": None,
            "start_from": start.start_from,
        }
    )


async def _start_and_follow(client: Client, settings: Settings, inp: AgentInput, *, summary: str, detach: bool) -> None:
    start = inp.start_from
    workflow_id = run_id_for(inp.workspace, inp.agent)
    await _start(client, settings, inp, workflow_id, summary)
    if detach:
        typer.echo(workflow_id)
        return
    typer.echo(f"{inp.agent} with {inp.model}, {start.describe() if start else 'new'}")
    typer.echo(f"workflow {workflow_id}")
    await _follow_to_the_end(client, settings, workflow_id, _local_root(inp.workspace))


def register(app: typer.Typer) -> None:
    agent_app = typer.Typer(
        cls=AgentCommands,
        help="Run an agent on a local checkout (`shopfloor agent NAME --repo . --goal ...`), or go on from a run.",
        no_args_is_help=True,
        invoke_without_command=True,  # `shopfloor agent NAME ...` runs without naming `run`
    )
    app.add_typer(agent_app, name="agent")

    @agent_app.command(DEFAULT_COMMAND)
    @command
    async def run(
        name: str = typer.Argument(..., help=f"Agent to run ({', '.join(sorted(AGENTS))})."),
        repo: Path = typer.Option(..., "--repo", help="A local checkout the agent works in."),
        goal: str = typer.Option(..., "--goal", help="What the agent should do."),
        model: str | None = typer.Option(None, "--model", help="provider:model (default: SHOPFLOOR_MODEL)."),
        max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="Step limit (default: the agent's)."),
        detach: bool = typer.Option(False, "--detach", help="Print the workflow id and exit."),
    ) -> None:
        """Run an agent on a local checkout and follow it live (the default: `shopfloor agent NAME`)."""
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
        await _start(client, settings, inp, workflow_id, goal.strip())
        if detach:
            typer.echo(workflow_id)
            return
        scripted = " (scripted model: replays a cassette)" if spec.provider == "scripted" else ""
        typer.echo(f"{name} on {root} with {spec}{scripted}")
        typer.echo(f"workflow {workflow_id}")
        await _follow_to_the_end(client, settings, workflow_id, root)

    @agent_app.command("continue")
    @command
    async def continue_(
        workflow_id: str = typer.Argument(..., metavar="ID", help="The finished agent run to go on from."),
        message: str = typer.Argument(..., help="The next user message."),
        model: str | None = typer.Option(None, "--model", help="provider:model (default: the run's last)."),
        max_steps: int | None = typer.Option(
            None, "--max-steps", min=1, help="Steps of the new run (default: the run's limit)."
        ),
        detach: bool = typer.Option(False, "--detach", help="Print the new workflow id and exit."),
    ) -> None:
        """Give a finished agent run another turn: a new run from its conversation and workspace."""
        settings = load_settings()
        if not message.strip():
            raise UsageError("the message is empty: say what the agent should do next")
        spec = usable_model(settings, model, called_here=False) if model else None
        client = await connect(settings)
        record = await _agent_run_record(client, workflow_id, "continue")
        if record.running:
            fail(
                f"{workflow_id} is still running: steer it instead (shopfloor steer {workflow_id} MESSAGE), "
                "or continue it once it has ended",
                EXIT_FAILURE,
            )
        start = record.continued(message.strip())
        if start is None:
            fail(f"{workflow_id} has no conversation to continue (it asked no model step)", EXIT_FAILURE)
        inp = _next_input(record, start, str(spec) if spec else None, max_steps)
        await _start_and_follow(client, settings, inp, summary=f"continue: {message.strip()}", detach=detach)

    @agent_app.command("fork")
    @command
    async def fork(
        workflow_id: str = typer.Argument(..., metavar="ID", help="The agent run to fork."),
        step: int = typer.Option(
            ..., "--step", help="The step to take again, from the conversation and workspace it was asked with."
        ),
        message: str | None = typer.Argument(None, help="A user message added before the step is taken again."),
        model: str | None = typer.Option(None, "--model", help="provider:model (default: the one step N asked)."),
        max_steps: int | None = typer.Option(
            None, "--max-steps", min=1, help="Steps of the new run (default: the run's limit)."
        ),
        detach: bool = typer.Option(False, "--detach", help="Print the new workflow id and exit."),
    ) -> None:
        """Start a new run that takes step N of a run again.

        It starts from the conversation as the model saw it when step N was asked and the workspace
        as it was then; with --model another model takes the step, with MESSAGE it reads that first.
        """
        settings = load_settings()
        if message is not None and not message.strip():
            raise UsageError("the message is empty: leave it out, or say what the agent should do")
        spec = usable_model(settings, model, called_here=False) if model else None
        client = await connect(settings)
        record = await _agent_run_record(client, workflow_id, "fork")
        origin = record
        # A step before a forked or continued run's own is found in the run it went on from.
        while origin.input.start_from is not None and step <= origin.input.start_from.steps:
            origin = await _agent_run_record(client, origin.input.start_from.run_id, "fork")
        start = origin.forked(step, message.strip() if message else None)
        if start is None:
            asked = f"steps 1 to {max(record.steps)}" if record.steps else "no step yet"
            fail(f"{workflow_id} has no step {step} to fork from (it asked {asked})", EXIT_FAILURE)
        inp = _next_input(origin, start, str(spec) if spec else None, max_steps)
        await _start_and_follow(client, settings, inp, summary=f"fork at step {step}", detach=detach)
