"""Temporal's floor for an agent step: what the server, the SDK and the wire cost for the shape
of a step alone, with nothing of shopfloor's inside it.

An agent step is one workflow task and one activity (the model call), the reply's read-only tool
calls run as local activities inside that workflow task (docs/scaling.md). The floor workflow
does exactly that with no-op bodies and tiny payloads, on the same dev server, in the same
process and with the same worker settings as the durable loop it is set beside. What the durable
loop's Temporal share exceeds it by is shopfloor's: its payloads, its workflow code, its
activities' wrappers.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from shopfloor.settings import Settings

_CALL = timedelta(seconds=30)


class FloorRow(BaseModel):
    steps: int
    ms_per_step: float  # a step's shape: one activity and one local activity
    activity_only_ms_per_step: float  # one activity alone: the least a step with a durable model call can cost


@activity.defn(name="bench_floor_noop")
async def floor_noop(n: int) -> int:
    return n + 1


@workflow.defn(name="BenchFloorWorkflow", sandboxed=False)
class FloorWorkflow:
    @workflow.run
    async def run(self, steps: int, reads: bool) -> int:
        n = 0
        for _ in range(steps):
            n = await workflow.execute_activity(floor_noop, n, start_to_close_timeout=_CALL)  # the model call
            if reads:
                n = await workflow.execute_local_activity(floor_noop, n, start_to_close_timeout=_CALL)
        return n


async def bench_floor(client: Client, settings: Settings, steps: int) -> FloorRow:
    """The floor workflow's time per step, with and without the read, after a warm-up run, on a
    task queue of its own."""
    queue = f"bench-floor-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[FloorWorkflow],
        activities=[floor_noop],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=settings.max_cached_workflows,
        max_concurrent_activities=settings.max_concurrent_activities,
    ):

        async def ms_per_step(n: int, reads: bool) -> float:
            start = time.perf_counter()
            wid = f"bench/floor-{uuid.uuid4().hex[:10]}"
            await client.execute_workflow(FloorWorkflow.run, args=[n, reads], id=wid, task_queue=queue)
            return (time.perf_counter() - start) * 1000 / n

        await ms_per_step(2, True)  # warm-up
        shaped = await ms_per_step(steps, True)
        return FloorRow(steps=steps, ms_per_step=shaped, activity_only_ms_per_step=await ms_per_step(steps, False))
