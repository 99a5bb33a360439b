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

from shopfloor.bench.workload import agent_bench


class LoopRow(BaseModel):
    model_latency_ms: int
    steps: int
    durable_ms_per_step: float
    memory_ms_per_step: float
    overhead_ms_per_step: float
    history_bytes_per_step: int


class ConcurrencyRow(BaseModel):
    runs: int
    steps: int
    durable_steps_per_s: float
    memory_steps_per_s: float


class LoopReport(BaseModel):
    rows: list[LoopRow]
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
        if c := self.concurrency:
            lines += [
                "",
                "| concurrent runs on one worker | steps a run | durable steps/s | in memory steps/s |",
                "|---:|---:|---:|---:|",
                f"| {c.runs} | {c.steps} | {c.durable_steps_per_s:.1f} | {c.memory_steps_per_s:.1f} |",
            ]
        return "\n".join(lines)


async def bench_loop(*, steps: int = 20, latencies_ms: tuple[int, ...] = (0, 500), concurrent: int = 50) -> LoopReport:
    rows: list[LoopRow] = []
    concurrency: ConcurrencyRow | None = None
    async with agent_bench() as bench:
        for latency in latencies_ms:
            bench.fake.latency_s = latency / 1000
            # One warm-up run each, so imports and connection pools are not measured.
            await bench.durable(2, history=False)
            await bench.in_memory(2)
            durable = await bench.durable(steps)
            memory_s = await bench.in_memory(steps)
            rows.append(
                LoopRow(
                    model_latency_ms=latency,
                    steps=steps,
                    durable_ms_per_step=durable.seconds * 1000 / steps,
                    memory_ms_per_step=memory_s * 1000 / steps,
                    overhead_ms_per_step=(durable.seconds - memory_s) * 1000 / steps,
                    history_bytes_per_step=durable.history.bytes // steps if durable.history else 0,
                )
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
    return LoopReport(rows=rows, concurrency=concurrency)
