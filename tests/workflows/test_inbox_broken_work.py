"""A bug in the work beside an inbox (a pipeline task raising what it does not expect) fails the
workflow task, where Temporal shows it and retries it, instead of leaving the run waiting for work
that died with nothing to see.

The workflow here is a minimal inbox with work that breaks, run by a real worker on the test
session's dev server: the mechanism under test is the inbox's (`watch_work`), which IssueWorkflow
and PullRequestWorkflow use for their pipelines."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from waiting import DEADLINE_S

from shopfloor.models.inbox_state import IssueInboxInput
from shopfloor.workflows.inbox import GitHubInbox

BUG = "a bug in the work beside the inbox"


@workflow.defn(name="InboxWithBrokenWork")
class InboxWithBrokenWork(GitHubInbox):
    @workflow.init
    def __init__(self, inp: IssueInboxInput) -> None:
        super().__init__(inp.repo, inp.number, inp.carry)

    def busy(self) -> bool:
        return True  # the work would end the inbox: without the watch, it waits forever

    @workflow.run
    async def run(self, inp: IssueInboxInput) -> str:
        self.watch_work(asyncio.create_task(self._work()))
        await self.serve(inp.continue_after_events, lambda carry: inp)
        return self.carry.state

    async def _work(self) -> None:
        await workflow.sleep(timedelta(milliseconds=10))
        raise RuntimeError(BUG)


async def test_a_bug_in_the_work_beside_the_inbox_fails_the_workflow_task(temporal_client: Client):
    queue = f"broken-work-{uuid.uuid4().hex[:8]}"
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_all_modules())
    async with Worker(
        temporal_client,
        task_queue=queue,
        workflows=[InboxWithBrokenWork],
        max_cached_workflows=0,
        workflow_runner=runner,
    ):
        handle = await temporal_client.start_workflow(
            InboxWithBrokenWork.run,
            IssueInboxInput(repo="acme/calc", number=1),
            id=f"broken-work-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        try:
            failure = None
            deadline = asyncio.get_running_loop().time() + DEADLINE_S
            while failure is None:
                assert asyncio.get_running_loop().time() < deadline, "no workflow task failed"
                async for event in handle.fetch_history_events():
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                        failure = event.workflow_task_failed_event_attributes.failure
                        break
                await asyncio.sleep(0.2)
            assert BUG in failure.message, failure
            # The run itself is still there to be fixed and go on: failed tasks are retried.
            assert (await handle.describe()).status.name == "RUNNING"
        finally:
            await handle.terminate("test over")
