"""`shopfloor bench webhooks`: the webhook edge against a bare loop of the Temporal call it makes.

Three rows from one run, all against one in-memory Temporal dev server:
- signed deliveries of a real `issues.opened` payload over real HTTP to the real edge app (uvicorn),
  each a distinct issue, so each one signal-with-starts a new IssueWorkflow;
- the ceiling: the same signal-with-start (same policies, search attributes and signal payload)
  called directly with the Temporal client, without HTTP, verification or parsing;
- deliveries with a wrong signature, answered 401 before anything else happens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import platform
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel, Field, SecretStr
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from shopfloor.blobs import FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.errors import UsageError
from shopfloor.github_signature import sign
from shopfloor.http_server import EmbeddedServer
from shopfloor.models.github_events import parse_event
from shopfloor.models.inbox import (
    GITHUB_EVENT_SIGNAL,
    ISSUE_WORKFLOW,
    IssueWorkflowInput,
    issue_workflow_id,
)
from shopfloor.search_attributes import SHOPFLOOR_ISSUE, SHOPFLOOR_REPO
from shopfloor.settings import Settings
from shopfloor.temporal import connect, ensure_search_attributes
from shopfloor.webhooks.app import create_app
from shopfloor.webhooks.github_repo_event import repo_event

# A real delivery (GitHub's docs' example), in a source checkout beside the repository.
FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "github" / "webhooks" / "issues.opened.json"
SECRET = b"bench-webhook-secret"

# When installed without the fixtures: the fields of that payload the edge reads, nothing more.
_MINIMAL: dict[str, Any] = {
    "action": "opened",
    "issue": {
        "id": 444500041,
        "number": 1,
        "title": "Spelling error in the README file",
        "state": "open",
        "body": "It looks like you accidently spelled 'commit' with two 't's.",
        "user": {"login": "Codertocat", "id": 21031067, "type": "User"},
        "labels": [{"id": 1362934389, "name": "bug", "color": "d73a4a", "default": True}],
        "html_url": "https://github.com/Codertocat/Hello-World/issues/1",
        "created_at": "2019-05-15T15:20:18Z",
        "updated_at": "2019-05-15T15:20:18Z",
        "author_association": "OWNER",
    },
    "repository": {
        "id": 186853002,
        "name": "Hello-World",
        "full_name": "Codertocat/Hello-World",
        "private": False,
        "owner": {"login": "Codertocat", "id": 21031067, "type": "User"},
        "default_branch": "master",
        "clone_url": "https://github.com/Codertocat/Hello-World.git",
    },
    "sender": {"login": "Codertocat", "id": 21031067, "type": "User"},
}


class WebhookRow(BaseModel):
    name: str
    requests: int
    concurrency: int
    expected_status: int | None = None  # None: the in-process ceiling (no HTTP)
    ok: int  # answered as expected (202 / 401 / started)
    errors: dict[str, int] = Field(default_factory=dict)  # anything else, by status or exception name
    seconds: float
    rps: float  # sustained: requests / wall time of the whole row
    p50_ms: float
    p99_ms: float


class WebhookBenchReport(BaseModel):
    machine: str
    payload: str
    payload_bytes: int
    rows: list[WebhookRow]
    notes: list[str]

    def markdown(self) -> str:
        lines = [
            "| | requests | concurrency | answered as expected | errors | requests/s | p50 ms | p99 ms |",
            "|---|---:|---:|---:|---|---:|---:|---:|",
        ]
        for r in self.rows:
            errors = ", ".join(f"{k}: {v}" for k, v in sorted(r.errors.items())) or "none"
            expected = f" ({r.expected_status})" if r.expected_status else ""
            lines.append(
                f"| {r.name} | {r.requests} | {r.concurrency} | {r.ok}{expected} | {errors} "
                f"| {r.rps:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} |"
            )
        lines += ["", f"Machine: {self.machine}. Payload: {self.payload} ({self.payload_bytes} bytes)."]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines)


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def _percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest rank: a value that was actually measured."""
    if not sorted_ms:
        return 0.0
    return sorted_ms[max(0, math.ceil(q * len(sorted_ms)) - 1)]


