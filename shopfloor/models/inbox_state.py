"""State, queries and outcomes of the factory workflows (IssueWorkflow, PullRequestWorkflow,
AlertWorkflow) while they act as durable event inboxes (docs/design.md, The factory workflows).

Everything here travels through history (queries, continue-as-new carries, results), so it holds
ids, digests and short previews only, every list is bounded by the workflow that fills it, and
every field has a default so that older histories still deserialize.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.call_waits import CallWait, EndedWait
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import (
    AlertWorkflowInput,
    IssueText,
    IssueWorkflowInput,
    PullRequestWorkflowInput,
    RepoEvent,
    TextSnapshot,
)
from shopfloor.models.pull_request_review import PullReviewCarry

# "received": waiting for events (and, in an IssueWorkflow, running the pipeline); "done": the
# issue's pipeline ended (merged, salvaged, failed or cancelled; IssueOutcome.factory says which).
InboxState = Literal["received", "closed", "stopped", "idle", "done"]
AlertRunState = Literal["watching", "idle"]

# What the workflow remembers by default before it continues as new (also settable per run, so
# tests can force a continue-as-new after a few events).
DEFAULT_CONTINUE_AFTER_EVENTS = 500


class EventRecord(BaseModel):
    """One delivery the workflow took in, as the `inbox` query lists it."""

    delivery_id: str = ""
    event: str = ""
    action: str | None = None
    sender: str = ""
    at: datetime | None = None  # workflow time when it was handled
    note: str = ""  # "trigger", "command fix accepted", "ignored: edits after the trigger", ...


class CommandRecord(BaseModel):
    """A `/shopfloor <name>` comment and what became of it."""

    name: str = ""
    sender: str = ""
    comment_id: int | None = None
    delivery_id: str = ""
    accepted: bool = False
    permission: str = ""  # what GitHub said the sender has ("unknown" if it could not be asked)
    reason: str = ""  # why it was refused
    text: TextSnapshot | None = None  # the comment, snapshotted (args live there, not in history)
    at: datetime | None = None
    replied: bool = False  # a refusal reply is on GitHub


class CachedPermission(BaseModel):
    permission: str = "none"
    checked_at: float = 0.0  # workflow time, seconds since the epoch


class InboxCarry(BaseModel):
    """Everything an issue or PR inbox keeps across continue-as-new."""

    seen: list[str] = Field(default_factory=list)  # last delivery ids, oldest first (dedupe)
    seen_bodies: list[str] = Field(default_factory=list)  # last delivery body digests (replays)
    events_seen: int = 0
    bots_ignored: int = 0
    events: list[EventRecord] = Field(default_factory=list)
    trigger_title: str | None = None
    trigger_text: TextSnapshot | None = None
    trigger_delivery_id: str | None = None
    # The issue's text as read from GitHub when work started on it (its `quote` left out).
    work_text: IssueText | None = None
    commands: list[CommandRecord] = Field(default_factory=list)
    handled_comments: list[int] = Field(default_factory=list)  # a comment's command acts once
    permissions: dict[str, CachedPermission] = Field(default_factory=dict)  # "owner/repo:login"
    paused: bool = False
    state: InboxState = "received"
    stopped_by: str | None = None
    last_activity: float | None = None  # workflow time of the last event (idle timeout)
    runs: int = 1  # how many runs (continue-as-new) this inbox has had
    pending: list[RepoEvent] = Field(default_factory=list)  # received, not yet handled
    # Tool calls this run's agent runs wait on an operator for, and the last waits that ended.
    call_waits: list[CallWait] = Field(default_factory=list)
    call_waits_ended: list[EndedWait] = Field(default_factory=list)


class IssueInboxInput(IssueWorkflowInput):
    """IssueWorkflowInput (what the edge sends) plus what the workflow passes itself."""

    carry: InboxCarry | None = None
    continue_after_events: int = Field(default=DEFAULT_CONTINUE_AFTER_EVENTS, ge=1)


class PullRequestInboxInput(PullRequestWorkflowInput):
    carry: InboxCarry | None = None
    continue_after_events: int = Field(default=DEFAULT_CONTINUE_AFTER_EVENTS, ge=1)
    review: PullReviewCarry | None = None  # the review run, carried across continue-as-new


class InboxSummary(BaseModel):
    """The `inbox` query: what an issue or PR workflow has received so far."""

    kind: Literal["issue", "pull_request"] = "issue"
    repo: str = ""
    number: int = 0
    state: InboxState = "received"
    paused: bool = False
    events_seen: int = 0
    bots_ignored: int = 0
    last_events: list[EventRecord] = Field(default_factory=list)  # newest last, at most 20
    trigger_title: str | None = None
    trigger_text: TextSnapshot | None = None  # digest + preview of the text as it was at trigger time
    work_text: IssueText | None = None  # the text the agents work from, read from GitHub when work started
    commands_accepted: list[CommandRecord] = Field(default_factory=list)
    commands_refused: list[CommandRecord] = Field(default_factory=list)
    stopped_by: str | None = None
    runs: int = 1


class IssueOutcome(BaseModel):
    """How an IssueWorkflow ended."""

    state: InboxState = "closed"
    repo: str = ""
    number: int = 0
    events_seen: int = 0
    commands_accepted: int = 0
    commands_refused: int = 0
    stopped_by: str | None = None
    reason: str = ""
    factory: FactoryState | None = None  # IssueWorkflow: the pipeline, when it started


class PullRequestOutcome(IssueOutcome):
    """How a PullRequestWorkflow ended; `factory` is its review run (verdict, merge sha)."""


class AlertNotification(BaseModel):
    delivery_id: str = ""
    status: str = ""
    occurrences: int = 0
    at: datetime | None = None


class AlertState(BaseModel):
    """The `alert_state` query, and what an AlertWorkflow carries across continue-as-new."""

    source: str = ""
    fingerprint: str = ""
    repo: str | None = None
    state: AlertRunState = "watching"
    occurrences: int = 0  # summed over distinct notifications
    notifications: int = 0
    last_status: str | None = None
    summary: str = ""
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    last_notifications: list[AlertNotification] = Field(default_factory=list)  # newest last, ≤ 20
    seen: list[str] = Field(default_factory=list)  # last delivery ids (dedupe)
    last_activity: float | None = None
    runs: int = 1


class AlertInboxInput(AlertWorkflowInput):
    carry: AlertState | None = None
    continue_after_events: int = Field(default=DEFAULT_CONTINUE_AFTER_EVENTS, ge=1)


class AlertOutcome(BaseModel):
    state: AlertRunState = "idle"
    occurrences: int = 0
    notifications: int = 0
    last_status: str | None = None
