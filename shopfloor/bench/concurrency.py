"""Many agent runs at once on one worker: completion time against the ideal.

N runs of S steps each start together, every model call taking L (the fake model's latency), on
one `shopfloor worker` process (shopfloor.bench.spawn) against one Temporal dev server. The fake
model server and the load generator (the bench's client starting the runs and waiting for their
results) live in the bench's own process, so what the worker costs is the worker's alone: its CPU
seconds and peak resident memory are read from the process. Were scheduling free and the machine
unlimited, all N would finish as one run alone in memory does: S × L of model time plus S times
the in-memory cost of a step's own work (model request/response handling, transcript store, tool
call), which the bench measures first, in the same session, at 0 ms model latency. That is the
ideal; the measured figure is the wall time from the first start to the last result.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from pydantic import BaseModel

from shopfloor.bench.breakdown import StepBreakdown
from shopfloor.bench.spawn import WorkerProcess, process_usage, worker_env
from shopfloor.bench.workload import MODEL, agent_bench
from shopfloor.errors import ShopfloorError

MB = 1024 * 1024


class ConcurrencyReport(BaseModel):
    runs: int
    steps: int
    model_latency_ms: int
    seconds: float  # first start .. last result
    ideal_seconds: float  # steps × latency + one in-memory run at 0 ms latency
    memory_ms_per_step_0ms: float  # the in-memory step cost behind the ideal
    memory_breakdown: StepBreakdown  # where that in-memory step's time goes
    mean_run_seconds: float
    slowest_run_seconds: float
    steps_per_s: float
    worker_cpu_s: float  # the worker process's CPU seconds (user + system) during the runs
    worker_cpu_ms_per_step: float
    worker_peak_rss_mb: float  # the worker process's peak resident memory (start to last result)
    worker_rss_before_mb: float  # its resident memory after the warm-up, before the runs
    bench_cpu_s: float  # the bench process (fake model server and load generator) during the runs
    server_cpu_s: float | None  # the Temporal dev server's process during the runs (None: not readable)

    def markdown(self) -> str:
        return "\n".join(
            [
                (
                    "| runs at once | steps a run | model latency | completion s | ideal s | slowest run s | steps/s "
                    "| worker CPU s | worker peak RSS MB |"
                ),
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
                (
                    f"| {self.runs} | {self.steps} | {self.model_latency_ms} ms | {self.seconds:.1f} | {self.ideal_seconds:.1f} "
                    f"| {self.slowest_run_seconds:.1f} | {self.steps_per_s:.1f} | {self.worker_cpu_s:.1f} "
                    f"| {self.worker_peak_rss_mb:.0f} |"
                ),
            ]
        )


async def bench_concurrency(
    *, runs: int = 100, steps: int = 20, latency_ms: int = 1000, profile: Path | None = None
) -> ConcurrencyReport:
    """`profile`: run the worker under cProfile and write its statistics there (pstats format)."""
    async with agent_bench(worker=False) as bench:
        bench.fake.latency_s = 0
        await bench.in_memory(2)  # warm-up: imports, connection pool
        memory = await bench.in_memory_breakdown(steps)
        worker = WorkerProcess(
            worker_env(
                SHOPFLOOR_TEMPORAL_ADDRESS=bench.settings.effective_temporal_address,
                SHOPFLOOR_TASK_QUEUE=bench.settings.task_queue,
                SHOPFLOOR_DATA_DIR=str(bench.base / "worker-data"),
                SHOPFLOOR_LOG_LEVEL="WARNING",
                SHOPFLOOR_LOG_JSON="true",
                SHOPFLOOR_MODEL=MODEL,  # configured as a deployed worker is: its provider opened at start
                OPENAI_BASE_URL=bench.fake.openai_base_url,
                OPENAI_API_KEY="bench-not-a-secret",
            ),
            bench.base / "worker.log",
            profile=profile,
        )
        try:
            await worker.wait_polling(bench.client, bench.settings.task_queue)
            await bench.durable(2, history=False)  # warm-up of the worker
            before = worker.usage()
            server_before = process_usage(bench.server.pid) if bench.server.pid else None
            bench.fake.latency_s = latency_ms / 1000
            bench_cpu = time.process_time()
            start = time.perf_counter()
            results = await asyncio.gather(*(bench.durable(steps, history=False) for _ in range(runs)))
            seconds = time.perf_counter() - start
            bench_cpu = time.process_time() - bench_cpu
            after = worker.usage()
            server_after = process_usage(bench.server.pid) if bench.server.pid else None
        finally:
            worker.stop()
    if before is None or after is None:
        raise ShopfloorError("the worker's CPU time and memory could not be read (no /proc on this system)")
    each = [r.seconds for r in results]
    return ConcurrencyReport(
        runs=runs,
        steps=steps,
        model_latency_ms=latency_ms,
        seconds=seconds,
        ideal_seconds=steps * latency_ms / 1000 + memory.total_ms * steps / 1000,
        memory_ms_per_step_0ms=memory.total_ms,
        memory_breakdown=memory,
        mean_run_seconds=sum(each) / len(each),
        slowest_run_seconds=max(each),
        steps_per_s=runs * steps / seconds,
        worker_cpu_s=after.cpu_s - before.cpu_s,
        worker_cpu_ms_per_step=(after.cpu_s - before.cpu_s) * 1000 / (runs * steps),
        worker_peak_rss_mb=after.peak_rss_bytes / MB,
        worker_rss_before_mb=before.rss_bytes / MB,
        bench_cpu_s=bench_cpu,
        server_cpu_s=server_after.cpu_s - server_before.cpu_s if server_before and server_after else None,
    )
