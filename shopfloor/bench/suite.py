"""`shopfloor bench`: every benchmark in one run, one table, each figure beside its reference.

| rows | measured | reference |
|---|---|---|
| agent loop, per step (bench.loop) | the durable loop (Temporal) | the same activities in memory |
| long run, per step (bench.loop) | a long run in memory | the short run in memory |
| history bytes per step (bench.history) | a run of N steps, all its executions | the shortest run, per step |
| concurrent runs (bench.concurrency) | N runs at once, wall time | S × latency + one in-memory run |
| webhook throughput (bench.webhooks) | the edge over HTTP, requests/s | a bare start_workflow loop |
| resume after kill (bench.resume) | SIGKILL → the step recorded | the model heartbeat timeout |

Each benchmark starts its own Temporal dev server (in memory, no UI) and fake model server, so
one does not load the next; they run one after another, never at the same time.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from shopfloor.bench.concurrency import ConcurrencyReport, bench_concurrency
from shopfloor.bench.history import HistoryReport, bench_history
from shopfloor.bench.loop import LoopReport, bench_loop
from shopfloor.bench.machine_speed import MachineSpeed, SpeedWatch
from shopfloor.bench.resume import MODEL_RETRY_INTERVAL_S, ResumeReport, bench_resume
from shopfloor.bench.webhooks import WebhookBenchReport, bench_webhooks, machine

GROUPS = ("loop", "history", "concurrency", "webhooks", "resume")


class SuiteParams(BaseModel):
    loop_steps: int = 20
    loop_latencies_ms: list[int] = Field(default_factory=lambda: [0, 500])
    loop_long_steps: int = 500  # in memory, against the loop_steps figure (0 ms latency)
    history_steps: list[int] = Field(default_factory=lambda: [10, 100, 500])
    concurrent_runs: int = 100
    concurrent_steps: int = 20
    concurrent_latency_ms: int = 1000
    webhook_requests: int = 500
    webhook_concurrency: int = 32
    resume_latency_ms: int = 2000
    resume_heartbeat_s: float = 5.0
    resume_steps: int = 5
    resume_kill_in_step: int = 3


# CI-sized: every row, in a minute or two on a small machine.
QUICK = SuiteParams(
    loop_steps=3,
    loop_long_steps=12,
    history_steps=[3, 6, 12],
    concurrent_runs=5,
    concurrent_steps=3,
    concurrent_latency_ms=200,
    webhook_requests=30,
    webhook_concurrency=4,
    resume_latency_ms=500,
)


class BenchRow(BaseModel):
    key: str  # stable, for scripts: loop_0ms, history_500_steps, concurrent_runs, webhooks, resume_after_kill
    what: str
    unit: str
    measured_label: str
    measured: float
    reference_label: str
    reference: float
    difference: float  # measured - reference
    ratio: float  # measured / reference
    detail: str = ""
    digits: int = 1  # how the markdown rounds the figures

    @classmethod
    def of(cls, *, measured: float, reference: float, **fields: Any) -> BenchRow:
        """The row with its difference and ratio worked out; `fields` are the other columns."""
        ratio = measured / reference if reference else math.inf
        return cls(measured=measured, reference=reference, difference=measured - reference, ratio=ratio, **fields)


class SuiteReport(BaseModel):
    machine: str
    quick: bool
    params: SuiteParams
    load_average_start: float  # 1-minute load average: other work on the machine skews every row
    load_average_end: float
    speed: MachineSpeed | None = None  # the machine's speed over the run, to compare runs by
    seconds: dict[str, float]  # wall time of each benchmark
    rows: list[BenchRow]
    reports: dict[str, Any] = Field(default_factory=dict)  # each benchmark's own full report, by name
    errors: dict[str, str] = Field(default_factory=dict)  # benchmark -> why it produced no rows
    notes: list[str]

    def header(self) -> str:
        size = "CI-sized parameters (--quick)" if self.quick else "full parameters"
        total = sum(self.seconds.values())
        return (
            f"shopfloor bench on {self.machine}; {size}; 1-minute load average {self.load_average_start:.2f} "
            f"at start, {self.load_average_end:.2f} at end; {total:.0f} s"
            + (f"; {self.speed.describe()}" if self.speed else "")
        )

    def markdown(self) -> str:
        lines = [
            self.header(),
            "",
            "| benchmark | measured | reference | measured − reference | measured / reference |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            d = r.digits
            lines.append(
                f"| {r.what} | {r.measured:.{d}f} {r.unit} ({r.measured_label}) | {r.reference:.{d}f} {r.unit} "
                f"({r.reference_label}) | {r.difference:+.{d}f} {r.unit} | {r.ratio:.2f}× |"
            )
        lines += ["", "Details:", ""]
        lines += [f"- {r.what}: {r.detail}" for r in self.rows if r.detail]
        if self.errors:
            lines += ["", "Failed:", ""]
            lines += [f"- {name}: {why}" for name, why in self.errors.items()]
        lines += ["", "Notes:", ""]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines)


def loop_rows(report: LoopReport) -> list[BenchRow]:
    rows = [
        BenchRow.of(
            key=f"loop_{r.model_latency_ms}ms",
            what=f"agent loop time per step, {r.model_latency_ms} ms model latency ({r.steps} steps)",
            unit="ms/step",
            measured_label="durable, Temporal",
            measured=r.durable_ms_per_step,
            reference_label="in memory",
            reference=r.memory_ms_per_step,
            detail=f"{r.breakdown.describe()}; history {r.history_bytes_per_step} bytes/step",
        )
        for r in report.rows
    ]
    zero = next((r for r in report.rows if r.model_latency_ms == 0), None)
    if (floor := report.floor) is not None and zero is not None:
        rows.append(
            BenchRow.of(
                key="loop_temporal_share_0ms",
                what=f"Temporal's share of a step, 0 ms model latency ({zero.steps} steps)",
                unit="ms/step",
                measured_label="durable − in memory",
                measured=zero.overhead_ms_per_step,
                reference_label="Temporal's floor",
                reference=floor.ms_per_step,
                detail=(
                    "the floor: a workflow of the same shape (a step's activity and one local activity, no-op "
                    "bodies) on the same server and worker settings; what the share exceeds it by is shopfloor's; "
                    f"an activity alone, the least a step with a durable model call costs: "
                    f"{floor.activity_only_ms_per_step:.1f} ms/step"
                ),
            )
        )
    if long := report.long_run:
        rows.append(
            BenchRow.of(
                key=f"loop_memory_{long.steps}_steps",
                what=f"agent step in memory, 0 ms model latency, {long.steps}-step run",
                unit="ms/step",
                measured_label=f"{long.steps} steps",
                measured=long.memory_ms_per_step,
                reference_label=f"{long.reference_steps} steps",
                reference=long.reference_ms_per_step,
                detail=long.breakdown.describe(),
            )
        )
    return rows


def history_rows(report: HistoryReport) -> list[BenchRow]:
    base = report.rows[0]
    return [
        BenchRow.of(
            key=f"history_{r.steps}_steps",
            what=f"history bytes per step, {r.steps}-step run",
            unit="bytes/step",
            measured_label=f"{r.steps} steps",
            measured=r.bytes_per_step,
            reference_label=f"{base.steps} steps",
            reference=base.bytes_per_step,
            digits=0,
            detail=(
                f"{r.history_bytes} bytes in {r.events} events, "
                + ("one execution" if r.runs == 1 else f"{r.runs} executions (continued as new {r.runs - 1}×)")
                + f"; of which activity inputs and results {r.activity_payload_bytes_per_step:.0f} bytes/step; "
                f"the run took {r.seconds:.1f} s"
            ),
        )
        for r in report.rows
    ]


def concurrency_rows(r: ConcurrencyReport) -> list[BenchRow]:
    return [
        BenchRow.of(
            key="concurrent_runs",
            what=f"{r.runs} concurrent runs of {r.steps} steps, {r.model_latency_ms} ms model latency: completion time",
            unit="s",
            measured_label="first start to last result",
            measured=r.seconds,
            reference_label="ideal",
            reference=r.ideal_seconds,
            detail=(
                f"ideal = {r.steps} × {r.model_latency_ms} ms + {r.steps} × {r.memory_ms_per_step_0ms:.1f} ms "
                f"(the in-memory step cost at 0 ms latency); mean run {r.mean_run_seconds:.1f} s, slowest "
                f"{r.slowest_run_seconds:.1f} s; {r.steps_per_s:.1f} steps/s on one worker process, which used "
                f"{r.worker_cpu_s:.1f} CPU s ({r.worker_cpu_ms_per_step:.1f} ms/step) and peaked at "
                f"{r.worker_peak_rss_mb:.0f} MB resident ({r.worker_rss_before_mb:.0f} MB before the runs); the "
                f"bench's process (fake model server, load generator) used {r.bench_cpu_s:.1f} CPU s"
                + (f", the Temporal dev server {r.server_cpu_s:.1f} CPU s" if r.server_cpu_s is not None else "")
            ),
        )
    ]


def webhook_rows(r: WebhookBenchReport) -> list[BenchRow]:
    edge, ceiling, rejected = r.rows
    errors = sum(sum(row.errors.values()) for row in r.rows)
    return [
        BenchRow.of(
            key="webhooks",
            what=f"webhook throughput, {edge.requests} requests at concurrency {edge.concurrency}",
            unit="requests/s",
            measured_label="edge: signed deliveries over HTTP",
            measured=edge.rps,
            reference_label="bare start_workflow loop",
            reference=ceiling.rps,
            digits=0,
            detail=(
                f"edge p50 {edge.p50_ms:.0f} ms, p99 {edge.p99_ms:.0f} ms; bare loop p50 {ceiling.p50_ms:.0f} ms, "
                f"p99 {ceiling.p99_ms:.0f} ms; rejected by signature {rejected.rps:.0f} requests/s; "
                f"{errors} unexpected answers"
            ),
        )
    ]


def resume_rows(r: ResumeReport) -> list[BenchRow]:
    extra = r.retry_attempt - 2
    attempts = (
        "the retry's first attempt did it"
        if extra <= 0
        else f"{extra} more attempt{'s' if extra > 1 else ''} timed out first (attempt {r.retry_attempt} did it)"
    )
    only_that = " (the call in flight at the kill)" if r.model_calls_repeated == 1 else ""
    return [
        BenchRow.of(
            key="resume_after_kill",
            what=f"resume after the worker is SIGKILLed mid model call ({r.model_latency_ms} ms model latency)",
            unit="s",
            measured_label="kill to step recorded",
            measured=r.resume_s,
            reference_label="model heartbeat timeout",
            reference=r.heartbeat_timeout_s,
            digits=2,
            detail=(
                f"from the kill: replacement worker polling {r.replacement_polling_s:.2f} s, retried call taken "
                f"{r.retry_started_s:.2f} s ({attempts}), model called again {r.retried_call_s:.2f} s (the new "
                f"worker's first model call), call done {r.call_completed_s:.2f} s, step recorded "
                f"{r.resume_s:.2f} s; bound when the first retry succeeds: heartbeat {r.heartbeat_timeout_s:g} s "
                f"+ retry interval {MODEL_RETRY_INTERVAL_S:g} s + one model call {r.model_latency_ms / 1000:g} s "
                f"+ the result's workflow task; that task was offered to the {r.result_task_queue} queue"
                + (
                    " (the retried call's worker took the run off the dead worker's sticky queue)"
                    if r.result_task_queue == "normal"
                    else f" (the dead worker's: up to the sticky timeout {r.sticky_timeout_s:g} s)"
                )
                + f", workflow tasks timed out waiting on a sticky queue: {r.sticky_timeouts}; model calls "
                f"repeated: {r.model_calls_repeated}{only_that}"
            ),
        )
    ]


NOTES = [
    (
        "Agent rows run the explore agent against an OpenAI-wire fake model server (shopfloor.testing, in the "
        "bench's process) that reads a 10-line file slice a step and answers at the last step; both sides call "
        "the same activities. Compaction is off, so a step is one model call and one tool call. The in-memory "
        "step is split into the model call (inside the provider's complete: request, HTTP, the fake model, the "
        "reply), model_step's rest, the tool calls, blob I/O and the loop's own code; Temporal's share is the "
        "durable step minus the in-memory one, set beside Temporal's floor: a workflow of the step's shape (one "
        "activity, one local activity) with no-op bodies, run the same way (shopfloor.bench.floor)."
    ),
    (
        "Durable rows use a Temporal dev server (in memory). Loop and history run a worker in the bench's own "
        "process; concurrent runs run one `shopfloor worker` process, so its CPU time and peak memory are its "
        "own (the fake model server and the load generator stay in the bench's process); the resume row runs "
        "`shopfloor worker` processes, SIGKILLs the one holding the model call and starts a replacement at once."
    ),
    (
        "History counts every execution of a run: AgentWorkflow continues as new when Temporal suggests it, so "
        "long runs span several. The reference is the shortest run's per-step figure: a flat ratio means the "
        "history holds references, not the growing transcript."
    ),
    (
        "Webhooks: the real edge app served by uvicorn in the bench's process (the load generator shares its "
        "CPU), no worker; the reference makes the same signal-with-start directly."
    ),
    (
        "Figures are for reading, not asserting: they move with the machine's other load (the load average) and "
        "with its own speed, which on a shared or virtual machine changes from hour to hour: the header's Python "
        "yardstick (a fixed workload, lower is faster) and CPU steal say how fast it was during this run."
    ),
]


async def run_suite(
    params: SuiteParams,
    *,
    quick: bool = False,
    only: tuple[str, ...] = GROUPS,
    progress: Callable[[str], None] = lambda _: None,
    worker_profile: Path | None = None,
) -> SuiteReport:
    """`worker_profile`: run the concurrent runs' worker under cProfile, its statistics written there."""
    unknown = sorted(set(only) - set(GROUPS))
    if unknown:
        raise ValueError(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    p = params
    jobs: dict[str, Callable[[], Awaitable[BaseModel]]] = {
        "loop": lambda: bench_loop(
            steps=p.loop_steps, latencies_ms=tuple(p.loop_latencies_ms), concurrent=0, long_steps=p.loop_long_steps
        ),
        "history": lambda: bench_history(steps=tuple(p.history_steps)),
        "concurrency": lambda: bench_concurrency(
            runs=p.concurrent_runs, steps=p.concurrent_steps, latency_ms=p.concurrent_latency_ms, profile=worker_profile
        ),
        "webhooks": lambda: bench_webhooks(requests=p.webhook_requests, concurrency=p.webhook_concurrency),
        "resume": lambda: bench_resume(
            latency_ms=p.resume_latency_ms,
            heartbeat_s=p.resume_heartbeat_s,
            steps=p.resume_steps,
            kill_in_step=p.resume_kill_in_step,
        ),
    }
    to_rows: dict[str, Callable[[Any], list[BenchRow]]] = {
        "loop": loop_rows,
        "history": history_rows,
        "concurrency": concurrency_rows,
        "webhooks": webhook_rows,
        "resume": resume_rows,
    }
    load_start = os.getloadavg()[0]
    watch = SpeedWatch()
    rows: list[BenchRow] = []
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    reports: dict[str, Any] = {}
    for name in GROUPS:
        if name not in only:
            continue
        progress(f"{name} ...")
        start = time.perf_counter()
        try:
            report = await jobs[name]()
            rows += to_rows[name](report)
            reports[name] = report.model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - one failed benchmark must not lose the others' figures
            errors[name] = f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
        seconds[name] = round(time.perf_counter() - start, 1)
        progress(f"{name} {'failed' if name in errors else 'done'} in {seconds[name]:.0f} s")
    return SuiteReport(
        machine=machine(),
        quick=quick,
        params=params,
        load_average_start=load_start,
        load_average_end=os.getloadavg()[0],
        speed=watch.result(),
        seconds=seconds,
        rows=rows,
        reports=reports,
        errors=errors,
        notes=NOTES,
    )
