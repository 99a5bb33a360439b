"""`shopfloor transcript ID`: an agent run's conversation, read from the blob store; given an
issue's, a pull request's or an alert's run, its running (or else its last) agent run's, named on
stderr.

History holds only the transcript's manifest digest (docs/design.md, Parts and data flow), so this
reads the newest one from the run's history — the last model step or compaction, or the run's result
— and prints the messages the manifest lists. It works for running and finished runs, with or
without a worker.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.blobs import open_blob_store
from shopfloor.cli.common import EXIT_FAILURE, Run, command, fail, load_settings, resolve_run
from shopfloor.cli.control import pipeline_status
from shopfloor.errors import BlobNotFound
from shopfloor.models.agent_run import AgentResult, CompactOutput, ModelStepOutput
from shopfloor.models.transcript import Message
from shopfloor.temporal import connect

_OUTPUTS: dict[str, type[ModelStepOutput] | type[CompactOutput]] = {
    "model_step": ModelStepOutput,
    "compact_transcript": CompactOutput,
}


async def latest_manifest(client: Client, workflow_id: str) -> str | None:
    """The newest transcript manifest digest the run's history mentions."""
    handle = client.get_workflow_handle(workflow_id)
    activity_types: dict[int, str] = {}
    digest: str | None = None
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activity_types[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            output_type = _OUTPUTS.get(activity_types.get(attrs.scheduled_event_id, ""))
            if output_type is not None and attrs.result.payloads:
                [output] = await client.data_converter.decode(attrs.result.payloads, [output_type])
                digest = output.transcript
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            payloads = event.workflow_execution_completed_event_attributes.result.payloads
            if payloads:
                [result] = await client.data_converter.decode(payloads, [AgentResult])
                digest = result.transcript or digest
    return digest


def _render(index: int, message: Message) -> str:
    head = f"── [{index}] {message.role}"
    if message.name:
        head += f" · {message.name}"
    if message.is_error:
        head += " · error"
    lines = [head]
    if message.content:
        lines.append(message.content)
    for image in message.images:  # the bytes stay in the blob store: `shopfloor` shows what and where
        lines.append(
            f"[image {image.number} of {image.source}: {image.media_type}, {image.size:,} bytes, blob {image.digest}]"
        )
    for call in message.tool_calls:
        lines.append(f"→ {call.name}({json.dumps(call.arguments, ensure_ascii=False)})  [{call.id}]")
    return "\n".join(lines)


async def _agent_run_of(run: Run) -> str:
    """The agent run whose transcript stands for a pipeline's: the running one, else the last."""
    st = await pipeline_status(run)
    if st is None:
        fail(
            f"no worker answered which agent runs the {run.what} {run.workflow_id} has: name one "
            f"(their ids go on from it, such as {run.workflow_id}/fix-1)",
            EXIT_FAILURE,
        )
    agent = st.last_agent
    if agent is None:
        fail(f"{run.workflow_id} has started no agent run yet, so there is no transcript", EXIT_FAILURE)
    which = "running" if agent == st.running_agent else "last"
    typer.echo(f"transcript of {agent} (the {which} agent run of {run.workflow_id})", err=True)
    return agent


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def transcript(
        workflow_id: str = typer.Argument(
            ..., metavar="ID", help="An agent run's id, or an issue's, a PR's or an alert's run."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the messages as JSON lines."),
    ) -> None:
        """Print an agent run's transcript (running or finished) from the blob store."""
        settings = load_settings()
        client = await connect(settings)
        run = await resolve_run(client, workflow_id, "transcript")
        if run.kind != "agent":
            workflow_id = await _agent_run_of(run)
        try:
            digest = await latest_manifest(client, workflow_id)
        except RPCError as exc:
            fail(f"no workflow {workflow_id!r}: {exc.message}", EXIT_FAILURE)
        if digest is None:
            fail(f"{workflow_id} has no transcript yet (no model step has finished)", EXIT_FAILURE)
        store = TranscriptStore(
            open_blob_store(url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url)
        )
        try:
            messages = await store.messages(await store.manifest(digest))
        except BlobNotFound as exc:
            fail(f"the transcript is not in this blob store ({exc}); check SHOPFLOOR_BLOB_URL", EXIT_FAILURE)
        for index, message in enumerate(messages):
            if as_json:
                row: dict[str, Any] = message.model_dump(mode="json", exclude_defaults=True)
                typer.echo(json.dumps(row, ensure_ascii=False))
            else:
                typer.echo(_render(index, message))
