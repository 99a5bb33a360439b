"""`shopfloor bench webhooks` compares like with like: its ceiling sends Temporal the very call the
edge makes for a delivery, and every row reports its CPU per request, the load generator's share
apart (figures are for reading: no thresholds here)."""

from __future__ import annotations

import json
import uuid

import httpx
from edge_app import SECRET, delivery_headers, unique_owner
from fixture_files import fixture
from pydantic import SecretStr
from temporal_calls import CountingInterceptor, counted_client
from temporalio.client import Client, StartWorkflowInput

from shopfloor.bench.webhooks import _payload, bench_webhooks, ceiling_starts
from shopfloor.blobs import BlobStore
from shopfloor.settings import Settings
from shopfloor.temporal import send_signal_with_start
from shopfloor.webhooks.app import create_app


async def test_the_ceiling_sends_the_call_the_edge_makes(
    temporal_client: Client, settings: Settings, blobs: BlobStore
) -> None:
    edge_settings = settings.model_copy(update={"webhook_secret": SecretStr(SECRET)})
    counter = CountingInterceptor()
    client = counted_client(temporal_client, counter)

    async def get_client() -> Client:
        return client

    owner = unique_owner()
    template = json.loads(fixture("github", "webhooks", "issues.opened.json").read_text())
    body = _payload(template, owner, 1)
    app = create_app(get_client, edge_settings, blobs)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge") as http:
        answer = await http.post("/webhooks/github", content=body, headers=delivery_headers("issues", body))
    assert answer.json()["outcome"] == "started", answer.text
    (start,) = await ceiling_starts(template, owner, 1, edge_settings, blobs)
    await send_signal_with_start(client, edge_settings.task_queue, start)  # the same id: signals the run

    assert [name for name, _ in counter.calls] == ["start_workflow", "start_workflow"]
    edge, ceiling = (call for _, call in counter.calls)
    assert isinstance(edge, StartWorkflowInput) and isinstance(ceiling, StartWorkflowInput)
    for field in (
        "workflow",
        "args",
        "id",
        "task_queue",
        "id_reuse_policy",
        "id_conflict_policy",
        "search_attributes",
        "static_summary",
        "start_signal",
    ):
        assert getattr(ceiling, field) == getattr(edge, field), field
    # The same signal but for who delivered it and when.
    (edge_event,), (ceiling_event,) = edge.start_signal_args, ceiling.start_signal_args
    differs = {"delivery_id", "received_at"}
    assert ceiling_event.model_dump(exclude=differs) == edge_event.model_dump(exclude=differs)
    assert uuid.UUID(ceiling_event.delivery_id)
    await temporal_client.get_workflow_handle(edge.id).terminate("test over")


async def test_every_row_reports_its_cpu_per_request_and_the_generators_share() -> None:
    report = await bench_webhooks(requests=6, concurrency=2)
    edge, ceiling, rejected = report.rows
    for row in report.rows:
        assert row.ok == row.requests == 6 and row.errors == {}, row
        assert row.cpu_ms_per_request > 0, row
        assert row.temporal_cpu_ms_per_request is not None, row  # Linux: read from /proc
    for row in (edge, rejected):  # over HTTP: the load generator's own part, measured apart
        assert 0 < row.generator_cpu_ms_per_request < row.cpu_ms_per_request, row
        assert 0 < row.generator_share < 1
    assert ceiling.generator_cpu_ms_per_request == 0 and ceiling.expected_status is None
    # Thread round trips, counted to the last marker: the two marker reads, the text snapshot's
    # write and the marker's write for each accepted delivery (its short text parsed on the loop);
    # none for the ceiling's bare call or a rejected delivery.
    assert edge.thread_jobs_per_request == 4, edge
    assert ceiling.thread_jobs_per_request == rejected.thread_jobs_per_request == 0
    assert report.http_protocol  # which HTTP/1.1 implementation served the edge
    table = report.markdown().splitlines()
    assert "of which load generator" in table[0] and len(table) >= 5
