"""A cancel that arrives in the same workflow activation as the awaited activity's outcome is kept
(workflows/late_cancel.py): the awaiting task stops, where the SDK alone hands it the result (or
an error that a caller may treat as harmless) and it goes on.

The activation is made for real: the workflow's worker is shut down while the activity runs, the
cancel's signal is sent and the activity finishes, and a new worker then gets both in one task.
`plain` (the SDK's await alone) shows the setup reproduces the lost cancel.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from waiting import DEADLINE_S

from shopfloor.workflows.late_cancel import unless_cancelled

_started: dict[str, asyncio.Event] = {}
_release: dict[str, asyncio.Event] = {}


@activity.defn(name="held_step")
async def held_step(key: str, fail: bool) -> str:
    _started[key].set()
    await _release[key].wait()
    if fail:
        raise ApplicationError("refused", non_retryable=True)
    return "done"


@workflow.defn(name="WorkCancelledLate")
class WorkCancelledLate:
    def __init__(self) -> None:
        self.stop = False

    @workflow.signal
    def stop_work(self) -> None:
        self.stop = True

    @workflow.run
    async def run(self, key: str, mode: str) -> str:
        work = asyncio.create_task(self._work(key, mode))
        await workflow.wait_condition(lambda: self.stop or work.done())
        work.cancel()
        try:
            return await work
        except asyncio.CancelledError:
            return "stopped"

    async def _work(self, key: str, mode: str) -> str:
        step = workflow.execute_activity(
            held_step, args=[key, mode == "failed"], start_to_close_timeout=timedelta(minutes=5)
        )
        try:
            await (step if mode == "plain" else unless_cancelled(step))
        except ActivityError:
            pass  # as a caller that treats a failed call as harmless (a comment, a label) does
        await workflow.sleep(timedelta(seconds=1))  # the next step: work that a stopped task must not do
        return "went on"


async def _history_has(handle: WorkflowHandle, event_type: int) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        if event_type in [e.event_type async for e in handle.fetch_history_events()]:
            return
        assert asyncio.get_running_loop().time() < deadline, f"no {EventType.Name(event_type)}"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(("mode", "ends"), [("plain", "went on"), ("result", "stopped"), ("failed", "stopped")])
async def test_a_cancel_that_comes_with_the_activitys_outcome_stops_the_task(
    temporal_client: Client, mode: str, ends: str
):
    key, queue = uuid.uuid4().hex[:8], f"late-cancel-{uuid.uuid4().hex[:8]}"
    _started[key], _release[key] = asyncio.Event(), asyncio.Event()
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_all_modules())

    def workflow_worker() -> Worker:
        return Worker(
            temporal_client,
            task_queue=queue,
            workflows=[WorkCancelledLate],
            max_cached_workflows=0,
            workflow_runner=runner,
        )

    async with Worker(temporal_client, task_queue=queue, activities=[held_step]):
        async with workflow_worker():
            handle = await temporal_client.start_workflow(
                WorkCancelledLate.run, args=[key, mode], id=f"late-cancel-{key}", task_queue=queue
            )
            await asyncio.wait_for(_started[key].wait(), DEADLINE_S)
        try:
            # No workflow worker: the signal and the activity's outcome wait for the same task.
            await handle.signal(WorkCancelledLate.stop_work)
            _release[key].set()
            closed = (
                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                if mode == "failed"
                else EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            )
            await _history_has(handle, closed)
            async with workflow_worker():
                assert await asyncio.wait_for(handle.result(), DEADLINE_S) == ends
        finally:
            _started.pop(key), _release.pop(key)
