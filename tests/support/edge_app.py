"""The webhook edge in tests: signed deliveries of real payloads, posted over ASGI with httpx."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from fixture_files import GITHUB_WEBHOOKS
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from shopfloor.github_signature import sign
from shopfloor.models.inbox import GITHUB_EVENT_SIGNAL, RepoEvent

SECRET = "edge-test-secret"
WEBHOOKS = GITHUB_WEBHOOKS


def fixture_payload(name: str, *, owner: str | None = None) -> dict[str, Any]:
    """A real payload; `owner` renames the repository's owner so workflow ids are this test's own."""
    payload = json.loads((WEBHOOKS / name).read_text())
    if owner and isinstance(payload.get("repository"), dict):
        repo = payload["repository"]
        repo["full_name"] = f"{owner}/{repo['name']}"
        for key in ("pull_request",):
            head = (payload.get(key) or {}).get("head") or {}
            if isinstance(head.get("repo"), dict):
                head["repo"]["full_name"] = repo["full_name"]
    return payload


def unique_owner() -> str:
    return "t" + uuid.uuid4().hex[:12]


def delivery_headers(
    event: str,
    body: bytes,
    *,
    delivery: str | None = None,
    secret: str = SECRET,
    content_type: str = "application/json",
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret.encode(), body),
        "Content-Type": content_type,
        "User-Agent": "GitHub-Hookshot/test",
    }


async def post_event(
    http: httpx.AsyncClient, event: str, payload: dict[str, Any], *, delivery: str | None = None
) -> httpx.Response:
    body = json.dumps(payload).encode()
    return await http.post("/webhooks/github", content=body, headers=delivery_headers(event, body, delivery=delivery))


async def github_signals(client: Client, workflow_id: str) -> list[RepoEvent]:
    """The RepoEvents signalled to `workflow_id` (`github_event`), in history order."""
    handle: WorkflowHandle = client.get_workflow_handle(workflow_id)
    events: list[RepoEvent] = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            attrs = e.workflow_execution_signaled_event_attributes
            if attrs.signal_name == GITHUB_EVENT_SIGNAL:
                [decoded] = await client.data_converter.decode(attrs.input.payloads, [RepoEvent])
                events.append(decoded)
    return events
