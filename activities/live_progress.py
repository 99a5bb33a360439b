"""The progress comment, live: while an agent run goes, its steps as a checklist on its run's comment.

One long-running activity per agent run of an issue's or a pull request's run
(workflows/live_progress.py starts it beside the child and cancels it when the child ends). Every
`poll_s` it describes the agent run (cheap: the server answers, no workflow code runs) and its
parent; only when either changed and the edit interval has passed does it read the agent run's
`status` query and the parent's `progress_base` query, render the checklist into the comment
(agents/live_checklist.py, agents/progress.py) and upsert it, if the body changed. So a run's
history grows by one activity per agent run (not per step), and the comment is edited at most
once per `edit_s` (GitHub's secondary rate limits on content; SHOPFLOOR_PROGRESS_EDIT_SECONDS).

A live edit is a view: a GitHub failure is logged and the next change tries again; a secondary
rate limit (403/429 with Retry-After) holds edits back for as long as GitHub asks. It stops on its
own when the agent run closes or waits for an operator (the run's own comment shows the wait),
and heartbeats, so a dead worker's live view moves to another worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

import structlog
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError

from shopfloor.activities.github import issues
from shopfloor.activities.github.api import write_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.agents.live_checklist import RunningCall, checklist_lines, live_checklist
from shopfloor.agents.progress import ProgressBase, progress_body
from shopfloor.agents.tools import TOOLS
from shopfloor.models import failure_types
from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.github_ops import UpsertCommentInput
from shopfloor.models.live_progress import PROGRESS_BASE_QUERY, LiveProgressInput, LiveProgressOutput
from shopfloor.models.model_progress import ModelProgress

log = structlog.get_logger(__name__)

MODEL_ACTIVITIES = ("model_step", "compact_transcript")
HOOKS_ACTIVITY = "before_submit_hooks"
HISTORY_PAGE = 64  # the newest events of an agent run: where its calls in flight were scheduled
_GOING = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


class LiveProgressActivities:
    def __init__(
        self,
        client: Client,
        github: GitHubClients,
        *,
        edit_s: float,
        poll_s: float = 1.0,
    ) -> None:
        self._client = client
        self._github = github
        self.edit_s = edit_s
        self.poll_s = max(0.05, min(poll_s, edit_s)) if edit_s > 0 else poll_s
        self._summaries: dict[tuple[str, str], str] = {}  # (run id, activity id) -> call summary

    @activity.defn(name="live_progress")
    async def live_progress(self, inp: LiveProgressInput) -> LiveProgressOutput:
        if self.edit_s <= 0:
            return LiveProgressOutput(ended="off")
        try:
            return await _LiveView(self, inp).run()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None or details.cancel_requested or details.worker_shutdown:
                raise  # the workflow's cancel: the SDK completes it as cancelled
            # The view is already gone at Temporal (its workflow moved on): an expected end, so
            # BENIGN, which the SDK logs at debug level instead of a warning with a traceback.
            raise ApplicationError("the live view was stopped", category=ApplicationErrorCategory.BENIGN) from None

    def all(self) -> list[Callable[..., Any]]:
        return [self.live_progress]

    # -- what the view reads of Temporal --------------------------------------------------------

    async def running_calls(self, desc: WorkflowExecutionDescription) -> list[RunningCall]:
        """The agent run's activities in flight, as checklist entries (tool calls by their summary)."""
        pending = [p for p in desc.raw_description.pending_activities if _kind(p.activity_type.name) is not None]
        run_id = desc.run_id or ""
        unknown = {
            p.activity_id
            for p in pending
            if _kind(p.activity_type.name) != "model" and (run_id, p.activity_id) not in self._summaries
        }
        if unknown:
            await self._learn_summaries(desc.id, run_id, unknown)
        converter = self._client.data_converter
        return [
            _running(
                p, self._summaries.get((run_id, p.activity_id), p.activity_type.name), await text_tail(p, converter)
            )
            for p in pending
        ]

    async def _learn_summaries(self, workflow_id: str, run_id: str, wanted: set[str]) -> None:
        """The summaries the agent run gave its calls in flight (Temporal keeps them with the
        scheduling event, not with the pending activity): the newest page of its history."""
        request = GetWorkflowExecutionHistoryReverseRequest(
            namespace=self._client.namespace,
            execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            maximum_page_size=HISTORY_PAGE,
        )
        try:
            page = await self._client.workflow_service.get_workflow_execution_history_reverse(request)
        except RPCError as exc:
            log.info("live progress: no history for call summaries", workflow_id=workflow_id, error=str(exc)[:200])
            return
        converter = self._client.data_converter  # its codec too, if the deployment has one
        for event in page.history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            activity_id = event.activity_task_scheduled_event_attributes.activity_id
            if activity_id in wanted and event.user_metadata.HasField("summary"):
                try:
                    (summary,) = await converter.decode([event.user_metadata.summary], [str])
                except Exception:  # noqa: BLE001 - a summary we cannot read: the activity's name stands in
                    continue
                self._summaries[(run_id, activity_id)] = str(summary)
        if len(self._summaries) > 1000:  # a worker's cache, not a record: keep the newest
            for key in list(self._summaries)[:500]:
                del self._summaries[key]


