"""A worker's HTTP endpoint — GET /metrics (Prometheus), /healthz, /readyz — with the task
queue's backlog polled from Temporal, and the Temporal SDK's own metrics on a port of their own.

The endpoint is a tiny Starlette app under uvicorn on the worker's own event loop, so /healthz
answering proves that loop answers. What the activities count is in `activities/metrics.py`;
this module adds the backlog gauges to the same registry.

The SDK's metrics (Rust core: polls, task latencies, slots, RPCs) come from its own Prometheus
exporter on `worker_sdk_metrics_port`. Why not bridged into our page through a MetricBuffer:
that would re-implement the core's aggregation (histogram buckets, label sets) in Python on the
worker's event loop; the core's exporter does it as Temporal documents it, for one more scrape
target. A Runtime's metrics are fixed when it is created, before a client connects on it, so the
worker connects a client of its own on that Runtime (`with_sdk_metrics`); the CLI's and the
tests' clients keep the plain Runtime of `shopfloor.temporal.connect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta
from typing import Any

import structlog
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RPCError, RPCStatusCode, ServiceClient
from temporalio.worker import Worker

from shopfloor.activities.metrics import REGISTRY
from shopfloor.errors import UsageError
from shopfloor.http_server import EmbeddedServer
from shopfloor.models.ledger import LEDGER_QUERY, LedgerView, ledger_id
from shopfloor.settings import Settings

log = structlog.get_logger(__name__)

BACKLOG_EVERY_S = 15.0
READY_CHECK_S = 2.0
QUEUE_TYPES = {"workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY}

# As Temporal reports them; every worker of a queue exports the same figures, so dashboards take
# max() by task_queue and type.
_QUEUE_LABELS = ["task_queue", "type"]
BACKLOG = Gauge(
    "shopfloor_task_queue_backlog",
    "Tasks waiting in the task queue (Temporal's approximate backlog count; sticky queues excluded).",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
BACKLOG_AGE = Gauge(
    "shopfloor_task_queue_backlog_age_seconds",
    "Age of the oldest task waiting in the task queue.",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
ADD_RATE = Gauge(
    "shopfloor_task_queue_add_rate",
    "Tasks per second added to the task queue (last 30 s).",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
DISPATCH_RATE = Gauge(
    "shopfloor_task_queue_dispatch_rate",
    "Tasks per second handed to workers from the task queue (last 30 s).",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
POLLERS = Gauge(
    "shopfloor_task_queue_pollers",
    "Workers (poller identities) Temporal saw polling the task queue recently.",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
BACKLOG_POLLED = Gauge(
    "shopfloor_task_queue_polled_timestamp_seconds",
    "When the task queue's figures were last read from Temporal (Unix time).",
    ["task_queue"],
    registry=REGISTRY,
)


# The spend ledger (workflows/ledger.py), read with its `ledger` query; repo "*" is the total.
LEDGER_RUNS = Gauge(
    "shopfloor_ledger_runs",
    "Runs the spend ledger counted this UTC day or month.",
    ["repo", "period"],
    registry=REGISTRY,
)
LEDGER_COST = Gauge(
    "shopfloor_ledger_cost_usd",
    "Spend the ledger counted this UTC day or month, in USD.",
    ["repo", "period"],
    registry=REGISTRY,
)
LEDGER_RUNNING = Gauge(
    "shopfloor_ledger_running", "Pipelines the ledger admitted that have not ended.", ["repo"], registry=REGISTRY
)
LEDGER_WAITING = Gauge(
    "shopfloor_ledger_waiting", "Pipelines waiting for the ledger (a budget or a queue).", ["repo"], registry=REGISTRY
)


async def poll_ledger(client: Client, task_queue: str, every_s: float = BACKLOG_EVERY_S) -> None:
    """Read the spend ledger every `every_s` until cancelled: what it counted, what runs and
    what waits. No ledger yet (no run has asked one): nothing is set."""
    handle = client.get_workflow_handle(ledger_id(task_queue))
    while True:
        try:
            view = await handle.query(LEDGER_QUERY, result_type=LedgerView, rpc_timeout=timedelta(seconds=10))
            for scope in (view.total, *view.repos):
                repo = "*" if scope is view.total else scope.repo
                for period, usage in (("day", scope.today), ("month", scope.month)):
                    LEDGER_RUNS.labels(repo=repo, period=period).set(usage.runs)
                    LEDGER_COST.labels(repo=repo, period=period).set(usage.cost_usd)
                LEDGER_RUNNING.labels(repo=repo).set(scope.running)
                LEDGER_WAITING.labels(repo=repo).set(len(scope.queued))
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                log.warning("ledger not read", error=exc.message[:200])
        except Exception as exc:  # noqa: BLE001 - a gauge going stale must not stop the worker
            log.warning("ledger not read", error=str(exc)[:200])
        await asyncio.sleep(every_s)


def exported_names(registry: CollectorRegistry = REGISTRY) -> set[str]:
    """Every series name the registry can export, children created or not (a counter `x` is
    scraped as `x_total` and `x_created`; a histogram as `x_bucket`, `x_sum`, `x_count`)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    return {family.name + s for family in registry.collect() for s in suffixes.get(family.type, ("",))}


