"""What the factory workflows receive from the edge: GitHub events and alerts as
signals, and the ids and inputs of the workflows they start.

The webhook server builds these from verified deliveries; they travel through Temporal history, so
long text (issue and comment bodies, alert descriptions) is sanitized, snapshotted into the blob
store and carried as a digest plus a short preview. New fields always get defaults.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

# Workflow type names and signal names: the edge starts workflows by name (it never imports
# `shopfloor.workflows`), so these strings are the contract between the two.
ISSUE_WORKFLOW = "IssueWorkflow"
PULL_REQUEST_WORKFLOW = "PullRequestWorkflow"
ALERT_WORKFLOW = "AlertWorkflow"
GITHUB_EVENT_SIGNAL = "github_event"
ALERT_SIGNAL = "alert"

REPO_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"
CommandName = Literal[
    "fix",
    "review",
    "approve",
    "stop",
    "pause",
    "resume",
    "retry",
    "approve-call",
    "reject-call",
    "steer",  # a message for the running agent (`--model P:M` switches its model, within the operator's bounds)
    "raise-limits",  # more budget for the running agent: `--steps N`, `--cost USD`
    "cancel",  # the same as stop: end the run (and its running agent) with its last checkpoint
]
# Commands that change code or merge: the sender needs write access to the repository.
WRITE_COMMANDS: frozenset[str] = frozenset(
    {"fix", "approve", "retry", "review", "approve-call", "reject-call", "steer", "raise-limits"}
)


def issue_workflow_id(repo: str, number: int) -> str:
    return f"issue/{repo}/{number}"


def pr_workflow_id(repo: str, number: int) -> str:
    return f"pr/{repo}/{number}"


_SAFE_FINGERPRINT = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def safe_fingerprint(raw: str) -> str:
    """A fingerprint usable in a workflow id: kept when plain, else its sha256 (stable)."""
    return raw if _SAFE_FINGERPRINT.match(raw) else "sha256-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def alert_workflow_id(source: str, fingerprint: str) -> str:
    return f"alert/{source}/{safe_fingerprint(fingerprint)}"


class CommentCommand(BaseModel):
    """`/shopfloor <name> [args]` from a comment (the first such line wins)."""

    name: CommandName
    args: str = ""

    @property
    def needs_write(self) -> bool:
        return self.name in WRITE_COMMANDS


class TextSnapshot(BaseModel):
    """Untrusted text as it was when the event arrived, stripped of hidden content."""

    digest: str  # blob store key of {"title": ..., "body": ...} (sanitized)
    preview: str = ""  # first ~200 characters of the body, for status views
    chars: int = 0


class RepoEvent(BaseModel):
    """One GitHub delivery about an issue or pull request, as the workflow for it receives it."""

    delivery_id: str  # X-GitHub-Delivery: the same event delivered again has the same id
    # sha256 of the delivery's signed body: a captured body resent under a new delivery id is
    # the same bytes, so workflows refuse it by this too ("" for shopfloor's own starters).
    body_digest: str = ""
    event: str  # X-GitHub-Event
    action: str | None = None
    repo: str = Field(pattern=REPO_PATTERN)
    number: int | None = None  # issue or PR number, when the event is about one
    is_pull_request: bool = False
    sender: str
    sender_type: str = "User"
    title: str | None = None  # sanitized; GitHub caps titles at 256 characters
    text: TextSnapshot | None = None  # issue/PR body, or the comment for comment events
    labels: list[str] = Field(default_factory=list)
    label: str | None = None  # the label added/removed, for labeled/unlabeled
    command: CommentCommand | None = None
    comment_id: int | None = None
    head_sha: str | None = None  # PR head, check run / suite / status sha
    # A line comment on a pull request (pull_request_review_comment): the file and line it is on,
    # and the review it belongs to (also set on pull_request_review events: the review's own id).
    path: str | None = None
    line: int | None = None
    review_id: int | None = None
    state: str | None = None  # review state, status state, check conclusion
    check_name: str | None = None
    installation_id: int | None = None
    received_at: datetime | None = None
    # When GitHub says it happened (GitHub's clock): a comment's created_at, a pull request's
    # updated_at. An approval names the head at its comment's created_at.
    occurred_at: datetime | None = None
    # Set only by shopfloor's own starters (AlertWorkflow filing an issue as the bot, the
    # reconciler, `shopfloor run issue`), never by the webhook edge: an internal event is trusted
    # even when its sender is the bot. Only code with Temporal access can send one.
    internal: bool = False


class IssueTextInput(BaseModel):
    repo: str = Field(pattern=REPO_PATTERN)
    number: int = Field(ge=1)
    quote: bool = True  # render IssueText.quote (a check for edits needs only the digest)


class IssueText(BaseModel):
    """An issue's title and body as GitHub showed them at one moment: what the agents work from.

    The text is stored in the blob store like the edge's snapshots (`text.digest`); `quote` is
    that text as the agents get it, rendered inert for the progress comment (capped like a goal).
    """

    text: TextSnapshot
    title: str = ""  # sanitized, capped like the edge's
    updated_at: datetime | None = None  # GitHub's, at the read
    state: str = "open"
    quote: str = ""  # markdown: a fenced block, so nothing in it renders, links or mentions
    cause: str = ""  # what made the run read it (set by the workflow), e.g. "@maria's `/shopfloor fix`"


class IssueState(BaseModel):
    """Whether an issue is open on GitHub now (`missing`: deleted, transferred, or not visible)."""

    state: Literal["open", "closed", "missing"] = "open"
    state_reason: str | None = None
    updated_at: datetime | None = None


AlertStatus = Literal["firing", "resolved"]


class Alert(BaseModel):
    """An alert from any source, normalized (Alertmanager, Sentry, generic JSON)."""

    source: Literal["alertmanager", "sentry", "generic"]
    fingerprint: str
    status: AlertStatus
    repo: str | None = Field(default=None, pattern=REPO_PATTERN)  # from SHOPFLOOR_ALERT_ROUTES; None: unrouted
    labels: dict[str, str] = Field(default_factory=dict)
    summary: str = ""  # one line
    description: str = ""  # sanitized, capped at 4000 characters
    links: list[str] = Field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    occurrences: int = Field(default=1, ge=1)
    delivery_id: str = ""  # a stable id of this notification, for de-duplication in the workflow


class IssueWorkflowInput(BaseModel):
    repo: str = Field(pattern=REPO_PATTERN)
    number: int = Field(ge=1)


class PullRequestWorkflowInput(BaseModel):
    repo: str = Field(pattern=REPO_PATTERN)
    number: int = Field(ge=1)


class AlertWorkflowInput(BaseModel):
    source: str
    fingerprint: str
    repo: str | None = Field(default=None, pattern=REPO_PATTERN)
