"""The event inbox shared by IssueWorkflow and PullRequestWorkflow.

GitHub deliveries arrive as `github_event` signals (signal-with-start from the edge). The signal
handler only de-duplicates (by delivery id, and by the signed body's digest, so a captured body
resent under a new delivery id is refused too) and queues; the run loop handles one event at a time
in arrival order, so a command's permission check (an activity) never races the next event.
The same delivery through two webhook replicas, or redelivered by GitHub or the reconciler, has
one effect. The first triggering event starts the pipeline; the text the agents read is then
read from GitHub when work starts (workflows/issue_text.py), never taken from a later edit.

Lifetime: until the issue/PR is closed, a maintainer's `/shopfloor stop`, or IDLE_TIMEOUT with
no event. It continues as new when Temporal suggests it or after `continue_after_events`
deliveries, carrying the dedupe window, snapshot, commands and state (InboxCarry).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import ClassVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.github_events import CI_EVENTS as CI_EVENTS  # re-exported for the workflows built on it
    from shopfloor.models.github_events import is_bot_sender, is_ci_event
    from shopfloor.models.inbox import GITHUB_EVENT_SIGNAL, RepoEvent
    from shopfloor.models.inbox_state import EventRecord, InboxCarry, InboxSummary
    from shopfloor.search_attributes import SHOPFLOOR_ISSUE, SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.commands import CommandHandling

# No event for this long: the inbox ends as "idle" (an issue nobody touches for a month is not
# worth a running workflow; the next event starts a fresh one through signal-with-start).
IDLE_TIMEOUT = timedelta(days=30)
DEDUPE_KEPT = 500  # delivery ids remembered; redeliveries come within hours, not 500 events later
EVENTS_KEPT = 20

# (event, action) pairs whose text is what the agents act on: the first one fixes the snapshot.
TRIGGERS = {
    ("issues", "opened"),
    ("issues", "reopened"),
    ("issues", "labeled"),
    ("pull_request", "opened"),
    ("pull_request", "reopened"),
    ("pull_request", "ready_for_review"),
    ("pull_request", "labeled"),
}
EDITS = {("issues", "edited"), ("pull_request", "edited"), ("issue_comment", "edited")}


def remember(window: list, item: object, keep: int) -> None:
    """Append to a bounded, oldest-first window in place."""
    window.append(item)
    del window[:-keep]


def is_bot(event: RepoEvent) -> bool:
    # The edge filters bots already; a loop through our own comments must be impossible anyway.
    # Internal events (our own starters, e.g. an issue the AlertWorkflow filed) are not webhooks.
    return not event.internal and is_bot_sender(event.sender, event.sender_type)


def idle_left(last_activity: float) -> timedelta:
    return IDLE_TIMEOUT - timedelta(seconds=workflow.now().timestamp() - last_activity)


class GitHubInbox(CommandHandling):
    KIND: ClassVar[str] = "issue"
    CLOSE_EVENT: ClassVar[str] = "issues"  # this event with action "closed" ends the inbox

    def __init__(self, repo: str, number: int, carry: InboxCarry | None) -> None:
        self.repo = repo
        self.number = number
        self.carry = carry or InboxCarry()
        self._queue: list[RepoEvent] = list(self.carry.pending)
        self.carry.pending = []
        self._handled_this_run = 0
        self._watched_work: asyncio.Task[None] | None = None  # the work beside the inbox (watch_work)

    # -- what the edge sends -------------------------------------------------------------------

    @workflow.signal(name=GITHUB_EVENT_SIGNAL)
    def github_event(self, event: RepoEvent) -> None:
        if event.delivery_id:
            if event.delivery_id in self.carry.seen:
                return  # a redelivery, or the same delivery through another replica
            remember(self.carry.seen, event.delivery_id, DEDUPE_KEPT)
        if event.body_digest:
            if event.body_digest in self.carry.seen_bodies:
                return  # the same signed body under another delivery id: a replay
            remember(self.carry.seen_bodies, event.body_digest, DEDUPE_KEPT)
        self._queue.append(event)

    # -- what operators read -------------------------------------------------------------------

    @workflow.query(name="inbox")
    def inbox(self) -> InboxSummary:
        c = self.carry
        return InboxSummary(
            kind=self.KIND,  # type: ignore[arg-type]
            repo=self.repo,
            number=self.number,
            state=c.state,
            paused=c.paused,
            events_seen=c.events_seen,
            bots_ignored=c.bots_ignored,
            last_events=c.events[-EVENTS_KEPT:],
            trigger_title=c.trigger_title,
            trigger_text=c.trigger_text,
            work_text=c.work_text,
            commands_accepted=[r for r in c.commands if r.accepted],
            commands_refused=[r for r in c.commands if not r.accepted],
            stopped_by=c.stopped_by,
            runs=c.runs,
        )

    # -- hooks for the workflow built on the inbox ---------------------------------------------

    def busy(self) -> bool:
        """True while work is under way that a continue-as-new or the idle timeout would lose."""
        return False

    def may_continue_as_new(self) -> bool:
        return True

    async def after_event(self, e: RepoEvent, note: str) -> None:
        """Called after each handled (non-ignored) event, in order, before the next one."""

    def extra_details(self) -> list[str]:
        return []

    # -- the loop ------------------------------------------------------------------------------

    async def serve(self, continue_after_events: int, next_input: Callable[[InboxCarry], object]) -> None:
        """Handle events until the inbox ends (state is no longer "received")."""
        workflow.upsert_search_attributes(
            [
                SHOPFLOOR_REPO.value_set(self.repo),
                SHOPFLOOR_ISSUE.value_set(self.number),
                SHOPFLOOR_STAGE.value_set("received"),
            ]
        )
        c = self.carry
        if c.last_activity is None:
            c.last_activity = workflow.now().timestamp()
        self.publish()
        while c.state == "received":
            self._raise_if_work_broke()
            if self.waits_changed:  # an agent run's tool call started or stopped waiting for an operator
                await self.show_waits()
                continue
            if (
                not self.busy()
                and self.may_continue_as_new()
                and (self._handled_this_run >= continue_after_events or workflow.info().is_continue_as_new_suggested())
            ):
                await workflow.wait_condition(workflow.all_handlers_finished)
                c.pending, c.runs = list(self._queue), c.runs + 1
                workflow.continue_as_new(next_input(c))
            if not self._queue:
                if self.busy():  # the work ends the inbox itself (state "done"), or an event comes
                    await workflow.wait_condition(self._wakes)
                    continue
                left = idle_left(c.last_activity)
                try:
                    if left <= timedelta(0):
                        raise TimeoutError
                    await workflow.wait_condition(
                        self._wakes, timeout=left, timeout_summary="inbox: idle, ends unless an event comes"
                    )
                except TimeoutError:
                    c.state = "idle"
                    break
                continue
            await self._handle(self._queue.pop(0))
            self._handled_this_run += 1
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set(c.state)])
        self.publish()

    def _wakes(self) -> bool:
        """What the loop waits for: an event, the inbox ending, waits to show, or the work beside
        the inbox broken."""
        return (
            bool(self._queue) or self.carry.state != "received" or self.waits_changed or self._work_error() is not None
        )

    def watch_work(self, task: asyncio.Task[None]) -> None:
        """`task` runs the work beside the inbox (a pipeline). It handles the failures it expects
        (activities, children, refusals); anything else is a bug in shopfloor's code, which
        `serve` raises so that it fails the workflow task: Temporal shows it and retries the task,
        and once the code is fixed the run goes on. Unwatched, the run would wait for work that
        died, with nothing to see."""
        self._watched_work = task

    def _work_error(self) -> BaseException | None:
        task = self._watched_work
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    def _raise_if_work_broke(self) -> None:
        error = self._work_error()
        if error is not None:
            raise error

    async def _handle(self, e: RepoEvent) -> None:
        c = self.carry
        # CI results come from apps: facts about a commit, not requests, so a bot sender does not
        # make them ignorable. They only wake a wait; CI state is read from GitHub.
        if is_bot(e) and not is_ci_event(e.event):
            c.bots_ignored += 1
            return
        c.events_seen += 1
        c.last_activity = workflow.now().timestamp()
        key = (e.event, e.action or "")
        note = ""
        if e.command is not None:
            note = await self.handle_command(e)
        elif key in TRIGGERS and e.text is not None and c.trigger_text is None:
            self.snapshot(e)
            note = "trigger"
        elif key in EDITS:
            note = "ignored: edits after the trigger" if c.trigger_text is not None else "ignored: an edit"
        if e.event == self.CLOSE_EVENT and e.action == "closed":
            c.state = "closed"
            note = note or "closed"
        record = EventRecord(
            delivery_id=e.delivery_id, event=e.event, action=e.action, sender=e.sender, at=workflow.now(), note=note
        )
        remember(c.events, record, EVENTS_KEPT)
        await self.after_event(e, note)
        self.publish()

    def snapshot(self, e: RepoEvent) -> None:
        """Fix the trigger text once: the agents read this, never a later edit."""
        if self.carry.trigger_text is None and e.text is not None:
            self.carry.trigger_text = e.text
            self.carry.trigger_title = e.title
            self.carry.trigger_delivery_id = e.delivery_id

    def publish(self) -> None:
        c = self.carry
        state = "paused" if c.paused and c.state == "received" else c.state
        lines = [
            f"**{self.KIND.replace('_', ' ')}** `{self.repo}#{self.number}` · state: **{state}**",
            f"events: {c.events_seen} · bots ignored: {c.bots_ignored} · run {c.runs}",
        ]
        if c.trigger_text is not None:
            lines.append(f"trigger: {c.trigger_title or ''} — {c.trigger_text.preview[:80]!r}")
        if c.stopped_by:
            lines.append(f"stopped by @{c.stopped_by}")
        lines += [
            f"- `/shopfloor {r.name}` by @{r.sender}: {'accepted' if r.accepted else 'refused'}"
            for r in c.commands[-5:]
        ]
        lines += self.extra_details()
        lines += [f"- {e.event}.{e.action or ''} by @{e.sender} {e.note}".rstrip() for e in c.events[-8:]]
        workflow.set_current_details("\n".join(lines))
