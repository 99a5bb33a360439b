"""Temporal unreachable → 503 and nothing remembered: the same delivery succeeds once it is back."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from edge_app import SECRET, fixture_payload, github_signals, post_event, unique_owner
from pydantic import SecretStr
from temporalio.client import Client

from shopfloor.devserver import DevServer, free_port
from shopfloor.errors import TemporalUnreachable
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.webhooks.app import create_app


async def test_server_down_then_back(tmp_path: Path, settings: Settings, blobs) -> None:
    port = free_port()

    def server() -> DevServer:
        return DevServer(port=port, db_file=tmp_path / "temporal.db", log_file=tmp_path / "temporal.log")

    first = server()
    first.start()
    try:
        await first.wait_ready()
        s = settings.model_copy(update={"webhook_secret": SecretStr(SECRET), "temporal_address": first.address})
        client = await connect(s)
    finally:
        first.stop()

    async def get_client() -> Client:
        return client

    app = create_app(get_client, s, blobs, temporal_timeout_s=2.0)
    payload = fixture_payload("issues.opened.json", owner=unique_owner())
    delivery = str(uuid.uuid4())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge") as http:
        down = await post_event(http, "issues", payload, delivery=delivery)
        assert down.status_code == 503 and down.json()["outcome"] == "unavailable"
        assert (await http.get("/readyz")).status_code == 503
        again = server()
        again.start()
        try:
            await again.wait_ready()
            back = await post_event(http, "issues", payload, delivery=delivery)
            assert back.status_code == 202 and back.json()["outcome"] == "started", back.text
            assert len(await github_signals(client, back.json()["workflow_id"])) == 1
            assert (await http.get("/readyz")).status_code == 200
        finally:
            again.stop()
        metrics = (await http.get("/metrics")).text
        assert 'outcome="unavailable",source="github"} 1.0' in metrics


async def test_client_getter_failure_is_503(settings: Settings, blobs) -> None:
    async def get_client() -> Client:
        raise TemporalUnreachable("cannot reach Temporal at 127.0.0.1:1")

    s = settings.model_copy(update={"webhook_secret": SecretStr(SECRET)})
    app = create_app(get_client, s, blobs)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge") as http:
        r = await post_event(http, "issues", fixture_payload("issues.opened.json", owner=unique_owner()))
    assert r.status_code == 503 and "unreachable" in r.json()["detail"]
