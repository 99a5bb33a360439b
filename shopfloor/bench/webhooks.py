"""`shopfloor bench webhooks`: the webhook edge against a bare loop of the Temporal call it makes.

Three rows from one run, all against one in-memory Temporal dev server:
- signed deliveries of a real `issues.opened` payload over real HTTP to the real edge app (uvicorn),
  each a distinct issue, so each one signal-with-starts a new IssueWorkflow;
- the ceiling: the very signal-with-start the edge makes for such a delivery (built by the edge's
  own routing and builder: same policies, search attributes, summary and signal payload), called
  directly with the Temporal client, without HTTP, verification or parsing;
- deliveries with a wrong signature, answered 401 before anything else happens.

The load generator stands in for GitHub, whose costs are not the edge's: every delivery of a row is
built and signed before the row starts, and sent over keep-alive HTTP/1.1 connections (one per
request in flight) framed and parsed by h11. Each row reports CPU per request of the bench's
process (edge, generator and Temporal client share it), the generator's own part of it, and the
Temporal server's, so the edge's cost can be read apart from the load that drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import platform
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import uvicorn
from pydantic import BaseModel, Field, SecretStr
from temporalio.client import Client

from shopfloor.blobs import FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.errors import UsageError
from shopfloor.github_signature import sign
from shopfloor.http_server import EmbeddedServer
from shopfloor.models.github_events import parse_event
from shopfloor.settings import Settings
from shopfloor.temporal import SignalWithStart, connect, ensure_search_attributes, send_signal_with_start
from shopfloor.webhooks.app import create_app
from shopfloor.webhooks.delivered_bodies import body_digest
from shopfloor.webhooks.github import start_for
from shopfloor.webhooks.github_event_kinds import route, to_repo_event

# A real delivery (GitHub's docs' example), among a source checkout's test fixtures.
FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "github" / "webhooks" / "issues.opened.json"
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
    # CPU per request over the row (None where the platform cannot say):
    cpu_ms_per_request: float  # the bench's process: edge, load generator and Temporal client together
    generator_cpu_ms_per_request: float = 0.0  # of which the load generator (0: the ceiling has none)
    temporal_cpu_ms_per_request: float | None = None  # the Temporal dev server's process
    # Jobs handed to the event loop's default executor per request (blob store calls, parsing off
    # the loop): each a thread round trip; a count, so unlike CPU figures the load does not move it.
    thread_jobs_per_request: float = 0.0

    @property
    def generator_share(self) -> float:
        """The load generator's part of the bench process's CPU in this row (0..1)."""
        return self.generator_cpu_ms_per_request / self.cpu_ms_per_request if self.cpu_ms_per_request else 0.0


class WebhookBenchReport(BaseModel):
    machine: str
    payload: str
    payload_bytes: int
    http_protocol: str = ""  # uvicorn's HTTP/1.1 implementation serving the edge (h11 or httptools)
    rows: list[WebhookRow]
    notes: list[str]

    def markdown(self) -> str:
        lines = [
            "| | requests | concurrency | answered as expected | errors | requests/s | p50 ms | p99 ms "
            "| CPU ms/request (bench process) | of which load generator | Temporal server CPU ms/request "
            "| thread round trips/request |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            errors = ", ".join(f"{k}: {v}" for k, v in sorted(r.errors.items())) or "none"
            expected = f" ({r.expected_status})" if r.expected_status else ""
            temporal = f"{r.temporal_cpu_ms_per_request:.2f}" if r.temporal_cpu_ms_per_request is not None else "n/a"
            generator = (
                f"{r.generator_cpu_ms_per_request:.2f} ({r.generator_share:.0%})" if r.expected_status else "none"
            )
            lines.append(
                f"| {r.name} | {r.requests} | {r.concurrency} | {r.ok}{expected} | {errors} "
                f"| {r.rps:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.cpu_ms_per_request:.2f} | {generator} "
                f"| {temporal} | {r.thread_jobs_per_request:.2f} |"
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


def _children_cpu_s() -> float | None:
    """CPU seconds so far of this process's child processes (the Temporal dev server), from /proc;
    None where there is no /proc."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        pids = {int(pid) for f in Path("/proc/self/task").glob("*/children") for pid in f.read_text().split()}
        total = 0.0
        for pid in pids:
            with_name = Path(f"/proc/{pid}/stat").read_text()
            fields = with_name.rsplit(")", 1)[1].split()  # after "pid (name)": state, ppid, ...
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        return total
    except (OSError, ValueError, IndexError):
        return None


