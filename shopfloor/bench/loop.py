"""`shopfloor bench loop`: the durable agent loop against the same loop run in memory.

Both sides run the very same loop (agents/loop.py) and activity code (model_step and the tools)
against the same fake model server (OpenAI wire format, fixed latency) and workspace; the durable
side runs the loop as AgentWorkflow, its activities scheduled through a real Temporal dev server
and worker, the in-memory side runs it as a plain coroutine that calls them directly. The
difference per step is what durability costs. The workload: shopfloor.bench.workload.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from shopfloor.bench.breakdown import StepBreakdown
from shopfloor.bench.floor import FloorRow, bench_floor
from shopfloor.bench.workload import agent_bench


class LoopRow(BaseModel):
    model_latency_ms: int
    steps: int
    durable_ms_per_step: float
    memory_ms_per_step: float
    overhead_ms_per_step: float
    history_bytes_per_step: int
    breakdown: StepBreakdown  # of the in-memory step; its temporal_ms is overhead_ms_per_step


class LongRunRow(BaseModel):
    """A long run in memory at 0 ms model latency, per step, beside the short one's figure: a
    step's own cost should not grow with the transcript."""

    steps: int
    memory_ms_per_step: float
    reference_steps: int
    reference_ms_per_step: float  # the in-memory figure of the 0 ms row, from the same session
    breakdown: StepBreakdown


class ConcurrencyRow(BaseModel):
    runs: int
    steps: int
    durable_steps_per_s: float
    memory_steps_per_s: float


class LoopReport(BaseModel):
    rows: list[LoopRow]
    floor: FloorRow | None = None  # Temporal's floor for a step's shape, beside the 0 ms row
    long_run: LongRunRow | None = None
    concurrency: ConcurrencyRow | None = None

    def markdown(self) -> str:
        lines = [
            "| model latency | steps | durable (Temporal) ms/step | in memory ms/step | overhead ms/step | history bytes/step |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.model_latency_ms} ms | {r.steps} | {r.durable_ms_per_step:.1f} | {r.memory_ms_per_step:.1f} "
            f"| {r.overhead_ms_per_step:+.1f} | {r.history_bytes_per_step} |"
            for r in self.rows
        ]
        if r := self.long_run:
            lines += [
                "",
                f"in memory, 0 ms model latency: {r.steps} steps {r.memory_ms_per_step:.1f} ms/step against "
                f"{r.reference_steps} steps {r.reference_ms_per_step:.1f} ms/step",
            ]
        lines += ["", *(f"- {r.model_latency_ms} ms: {r.breakdown.describe()}" for r in self.rows)]
        if f := self.floor:
            lines.append(
                f"- Temporal's floor (no-op bodies, {f.steps} steps): {f.ms_per_step:.1f} ms/step for a step's shape "
                f"(an activity and a local activity), {f.activity_only_ms_per_step:.1f} ms/step for an activity alone"
            )
        if self.long_run:
            lines.append(f"- {self.long_run.steps} steps: {self.long_run.breakdown.describe()}")
        if c := self.concurrency:
            lines += [
                "",
                "| concurrent runs on one worker | steps a run | durable steps/s | in memory steps/s |",
                "|---:|---:|---:|---:|",
                f"| {c.runs} | {c.steps} | {c.durable_steps_per_s:.1f} | {c.memory_steps_per_s:.1f} |",
            ]
        return "\n".join(lines)


async def bench_loop(
    *, steps: int = 20, latencies_ms: tuple[int, ...] = (0, 500), concurrent: int = 50, long_steps: int = 0
) -> LoopReport:
    """`long_steps` (0: none): one more in-memory run that long at 0 ms model latency, against the
    `steps` figure at 0 ms (a 0 is added to `latencies_ms` for it if missing)."""
    rows: list[LoopRow] = []
    floor: FloorRow | None = None
    long_run: LongRunRow | None = None
    concurrency: ConcurrencyRow | None = None
    if long_steps and 0 not in latencies_ms:
        latencies_ms = (0, *latencies_ms)
    async with agent_bench() as bench:
        for latency in latencies_ms:
            bench.fake.latency_s = latency / 1000
            # One warm-up run each, so imports and connection pools are not measured.
            await bench.durable(2, history=False)
            await bench.in_memory(2)
            durable = await bench.durable(steps)
            memory = await bench.in_memory_breakdown(steps)
            overhead = durable.seconds * 1000 / steps - memory.total_ms
            rows.append(
                LoopRow(
                    model_latency_ms=latency,
                    steps=steps,
                    durable_ms_per_step=durable.seconds * 1000 / steps,
                    memory_ms_per_step=memory.total_ms,
                    overhead_ms_per_step=overhead,
                    history_bytes_per_step=durable.history.bytes // steps if durable.history else 0,
                    breakdown=memory.model_copy(update={"temporal_ms": overhead}),
                )
            )
            if latency == 0:
                floor = await bench_floor(bench.client, bench.settings, steps)
            if latency == 0 and long_steps:
                long = await bench.in_memory_breakdown(long_steps)
                long_run = LongRunRow(
                    steps=long_steps,
                    memory_ms_per_step=long.total_ms,
                    reference_steps=steps,
                    reference_ms_per_step=memory.total_ms,
                    breakdown=long,
                )
        if concurrent:
            bench.fake.latency_s = 0
            start = time.perf_counter()
            await asyncio.gather(*(bench.durable(steps, history=False) for _ in range(concurrent)))
            durable_s = time.perf_counter() - start
            start = time.perf_counter()
            await asyncio.gather(*(bench.in_memory(steps) for _ in range(concurrent)))
            memory_s = time.perf_counter() - start
            total = concurrent * steps
            concurrency = ConcurrencyRow(
                runs=concurrent,
                steps=steps,
                durable_steps_per_s=total / durable_s,
                memory_steps_per_s=total / memory_s,
            )
    return LoopReport(rows=rows, floor=floor, long_run=long_run, concurrency=concurrency)
