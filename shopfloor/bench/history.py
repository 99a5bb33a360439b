"""History bytes per step: does an agent run's Temporal history stay flat per step as runs get longer?

The workflow keeps references only (transcript manifest digest, tool output digests with short
previews), so a step should cost about the same history however long the conversation is; were
the transcript inline, the bytes per step would grow with the run. The bench runs the agent
workload (shopfloor.bench.workload) for each length, durably, and sums the serialized history of
every run in the chain: AgentWorkflow continues as new when Temporal suggests it (by event count
or size), so a long run spans several executions, each starting with the carried state.

The reference is the shortest run's bytes per step, measured in the same session: the longer
runs' figures divided by it show whether the per-step cost stays flat.
"""

from __future__ import annotations

from pydantic import BaseModel

from shopfloor.bench.workload import agent_bench


class HistoryRow(BaseModel):
    steps: int
    runs: int  # executions in the continue-as-new chain
    events: int
    history_bytes: int
    bytes_per_step: float
    activity_payload_bytes_per_step: float  # of which: activity inputs and results
    seconds: float


class HistoryReport(BaseModel):
    rows: list[HistoryRow]

    def markdown(self) -> str:
        lines = [
            "| steps | runs (continue-as-new) | events | history bytes | bytes/step | of which activity payloads/step |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.steps} | {r.runs} | {r.events} | {r.history_bytes} | {r.bytes_per_step:.0f} "
            f"| {r.activity_payload_bytes_per_step:.0f} |"
            for r in self.rows
        ]
        return "\n".join(lines)


async def bench_history(*, steps: tuple[int, ...] = (10, 100, 500)) -> HistoryReport:
    """One durable run per length, at 0 ms model latency (latency does not change the history)."""
    rows: list[HistoryRow] = []
    async with agent_bench() as bench:
        for n in steps:
            run = await bench.durable(n)
            chain = run.history
            if chain is None:  # asked for above; keeps the type checker honest
                raise RuntimeError("no history fetched")
            rows.append(
                HistoryRow(
                    steps=n,
                    runs=chain.runs,
                    events=len(chain.events),
                    history_bytes=chain.bytes,
                    bytes_per_step=chain.bytes / n,
                    activity_payload_bytes_per_step=chain.activity_payload_bytes / n,
                    seconds=run.seconds,
                )
            )
    return HistoryReport(rows=rows)