async def _drive(
    n: int, concurrency: int, one: Callable[[int], Awaitable[str | None]]
) -> tuple[float, list[float], Counter[str]]:
    """Call `one(i)` for i in 0..n-1 with `concurrency` in flight; `one` returns None when the
    answer was the expected one, else a short label of what came back instead."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    next_i = iter(range(n))

    async def lane() -> None:
        for i in next_i:  # a shared iterator: each lane takes the next request when it is free
            start = time.perf_counter()
            try:
                problem = await one(i)
            except Exception as exc:  # noqa: BLE001 - a failed request is counted, not fatal
                problem = type(exc).__name__
            latencies.append((time.perf_counter() - start) * 1000)
            if problem is not None:
                errors[problem] += 1

    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(min(concurrency, n))))
    return time.perf_counter() - start, sorted(latencies), errors


def _row(
    name: str, n: int, concurrency: int, expected: int | None, result: tuple[float, list[float], Counter[str]]
) -> WebhookRow:
    seconds, latencies, errors = result
    return WebhookRow(
        name=name,
        requests=n,
        concurrency=concurrency,
        expected_status=expected,
        ok=n - sum(errors.values()),
        errors=dict(errors),
        seconds=round(seconds, 3),
        rps=n / seconds if seconds else 0.0,
        p50_ms=_percentile(latencies, 0.50),
        p99_ms=_percentile(latencies, 0.99),
    )


def _payload(template: dict[str, Any], owner: str, number: int) -> bytes:
    """The template as issue `number` of `<owner>/<repo>`: a workflow id of its own."""
    payload = json.loads(json.dumps(template))
    repo = payload["repository"]
    repo["owner"]["login"] = owner
    repo["full_name"] = f"{owner}/{repo['name']}"
    payload["issue"]["number"] = number
    return json.dumps(payload).encode()


async def _serve(app: Any, port: int) -> tuple[EmbeddedServer, asyncio.Task[None]]:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="on")
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("the bench's webhook server stopped before it started")
        await asyncio.sleep(0.02)
    return server, task


async def bench_webhooks(
    *, requests: int = 500, concurrency: int = 32, payload_path: Path | None = None
) -> WebhookBenchReport:
    if payload_path is not None and not payload_path.is_file():
        raise UsageError(f"--payload {payload_path}: no such file")
    path = payload_path or FIXTURE
    template = json.loads(path.read_text()) if path.is_file() else _MINIMAL
    source = path.name if path.is_file() else "built-in minimal issues.opened"
    run = uuid.uuid4().hex[:8]
    load_before = os.getloadavg()[0]  # other work on the machine skews every row: say how much there was
    rows: list[WebhookRow] = []
    with tempfile.TemporaryDirectory(prefix="shopfloor-bench-webhooks-") as tmp:
        base = Path(tmp)
        temporal = DevServer(port=free_port())  # in memory (no db file), no UI
        temporal.start()
        try:
            await temporal.wait_ready()
            settings = Settings(
                temporal_address=temporal.address,
                task_queue=f"bench-{run}",
                data_dir=base / "data",
                webhook_secret=SecretStr(SECRET.decode()),
            )
            client = await connect(settings)
            await ensure_search_attributes(client, settings.temporal_namespace)
            blobs = FileBlobStore(base / "blobs")

            async def get_client() -> Client:
                return client

            # The load generator's own request log is not the edge's cost: keep it out of the figures.
            logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger("httpx").getEffectiveLevel()))
            port = free_port()
            server, serving = await _serve(create_app(get_client, settings, blobs), port)
            limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30) as http:

                    def deliver(
                        owner: str, expected: int, wrong_signature: bool = False
                    ) -> Callable[[int], Awaitable[str | None]]:
                        async def one(i: int) -> str | None:
                            body = _payload(template, owner, i + 1)
                            signature = sign(b"not-" + SECRET if wrong_signature else SECRET, body)
                            response = await http.post(
                                "/webhooks/github",
                                content=body,
                                headers={
                                    "X-GitHub-Event": "issues",
                                    "X-GitHub-Delivery": str(uuid.uuid4()),
                                    "X-Hub-Signature-256": signature,
                                    "Content-Type": "application/json",
                                    "User-Agent": "GitHub-Hookshot/bench",
                                },
                            )
                            if response.status_code != expected:
                                return str(response.status_code)
                            if expected == 202 and response.json().get("outcome") != "started":
                                return f"202 {response.json().get('outcome')}"  # accepted, yet no new workflow
                            return None

                        return one

                    # The ceiling signals the RepoEvent the edge would have built from the same payload.
                    event = parse_event("issues", json.loads(_payload(template, f"b{run}c", 1)))
                    signal = await repo_event(event, json.loads(_payload(template, f"b{run}c", 1)), "bench", blobs)

                    def start_directly(owner: str) -> Callable[[int], Awaitable[str | None]]:
                        async def one(i: int) -> str | None:
                            repo = f"{owner}/{signal.repo.split('/')[1]}"
                            arg = signal.model_copy(
                                update={"delivery_id": str(uuid.uuid4()), "repo": repo, "number": i + 1}
                            )
                            handle = await client.start_workflow(
                                ISSUE_WORKFLOW,
                                IssueWorkflowInput(repo=repo, number=i + 1),
                                id=issue_workflow_id(repo, i + 1),
                                task_queue=settings.task_queue,
                                start_signal=GITHUB_EVENT_SIGNAL,
                                start_signal_args=[arg],
                                # What the edge's Starter sends for issues.opened.
                                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                                search_attributes=TypedSearchAttributes(
                                    [
                                        SearchAttributePair(SHOPFLOOR_REPO, repo),
                                        SearchAttributePair(SHOPFLOOR_ISSUE, i + 1),
                                    ]
                                ),
                            )
                            started = getattr(getattr(handle, "_start_workflow_response", None), "started", True)
                            return None if started else "signalled"  # an existing run: not a new workflow

                        return one

                    # One warm-up round per row (connections, imports, caches), not measured.
                    warm = min(concurrency, requests)
                    await _drive(warm, concurrency, deliver(f"w{run}e", 202))
                    await _drive(warm, concurrency, start_directly(f"w{run}c"))
                    await _drive(warm, concurrency, deliver(f"w{run}r", 401, wrong_signature=True))

                    rows.append(
                        _row(
                            "signed deliveries that start workflows (edge, HTTP)",
                            requests,
                            concurrency,
                            202,
                            await _drive(requests, concurrency, deliver(f"b{run}e", 202)),
                        )
                    )
                    rows.append(
                        _row(
                            "bare start_workflow loop (ceiling, no HTTP)",
                            requests,
                            concurrency,
                            None,
                            await _drive(requests, concurrency, start_directly(f"b{run}c")),
                        )
                    )
                    rows.append(
                        _row(
                            "deliveries rejected by signature (edge, HTTP)",
                            requests,
                            concurrency,
                            401,
                            await _drive(requests, concurrency, deliver(f"b{run}r", 401, wrong_signature=True)),
                        )
                    )
            finally:
                server.should_exit = True
                await serving
        finally:
            temporal.stop()
    notes = [
        (
            "One Temporal dev server (in memory, no UI) started by the bench; no worker runs: "
            "signal-with-start creates each workflow and its first task waits on the task queue."
        ),
        (
            "The edge is the real app (create_app) served by uvicorn in the bench's own process and event loop, "
            "so the load generator (httpx) shares its CPU: edge figures are a lower bound."
        ),
        (
            "Each delivery is a distinct issue (own workflow id, own delivery id); 'answered as expected' counts 202 "
            "with outcome 'started', the ceiling counts starts that created a workflow, rejections count 401."
        ),
        (
            "Rows run one after another (edge, ceiling, rejected), each after an unmeasured warm-up of one "
            "concurrency's worth of requests; requests/s is requests over the row's wall time."
        ),
        (
            f"The edge logs every delivery (log level {settings.log_level}); "
            f"Temporal, edge and load generator share the machine (1-minute load average at start: {load_before:.2f})."
        ),
    ]
    return WebhookBenchReport(
        machine=machine(), payload=source, payload_bytes=len(_payload(template, f"b{run}e", 1)), rows=rows, notes=notes
    )
