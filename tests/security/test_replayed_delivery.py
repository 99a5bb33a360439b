"""A captured signed delivery, resent under a new X-GitHub-Delivery after the run finished,
restarts nothing.

The signature covers the body only, so whoever captured a delivery (a proxy's log, a leaked
request dump) can send the same bytes again with any delivery id. Here the factory takes an issue
to a merged fix on the simulator; then the real signed bodies of its starting events (the issue
opened, the maintainer's `/shopfloor approve`), as GitHub's delivery log shows them, are sent to
the edge again with fresh delivery ids. The edge knows those bodies: no run starts, no agent runs,
nothing is posted. And the workflows refuse on their own: through a second edge that never saw
the bodies (its memory lost), the replay does start a new run of the closed issue's workflow —
which reads the issue on GitHub, finds it closed, and ends without doing anything.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from agent_runs import call, record_history
from edge_app import fixture_payload, unique_owner
from factory_runs import APPROVE, SECRET, TRIAGE_TURNS, Factory, approve_and_finish, assert_merged, factory, fix_turns
from pydantic import SecretStr
from temporalio.client import Client
from threaded_server import serving
from waiting import DEADLINE_S

from shopfloor.blobs import FileBlobStore
from shopfloor.github_signature import sign
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.settings import Settings
from shopfloor.webhooks.app import create_app

MODELS = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}


def captured(f: Factory, number: int, event: str, match: Any) -> tuple[bytes, dict[str, str]]:
    """The exact signed bytes and headers of the delivery of `event` to the edge whose payload
    `match`es, as GitHub's delivery log (the hooks API) shows them."""
    edge = f"{f.edge_url}/webhooks/github"
    found = [
        d
        for d in f.sim.deliveries()
        if d["url"] == edge
        and d["event"] == event
        and match(d["payload"])
        and (d["payload"].get("issue") or {}).get("number") == number
    ]
    assert len(found) == 1, found
    d = found[0]
    with f.gh("acme") as gh:
        resp = gh.get(f"/repos/{f.repo}/hooks/{d['hook_id']}/deliveries/{d['id']}")
    resp.raise_for_status()
    request = resp.json()["request"]
    body = json.dumps(request["payload"], separators=(",", ":")).encode()  # as GitHub sent it
    headers = dict(request["headers"])
    # These are the very bytes the signature was made for: a replay needs no secret.
    assert sign(SECRET.encode(), body) == headers["X-Hub-Signature-256"]
    return body, headers


async def replay(edge_url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    fresh = {**headers, "X-GitHub-Delivery": str(uuid.uuid4())}  # a new guid: not a redelivery
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(f"{edge_url}/webhooks/github", content=body, headers=fresh)


async def run_ids(client: Client, *workflow_ids: str) -> dict[str, str]:
    return {wid: (await client.get_workflow_handle(wid).describe()).run_id for wid in workflow_ids}


def comments(f: Factory, number: int) -> list[tuple[int, str]]:
    return [(c["id"], c["body"]) for c in f.get(f"/issues/{number}/comments")]


async def test_a_replayed_delivery_restarts_nothing(simulator, settings, running_worker, temporal_client, tmp_path):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        assert_merged(f, number, outcome)
        simulator.wait_idle()
        issue_wf = f.handle.id
        before_runs = await run_ids(temporal_client, issue_wf, *outcome.factory.children)
        before_comments = comments(f, number)
        opened = captured(f, number, "issues", lambda p: p.get("action") == "opened")
        approve = captured(
            f, number, "issue_comment", lambda p: p["action"] == "created" and p["sender"]["login"] == "maria"
        )

        # Days later, the captured bodies come back under new delivery ids.
        for body, headers in (opened, approve):
            r = await replay(f.edge_url, body, headers)
            assert r.status_code == 202 and r.json()["outcome"] == "duplicate", r.text
            assert r.json()["workflow_id"] == issue_wf

        assert await run_ids(temporal_client, issue_wf, *outcome.factory.children) == before_runs
        assert (await f.handle.describe()).status.name == "COMPLETED"
        assert comments(f, number) == before_comments

        # The edge's memory lost (a replica without the shared store): the workflow still refuses.
        forgetful = settings.model_copy(update={"webhook_secret": SecretStr(SECRET), "data_dir": tmp_path / "edge2"})
        await workflows_refuse(f, temporal_client, forgetful, opened, issue_wf, number, before_comments)
        assert await run_ids(temporal_client, *outcome.factory.children) == {
            k: v for k, v in before_runs.items() if k != issue_wf
        }
    assert f.get(f"/issues/{number}")["state"] == "closed"


async def test_the_edge_remembers_bodies_across_a_restart(settings, temporal_client, blobs):
    """A replay days later meets a restarted edge (a fresh process, empty caches): the memory of
    accepted bodies is in the blob store the replicas share, not in the process."""
    edge_settings = settings.model_copy(update={"webhook_secret": SecretStr(SECRET)})
    payload = fixture_payload("issues.opened.json", owner=unique_owner())  # a real delivery's payload
    body = json.dumps(payload).encode()

    async def post(delivery: str) -> httpx.Response:
        async def get_client() -> Client:
            return temporal_client

        app = create_app(get_client, edge_settings, blobs)  # a new edge process each time
        headers = {
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": delivery,
            "Content-Type": "application/json",
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
        }
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge") as http:
            return await http.post("/webhooks/github", content=body, headers=headers)

    first = await post(str(uuid.uuid4()))
    assert first.status_code == 202 and first.json()["outcome"] == "started", first.text
    again = await post(str(uuid.uuid4()))
    assert again.status_code == 202 and again.json() == {
        "workflow_id": first.json()["workflow_id"],
        "outcome": "duplicate",
    }
    await temporal_client.get_workflow_handle(first.json()["workflow_id"]).terminate("test over")


async def workflows_refuse(
    f: Factory,
    client: Client,
    edge_settings: Settings,
    delivery: tuple[bytes, dict[str, str]],
    issue_wf: str,
    number: int,
    before_comments: list[tuple[int, str]],
) -> None:
    async def get_client() -> Client:
        return client

    blobs = FileBlobStore(Path(edge_settings.data_dir) / "blobs")
    with serving(create_app(get_client, edge_settings, blobs), name="forgetful-edge") as edge_url:
        r = await replay(edge_url, *delivery)
    # This edge hands it to Temporal, which starts a new run on the finished workflow's id ...
    assert r.status_code == 202 and r.json() == {"workflow_id": issue_wf, "outcome": "started"}, r.text
    handle = client.get_workflow_handle(issue_wf)
    outcome = IssueOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))
    # ... which reads the issue on GitHub first, and ends: no triage, no comment.
    assert outcome.state == "closed" and outcome.factory is None, outcome
    assert "closed on GitHub" in outcome.reason
    assert outcome.events_seen == 0 and outcome.commands_accepted == 0
    await record_history(handle, "issue-new-run-closed-on-github")
    assert comments(f, number) == before_comments