class GeneratorClock:
    """CPU seconds the load generator spent: the thread time of its own synchronous parts (framing
    a request, parsing the answer) on the event loop it shares with the edge."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def add_since(self, start: float) -> None:
        self.seconds += time.thread_time() - start


class CountingExecutor(ThreadPoolExecutor):
    """An event loop's default executor that notes each job handed to it (`asyncio.to_thread` hands
    it `partial(context.run, function, ...)`: the name noted is the function's)."""

    def __init__(self) -> None:
        super().__init__(thread_name_prefix="asyncio")
        self.jobs: list[str] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        inner = fn.args[0] if isinstance(fn, functools.partial) and fn.args else fn
        self.jobs.append(getattr(inner, "__qualname__", repr(inner)))
        return super().submit(fn, *args, **kwargs)


@contextlib.contextmanager
def counted_thread_jobs() -> Iterator[CountingExecutor]:
    """The running loop's default executor counts its jobs until the block ends; then a new plain
    one takes over."""
    loop = asyncio.get_running_loop()
    counting = CountingExecutor()
    loop.set_default_executor(counting)
    try:
        yield counting
    finally:
        loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio"))
        counting.shutdown(wait=False)


@dataclass(frozen=True)
class Delivery:
    """A delivery as GitHub sends it, built and signed before its row starts."""

    body: bytes
    headers: list[tuple[bytes, bytes]]


class Sender:
    """One keep-alive HTTP/1.1 connection of the load generator, as one of GitHub's senders: a
    request, its whole answer, the next request. A connection the server closed is opened again."""

    def __init__(self, host: str, port: int, clock: GeneratorClock) -> None:
        self.host, self.port, self.clock = host, port, clock
        self._host_header = f"{host}:{port}".encode()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._http = h11.Connection(h11.CLIENT)

    async def post(self, target: bytes, delivery: Delivery) -> tuple[int, bytes]:
        """(status, body) of the answer to `delivery` posted to `target`."""
        if self._stream is None or self._stream[0].at_eof() or self._http.our_state is not h11.IDLE:
            await self.close()
            self._stream = await asyncio.open_connection(self.host, self.port)
            self._http = h11.Connection(h11.CLIENT)
        reader, writer = self._stream
        http = self._http
        started = time.thread_time()
        headers = [
            (b"host", self._host_header),
            (b"content-length", str(len(delivery.body)).encode()),
            *delivery.headers,
        ]
        writer.write(
            http.send(h11.Request(method=b"POST", target=target, headers=headers))
            + http.send(h11.Data(data=delivery.body))
            + http.send(h11.EndOfMessage())
        )
        self.clock.add_since(started)
        await writer.drain()
        status, chunks = 0, []
        while True:
            started = time.thread_time()
            event = http.next_event()
            self.clock.add_since(started)
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                started = time.thread_time()
                http.receive_data(data)  # b"": the server closed; h11 says so next
                self.clock.add_since(started)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed or PAUSED mid-answer
                await self.close()
                raise ConnectionError("the edge closed the connection before its answer was complete")
        started = time.thread_time()
        http.start_next_cycle()
        self.clock.add_since(started)
        return status, b"".join(chunks)

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            try:
                await stream[1].wait_closed()
            except OSError:
                pass  # already reset by the server