class _LiveView:
    """One agent run's live view: the loop, and what it last wrote."""

    def __init__(self, acts: LiveProgressActivities, inp: LiveProgressInput) -> None:
        self.acts, self.inp = acts, inp
        client = acts._client
        self.child = client.get_workflow_handle(inp.agent_run_id)
        self.parent = client.get_workflow_handle(inp.workflow_id)
        self.edits = 0
        self.last_body: str | None = None
        self.last_upserts: int | None = None
        self.next_edit = 0.0  # clock time before which no edit is made
        self.log = log.bind(workflow_id=inp.workflow_id, agent_run_id=inp.agent_run_id)

    async def run(self) -> LiveProgressOutput:
        seen: tuple[Any, ...] | None = None
        while True:
            activity.heartbeat(self.edits)
            try:
                desc = await self.child.describe()
                parent = await self.parent.describe()
            except RPCError as exc:  # not started yet, or Temporal briefly away: look again
                self.log.debug("live progress: describe failed", error=str(exc)[:200])
                await self._pause()
                continue
            if desc.status not in _GOING or parent.status not in _GOING:
                return LiveProgressOutput(ended="agent_ended", edits=self.edits)
            now = time.monotonic()
            state = (_state(desc), _state(parent))
            if state != seen and now >= self.next_edit:
                shown = await self._show(desc)
                if shown == "waiting":
                    return LiveProgressOutput(ended="waiting", edits=self.edits)
                # Not shown (a query or the edit failed): again after the interval, changed or not.
                seen = state if shown == "shown" else None
            await self._pause()

    async def _pause(self) -> None:
        """Wait for the next poll; a worker told to stop hands the view on at once instead of
        holding its shutdown for the grace period (the retry starts it on another worker)."""
        try:
            await asyncio.wait_for(activity.wait_for_worker_shutdown(), self.acts.poll_s)
        except TimeoutError:
            return
        # BENIGN: an expected hand-over, which the SDK then logs at debug level, not as a warning
        # with a traceback in the log of every worker that stops while an agent runs.
        raise ApplicationError(
            "the worker is shutting down: the live view goes on on another worker",
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _show(self, desc: WorkflowExecutionDescription) -> str:
        """Render the comment and upsert it if it changed: "shown" (or nothing to show), "retry",
        or "waiting" when the agent run waits for an operator."""
        try:
            status = await self.child.query("status", result_type=AgentStatus)
            if status.pending:
                return "waiting"
            if status.state != "running":
                return "shown"  # finishing: its run's own upsert comes next
            running = await self.acts.running_calls(desc)
            base = await self.parent.query(PROGRESS_BASE_QUERY, result_type=ProgressBase)
        except Exception as exc:  # noqa: BLE001 - a failed query (Temporal away, a handler missing) skips this edit
            self.log.info("live progress: query failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
            self.next_edit = time.monotonic() + self.acts.edit_s
            return "retry"
        if base.view.final:
            return "shown"
        body = progress_body(base.view, base.text_section, checklist_lines(live_checklist(status, running)))
        if body == self.last_body and base.upserts == self.last_upserts:
            return "shown"
        if not await self._upsert(body):
            return "retry"
        self.last_upserts = base.upserts
        return "shown"

    async def _upsert(self, body: str) -> bool:
        inp = self.inp
        request = UpsertCommentInput(
            repo=inp.repo, issue_number=inp.number, workflow_id=inp.workflow_id, kind="progress", body=body
        )
        self.next_edit = time.monotonic() + self.acts.edit_s
        try:
            await write_github(self.acts._github, inp.repo, issues.upsert_comment, request)
        except ApplicationError as exc:
            # A view: the run goes on without this edit; the next change tries again.
            self.last_body = None
            delay = exc.next_retry_delay.total_seconds() if exc.next_retry_delay else 0.0
            if exc.type == failure_types.GITHUB_RATE_LIMITED:
                self.next_edit = time.monotonic() + max(delay, self.acts.edit_s)
            self.log.warning("live progress: comment not edited", error=exc.message[:300], wait_s=delay)
            return False
        self.edits += 1
        self.last_body = body
        return True


def _kind(activity_type: str) -> str | None:
    if activity_type in MODEL_ACTIVITIES:
        return "model"
    if activity_type == HOOKS_ACTIVITY:
        return "hooks"
    return "tool" if activity_type in TOOLS else None


async def text_tail(p: PendingActivityInfo, converter: DataConverter) -> str | None:
    """What a streaming model call has written so far (its heartbeat details), this attempt's."""
    if _kind(p.activity_type.name) != "model" or not p.heartbeat_details.payloads:
        return None
    try:
        (progress,) = await converter.decode(list(p.heartbeat_details.payloads)[:1], [ModelProgress])
    except Exception:  # noqa: BLE001 - details of another shape (a plain string): no text to show
        return None
    if not isinstance(progress, ModelProgress) or progress.attempt != p.attempt:
        return None
    return progress.text or None


def _running(p: PendingActivityInfo, summary: str, text_tail: str | None = None) -> RunningCall:
    kind = _kind(p.activity_type.name) or "tool"
    failure = p.last_failure.message if p.HasField("last_failure") else None
    waiting = p.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    next_at = p.next_attempt_schedule_time.ToDatetime(tzinfo=UTC) if p.HasField("next_attempt_schedule_time") else None
    started = p.last_started_time.ToDatetime(tzinfo=UTC) if p.HasField("last_started_time") else None
    return RunningCall(
        kind=kind,  # type: ignore[arg-type]
        summary="" if kind == "model" else summary,
        attempt=max(1, p.attempt),
        max_attempts=max(0, p.maximum_attempts),
        last_error=failure.splitlines()[0] if failure else None,
        next_attempt_at=next_at if waiting and p.attempt > 1 else None,
        since=None if waiting else started,
        text_tail=text_tail,
    )


def _state(desc: WorkflowExecutionDescription) -> tuple[Any, ...]:
    """What changes when a run moves on: its history, and its calls in flight with their attempts."""
    raw = desc.raw_description
    # A streaming model call's heartbeat grows with its text: a change to show (at the edit interval).
    calls = tuple((p.activity_id, p.attempt, p.state, p.heartbeat_details.ByteSize()) for p in raw.pending_activities)
    return (desc.run_id, raw.workflow_execution_info.history_length, calls)