async def poll_backlog(client: Client, task_queue: str, every_s: float = BACKLOG_EVERY_S) -> None:
    """Read the queue's backlog and pollers from Temporal every `every_s` until cancelled. A
    server that reports no stats (older than 1.25, or not asked for) leaves the backlog gauges at 0
    and the pollers set; a failed read is logged and tried again next time."""
    while True:
        try:
            for name, kind in QUEUE_TYPES.items():
                described = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace,
                        task_queue=TaskQueue(name=task_queue),
                        task_queue_type=kind,
                        report_stats=True,
                    ),
                    timeout=timedelta(seconds=10),
                )
                stats = described.stats
                labels = {"task_queue": task_queue, "type": name}
                BACKLOG.labels(**labels).set(stats.approximate_backlog_count)
                BACKLOG_AGE.labels(**labels).set(stats.approximate_backlog_age.ToTimedelta().total_seconds())
                ADD_RATE.labels(**labels).set(stats.tasks_add_rate)
                DISPATCH_RATE.labels(**labels).set(stats.tasks_dispatch_rate)
                POLLERS.labels(**labels).set(len({p.identity for p in described.pollers}))
            BACKLOG_POLLED.labels(task_queue=task_queue).set_to_current_time()
        except Exception as exc:  # noqa: BLE001 - a gauge going stale must not stop the worker
            log.warning("task queue backlog not read", task_queue=task_queue, error=str(exc)[:200])
        await asyncio.sleep(every_s)


def metrics_app(client: Client, worker: Worker) -> Starlette:
    """/metrics, /healthz (this event loop answers) and /readyz (the worker runs and Temporal
    answers it; 503 with the reason otherwise)."""

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_: Request) -> Response:
        if not worker.is_running or worker.is_shutdown:
            return PlainTextResponse("not ready: the worker is not running\n", status_code=503)
        try:
            healthy = await client.service_client.check_health(timeout=timedelta(seconds=READY_CHECK_S))
        except Exception as exc:  # noqa: BLE001 - any failure to answer is "not ready", said as such
            return PlainTextResponse(f"not ready: Temporal does not answer ({str(exc)[:200]})\n", status_code=503)
        if not healthy:
            return PlainTextResponse("not ready: Temporal's workflow service is not serving\n", status_code=503)
        return PlainTextResponse("ok\n")

    routes = [Route("/metrics", metrics), Route("/healthz", healthz), Route("/readyz", readyz)]
    return Starlette(routes=routes)


