"""Shared pieces of the workflow tests: sample repositories, cassettes, history measurement."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import Client

from shopfloor.models.agent_run import AgentInput, Limits, Timeouts, WorkspaceRef
from shopfloor.workflows.agent import AgentWorkflow


def sample_repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# sample\nA tiny package that greets people.\n")
    (root / "src" / "greet.py").write_text("def greet(name):\n    return f'Hello, {name}!'\n")
    return root


def write_cassette(path: Path, turns: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"description": "test cassette", "turns": turns}))
    return f"scripted:{path}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def agent_input(
    repo: Path, model: str, *, goal: str = "What does this repo do?", max_steps: int = 40, heartbeat_s: float = 30.0
) -> AgentInput:
    return AgentInput(
        agent="explore",
        model=model,
        goal=goal,
        workspace=WorkspaceRef(repo=f"local/{repo.name}", path=str(repo)),
        limits=Limits(max_steps=max_steps),
        timeouts=Timeouts(model_heartbeat_s=heartbeat_s),
    )


async def start_agent(client: Client, inp: AgentInput, task_queue: str):
    return await client.start_workflow(
        AgentWorkflow.run, inp, id=f"test/agent-{uuid.uuid4().hex[:10]}", task_queue=task_queue
    )


async def history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return History(events=history.events).ByteSize()


HISTORIES = Path(__file__).resolve().parents[1] / "histories"
LOCAL_ACTIVITY_MARKER = "core_local_activity"  # the Temporal SDK's marker of a local activity's result


def activities_in(events: Iterable[HistoryEvent]) -> list[tuple[str, Payload]]:
    """The activities a history shows, in order, as (activity type, summary): each scheduled
    through the server, and each local one (a read-only tool call: its result is a marker in the
    workflow task that ran it)."""
    found: list[tuple[str, Payload]] = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            found.append((e.activity_task_scheduled_event_attributes.activity_type.name, e.user_metadata.summary))
        elif (
            e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
        ):
            data = json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0].data)
            found.append((data["activity_type"], e.user_metadata.summary))
    return found


async def record_history(handle, name: str) -> None:
    """With SHOPFLOOR_RECORD_HISTORIES=1, keep this run's history for the replay tests."""
    if os.environ.get("SHOPFLOOR_RECORD_HISTORIES") != "1":
        return
    history = await handle.fetch_history()
    data = {"workflowId": handle.id, **history.to_json_dict()}
    HISTORIES.mkdir(exist_ok=True)
    (HISTORIES / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