async def _drive(
    n: int, concurrency: int, one: Callable[[int, int], Awaitable[str | None]]
) -> tuple[float, list[float], Counter[str]]:
    """Call `one(i, lane)` for i in 0..n-1 with `concurrency` lanes in flight; `one` returns None
    when the answer was the expected one, else a short label of what came back instead."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    next_i = iter(range(n))

    async def lane(number: int) -> None:
        for i in next_i:  # a shared iterator: each lane takes the next request when it is free
            start = time.perf_counter()
            try:
                problem = await one(i, number)
            except Exception as exc:  # noqa: BLE001 - a failed request is counted, not fatal
                problem = type(exc).__name__
            latencies.append((time.perf_counter() - start) * 1000)
            if problem is not None:
                errors[problem] += 1

    start = time.perf_counter()
    await asyncio.gather(*(lane(k) for k in range(min(concurrency, n))))
    return time.perf_counter() - start, sorted(latencies), errors


@dataclass
class _Measured:
    seconds: float
    latencies_ms: list[float]
    errors: Counter[str]
    cpu_s: float
    generator_cpu_s: float
    temporal_cpu_s: float | None
    thread_jobs: int


async def _measure(
    n: int,
    concurrency: int,
    one: Callable[[int, int], Awaitable[str | None]],
    clock: GeneratorClock,
    executor: CountingExecutor,
    settle: Callable[[], Awaitable[None]],
) -> _Measured:
    await settle()  # the warm-up's work after its answers (markers) is not this row's
    cpu, generator, temporal, jobs = time.process_time(), clock.seconds, _children_cpu_s(), len(executor.jobs)
    seconds, latencies, errors = await _drive(n, concurrency, one)
    await settle()  # this row's is: its seconds end at the last answer, its CPU and counts after it
    temporal_after = _children_cpu_s()
    return _Measured(
        seconds=seconds,
        latencies_ms=latencies,
        errors=errors,
        cpu_s=time.process_time() - cpu,
        generator_cpu_s=clock.seconds - generator,
        temporal_cpu_s=temporal_after - temporal if temporal is not None and temporal_after is not None else None,
        thread_jobs=len(executor.jobs) - jobs,
    )


def _row(name: str, n: int, concurrency: int, expected: int | None, m: _Measured) -> WebhookRow:
    return WebhookRow(
        name=name,
        requests=n,
        concurrency=concurrency,
        expected_status=expected,
        ok=n - sum(m.errors.values()),
        errors=dict(m.errors),
        seconds=round(m.seconds, 3),
        rps=n / m.seconds if m.seconds else 0.0,
        p50_ms=_percentile(m.latencies_ms, 0.50),
        p99_ms=_percentile(m.latencies_ms, 0.99),
        cpu_ms_per_request=m.cpu_s * 1000 / n,
        generator_cpu_ms_per_request=m.generator_cpu_s * 1000 / n,
        temporal_cpu_ms_per_request=m.temporal_cpu_s * 1000 / n if m.temporal_cpu_s is not None else None,
        thread_jobs_per_request=m.thread_jobs / n,
    )


def _payload(template: dict[str, Any], owner: str, number: int) -> bytes:
    """The template as issue `number` of `<owner>/<repo>`: a workflow id of its own."""
    payload = json.loads(json.dumps(template))
    repo = payload["repository"]
    repo["owner"]["login"] = owner
    repo["full_name"] = f"{owner}/{repo['name']}"
    payload["issue"]["number"] = number
    return json.dumps(payload).encode()


def _deliveries(template: dict[str, Any], owner: str, n: int, secret: bytes) -> list[Delivery]:
    """`n` signed `issues` deliveries, issue 1..n of `<owner>/<repo>`."""
    out = []
    for i in range(n):
        body = _payload(template, owner, i + 1)
        headers = [
            (b"x-github-event", b"issues"),
            (b"x-github-delivery", str(uuid.uuid4()).encode()),
            (b"x-hub-signature-256", sign(secret, body).encode()),
            (b"content-type", b"application/json"),
            (b"user-agent", b"GitHub-Hookshot/bench"),
        ]
        out.append(Delivery(body=body, headers=headers))
    return out


async def ceiling_starts(
    template: dict[str, Any], owner: str, n: int, settings: Settings, blobs: FileBlobStore
) -> list[SignalWithStart]:
    """What the edge hands Temporal for the same `n` deliveries: each routed and built by the
    edge's own functions, its signal's text snapshotted and the body's digest set as the edge does."""
    starts = []
    signal = None
    for i in range(n):
        body = _payload(template, owner, i + 1)
        event = parse_event("issues", json.loads(body))
        plan = route(event, bot_login=settings.github_bot_login, trigger_label=settings.trigger_label)
        if len(plan.targets) != 1:
            raise UsageError(
                f"the payload must start one workflow, as issues.opened does ({plan.ignored or 'several'})"
            )
        if signal is None:  # every delivery carries the same text: one snapshot serves them all
            signal = await to_repo_event(event, "bench", blobs)
        arg = signal.model_copy(
            update={"delivery_id": str(uuid.uuid4()), "number": i + 1, "body_digest": body_digest(body)}
        )
        starts.append(start_for(plan.targets[0], arg))
    return starts


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
    with tempfile.TemporaryDirectory(prefix="shopfloor-bench-webhooks-") as tmp, counted_thread_jobs() as executor:
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

            port = free_port()
            app = create_app(get_client, settings, blobs)
            server, serving = await _serve(app, port)

            async def settle() -> None:
                # The edge stores each accepted body's marker after its answer: let them land.
                for _ in range(3000):
                    if app.state.deps.bodies.pending == 0:
                        return
                    await asyncio.sleep(0.01)

            http_protocol = getattr(server.config, "http_protocol_class", None)
            clock = GeneratorClock()
            senders = [Sender("127.0.0.1", port, clock) for _ in range(concurrency)]
            try:

                async def deliver(owner: str, n: int, expected: int) -> Callable[[int, int], Awaitable[str | None]]:
                    secret = SECRET if expected == 202 else b"not-" + SECRET
                    batch = _deliveries(template, owner, n, secret)

                    async def one(i: int, lane: int) -> str | None:
                        status, answer = await senders[lane].post(b"/webhooks/github", batch[i])
                        if status != expected:
                            return str(status)
                        if expected == 202:
                            started = time.thread_time()
                            outcome = json.loads(answer).get("outcome")
                            clock.add_since(started)
                            if outcome != "started":
                                return f"202 {outcome}"  # accepted, yet no new workflow
                        return None

                    return one

                async def start_directly(owner: str, n: int, _: int) -> Callable[[int, int], Awaitable[str | None]]:
                    batch = await ceiling_starts(template, owner, n, settings, blobs)

                    async def one(i: int, lane: int) -> str | None:
                        started = await send_signal_with_start(client, settings.task_queue, batch[i])
                        return None if started else "signalled"  # an existing run: not a new workflow

                    return one

                async def measured(
                    name: str,
                    tag: str,
                    expected: int | None,
                    prepare: Callable[[str, int, int], Awaitable[Callable[[int, int], Awaitable[str | None]]]],
                ) -> WebhookRow:
                    # An unmeasured warm-up of one concurrency's worth (connections, imports, caches) right
                    # before the row, so its connections are fresh; each row's requests are built first.
                    warm = min(concurrency, requests)
                    await _drive(warm, concurrency, await prepare(f"w{run}{tag}", warm, expected or 0))
                    one = await prepare(f"b{run}{tag}", requests, expected or 0)
                    return _row(
                        name,
                        requests,
                        concurrency,
                        expected,
                        await _measure(requests, concurrency, one, clock, executor, settle),
                    )

                rows.append(await measured("signed deliveries that start workflows (edge, HTTP)", "e", 202, deliver))
                rows.append(await measured("bare start_workflow loop (ceiling, no HTTP)", "c", None, start_directly))
                rows.append(await measured("deliveries rejected by signature (edge, HTTP)", "r", 401, deliver))
            finally:
                for sender in senders:
                    await sender.close()
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
            "The edge is the real app (create_app) served by uvicorn "
            f"({http_protocol.__name__ if http_protocol else 'HTTP/1.1'}) in the bench's own process and event "
            "loop; the ceiling sends the very signal-with-start the edge builds for each delivery (its routing, "
            "builder, summary, search attributes and signal payload), so the two differ only by the edge's work."
        ),
        (
            "The load generator stands in for GitHub: each row's deliveries are built and signed before the row "
            "starts and sent over one keep-alive HTTP/1.1 connection per request in flight (h11 on asyncio "
            "streams). It shares the bench process's CPU: 'of which load generator' is its own thread time "
            "(framing requests, parsing answers), measured; the rest of that column is the edge's and the "
            "Temporal client's."
        ),
        (
            "Each delivery is a distinct issue (own workflow id, own delivery id); 'answered as expected' counts 202 "
            "with outcome 'started', the ceiling counts starts that created a workflow, rejections count 401."
        ),
        (
            "Rows run one after another (edge, ceiling, rejected), each right after an unmeasured warm-up of one "
            "concurrency's worth of requests; requests/s is requests over the row's wall time; CPU figures are "
            "the bench process's and the Temporal server's CPU time over the row, per request, counted until the "
            "markers the edge stores after its answers have landed; thread round trips are the jobs handed to the "
            "event loop's default executor (blob store calls, markdown parsed off the loop), per request."
        ),
        (
            f"The edge logs every delivery (log level {settings.log_level}); "
            f"Temporal, edge and load generator share the machine (1-minute load average at start: {load_before:.2f})."
        ),
    ]
    return WebhookBenchReport(
        machine=machine(),
        payload=source,
        payload_bytes=len(_payload(template, f"b{run}e", 1)),
        http_protocol=http_protocol.__name__ if http_protocol else "",
        rows=rows,
        notes=notes,
    )
