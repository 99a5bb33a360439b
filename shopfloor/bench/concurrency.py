"""Many agent runs at once on one worker: completion time against the ideal.

N runs of S steps each start together, every model call taking L (the fake model's latency), on
one in-process worker against one Temporal dev server. Were scheduling free and the machine
unlimited, all N would finish as one run alone in memory does: S × L of model time plus S times
the in-memory cost of a step's own work (model request/response handling, transcript store, tool
call), which the bench measures first, in the same session, at 0 ms model latency. That is the
ideal; the measured figure is the wall time from the first start to the last result.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from shopfloor.bench.workload import agent_bench


class ConcurrencyReport(BaseModel):
    runs: int
    steps: int
    model_latency_ms: int
    seconds: float  # first start .. last result
    ideal_seconds: float  # steps × latency + one in-memory run at 0 ms latency
    memory_ms_per_step_0ms: float  # the in-memory step cost behind the ideal
    mean_run_seconds: float
    slowest_run_seconds: float
    steps_per_s: float

    def markdown(self) -> str:
        return "\n".join(
            [
                "| runs at once | steps a run | model latency | completion s | ideal s | slowest run s | steps/s |",
                "|---:|---:|---:|---:|---:|---:|---:|",
                (
                    f"| {self.runs} | {self.steps} | {self.model_latency_ms} ms | {self.seconds:.1f} | {self.ideal_seconds:.1f} "
                    f"| {self.slowest_run_seconds:.1f} | {self.steps_per_s:.1f} |"
                ),
            ]
        )


async def bench_concurrency(*, runs: int = 100, steps: int = 20, latency_ms: int = 1000) -> ConcurrencyReport:
    async with agent_bench() as bench:
        bench.fake.latency_s = 0
        await bench.in_memory(2)  # warm-up: imports, connection pool
        memory_s = await bench.in_memory(steps)
        await bench.durable(2, history=False)  # warm-up of the worker
        bench.fake.latency_s = latency_ms / 1000
        start = time.perf_counter()
        results = await asyncio.gather(*(bench.durable(steps, history=False) for _ in range(runs)))
        seconds = time.perf_counter() - start
    each = [r.seconds for r in results]
    return ConcurrencyReport(
        runs=runs,
        steps=steps,
        model_latency_ms=latency_ms,
        seconds=seconds,
        ideal_seconds=steps * latency_ms / 1000 + memory_s,
        memory_ms_per_step_0ms=memory_s * 1000 / steps,
        mean_run_seconds=sum(each) / len(each),
        slowest_run_seconds=max(each),
        steps_per_s=runs * steps / seconds,
    )
