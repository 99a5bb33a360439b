"""The running agent's steps on the progress comment: the `live_progress` activity beside each agent
run of an issue's or a pull request's run, started with the child and stopped before the run's
next own upsert of the comment, so two writers never race on it.

The activity (activities/live_progress.py) polls the agent run and edits the comment; the workflow
only starts it, answers its `progress_base` query (the comment as the run renders it), and
cancels it, waiting for the cancellation to complete, when the child ends. While the agent run
waits for an operator the run's own comment shows the wait and no live view runs (a pending
activity would also stop a time-skipping test server's clock); a new one starts once the wait is
answered. History grows by one activity per agent run and per answered wait, never per step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.live_progress import PROGRESS_BASE_QUERY, LiveProgressInput, LiveProgressOutput
    from shopfloor.workflows.activity_catalogue import LIVE_PROGRESS, call
    from shopfloor.workflows.progress import ProgressComment

# Histories recorded before agent runs had a live view beside them (its activities are new commands).
LIVE_PROGRESS_PATCH = "live-progress-comment"
# Histories recorded before stopping the live view kept a cancel of the run's task.
STOP_SHIELDED_PATCH = "live-progress-stop-shielded"

T = TypeVar("T")


async def with_live_progress(progress: ProgressComment, agent_run_id: str, child: Awaitable[T]) -> T:
    """Await `child` (the agent run `agent_run_id`) with its steps shown live on `progress`'s comment."""
    if not workflow.patched(LIVE_PROGRESS_PATCH):
        return await child
    live = LiveProgress(progress, agent_run_id)
    try:
        return await child
    finally:
        await live.stop()


class LiveProgress:
    def __init__(self, progress: ProgressComment, agent_run_id: str) -> None:
        self.progress = progress
        self.inp = LiveProgressInput(
            repo=progress.view.repo,
            number=progress.view.number,
            workflow_id=workflow.info().workflow_id,
            agent_run_id=agent_run_id,
        )
        self._ended = False
        self._activity: asyncio.Task[LiveProgressOutput] | None = None
        workflow.set_query_handler(PROGRESS_BASE_QUERY, progress.base)
        self._loop = asyncio.create_task(self._run())

    def _waits(self) -> bool:
        """The agent run waits for an operator (it signalled the wait; the comment shows it)."""
        return any(w.workflow_id == self.inp.agent_run_id for w in self.progress.view.waiting_calls)

    async def _run(self) -> None:
        while not self._ended:
            await workflow.wait_condition(lambda: self._ended or not self._waits())
            if self._ended:
                return
            self.progress.live_view_of = self.inp.agent_run_id
            task = self._activity = asyncio.ensure_future(
                call(
                    LIVE_PROGRESS,
                    self.inp,
                    summary=f"live progress of {self.inp.agent_run_id}",
                    # Cancelled means stopped: the run's next upsert comes after its last edit.
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            )
            await workflow.wait_condition(self._activity_to_stop)
            by_itself = task.done()
            await self._stop_activity()
            self.progress.live_view_of = None
            self.progress.live_views_stopped += 1
            if by_itself and not self._ended:
                # It stopped on its own (the agent run ended or waits, live edits are off, or it
                # failed): no new one before a wait shows and is answered.
                await workflow.wait_condition(lambda: self._ended or self._waits())

    def _activity_to_stop(self) -> bool:
        task = self._activity
        return self._ended or self._waits() or task is None or task.done()

    async def _stop_activity(self) -> None:
        task, self._activity = self._activity, None
        if task is None:
            return
        if not task.done():
            task.cancel()
        try:
            await task
        except (ActivityError, asyncio.CancelledError) as exc:
            # A view: its cancellation or failure never fails the run.
            workflow.logger.debug("live progress of %s stopped: %s", self.inp.agent_run_id, exc)

    async def stop(self) -> None:
        """Stop the live view and wait until its activity has stopped."""
        self._ended = True
        if not workflow.patched(STOP_SHIELDED_PATCH):
            await self._loop
            return
        try:
            # Shielded: a cancel of the run's task would reach the loop, which stops quietly,
            # and the cancel would be lost with it (the run went on after its issue closed).
            await asyncio.shield(self._loop)
        except asyncio.CancelledError:
            await self._loop  # it stops on its own now (ended); the run's cancel goes on after it
            raise