def _bind(host: str, port: int, what: str, setting: str, *, explicit: bool) -> socket.socket | None:
    """A listening socket, bound now so a taken port is one clear line before the worker starts:
    an error for a port the operator chose, a warning (and None) for the default one, which a
    second worker on the machine (or `shopfloor demo` beside `shopfloor dev`) may hold."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        message = f"port {port} on {host} ({what}) cannot be used ({exc.strerror or exc})"
        if explicit:
            raise UsageError(f"{message}: free it or set {setting} to another port (0: none)") from None
        log.warning(f"{message}; running without it (set {setting} to choose another, 0 to silence this)")
        return None


_sdk_runtimes: dict[str, Runtime] = {}


def _sdk_runtime(bind_address: str) -> Runtime:
    """One Runtime per exporter address in the process (its exporter keeps the port until exit);
    its logs forwarded as shopfloor.temporal's Runtime does."""
    if bind_address not in _sdk_runtimes:
        _sdk_runtimes[bind_address] = Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(
                    filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                    forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
                ),
                # Prometheus' conventions: counters end in _total, durations are seconds.
                metrics=PrometheusConfig(
                    bind_address=bind_address, counters_total_suffix=True, durations_as_seconds=True
                ),
            )
        )
    return _sdk_runtimes[bind_address]


async def with_sdk_metrics(client: Client, settings: Settings) -> Client:
    """`client` again on a Runtime that exports the SDK's metrics at `worker_sdk_metrics_port`
    (same server, namespace, TLS and converter), or `client` itself when that port is 0 or (the
    default one) taken."""
    port = settings.worker_sdk_metrics_port
    if port == 0:
        return client
    host = settings.worker_metrics_host
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if address not in _sdk_runtimes:
        probe = _bind(
            host,
            port,
            "the Temporal SDK's metrics",
            "SHOPFLOOR_WORKER_SDK_METRICS_PORT",
            explicit="worker_sdk_metrics_port" in settings.model_fields_set,
        )
        if probe is None:
            return client
        probe.close()  # free again for the exporter, which binds it itself
        try:
            runtime = _sdk_runtime(address)
        except ValueError as exc:  # taken between the probe and the exporter
            raise UsageError(f"the Temporal SDK's metrics cannot serve on {address}: {exc}") from None
    else:
        runtime = _sdk_runtimes[address]
    service = await ServiceClient.connect(dataclasses.replace(client.service_client.config, runtime=runtime))
    config = client.config()
    config["service_client"] = service
    return Client(**config)


def bind_worker_metrics(settings: Settings) -> socket.socket | None:
    """The endpoint's socket, bound before the worker starts (None: port 0, or the default port
    taken); raises UsageError for a port set that is taken."""
    if settings.worker_metrics_port == 0:
        return None
    return _bind(
        settings.worker_metrics_host,
        settings.worker_metrics_port,
        "the worker's metrics and health",
        "SHOPFLOOR_WORKER_METRICS_PORT",
        explicit="worker_metrics_port" in settings.model_fields_set,
    )


@contextlib.asynccontextmanager
async def serving_worker_metrics(
    client: Client, settings: Settings, worker: Worker, sock: socket.socket | None
) -> AsyncIterator[None]:
    """Serve the worker's endpoint on `sock` (`bind_worker_metrics`) and poll its queue's backlog
    while the block runs; both stop, and the socket is closed, when it ends. No socket: neither."""
    if sock is None:
        yield
        return
    config = uvicorn.Config(
        metrics_app(client, worker), log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2
    )
    server = EmbeddedServer(config)
    jobs = [
        asyncio.create_task(server.serve(sockets=[sock])),
        asyncio.create_task(poll_backlog(client, settings.task_queue)),
        asyncio.create_task(poll_ledger(client, settings.task_queue)),
    ]
    port = sock.getsockname()[1]
    log.info("worker metrics", url=f"http://{settings.worker_metrics_host}:{port}", paths="/metrics /healthz /readyz")
    try:
        yield
    finally:
        server.should_exit = True
        for job in jobs[1:]:
            job.cancel()
        await _settle(jobs)
        sock.close()


async def _settle(jobs: Iterable[asyncio.Task[Any]]) -> None:
    for job in jobs:
        try:
            await job
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - the worker's own outcome is what its caller hears
            log.warning("worker metrics stopped with an error", error=str(exc)[:200])
