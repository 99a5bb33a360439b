"""`shopfloor transcript ID`: an agent run's conversation, read from the blob store.

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
from shopfloor.cli.common import EXIT_FAILURE, agent_run_handle, command, fail, load_settings
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
    for call in message.tool_calls:
        lines.append(f"→ {call.name}({json.dumps(call.arguments, ensure_ascii=False)})  [{call.id}]")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def transcript(
        workflow_id: str = typer.Argument(..., metavar="ID", help="The agent run's workflow id."),
        as_json: bool = typer.Option(False, "--json", help="Print the messages as JSON lines."),
    ) -> None:
        """Print an agent run's transcript (running or finished) from the blob store."""
        settings = load_settings()
        client = await connect(settings)
        await agent_run_handle(client, workflow_id, "transcript")
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
