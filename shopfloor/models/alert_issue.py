"""What an AlertWorkflow keeps while it files, follows and watches the bug for its fingerprint
(docs/design.md, The factory workflows), and the inputs and outputs of its activities
(activities/github/alert_issues.py, activities/alert_goal.py).

AlertWatch extends the counting AlertState (the `alert_state` query and the continue-as-new
carry), AlertRunInput the edge's AlertWorkflowInput, AlertRunOutcome the AlertOutcome: clients
that read the older shapes keep working, and every new field has a default so older histories
deserialize.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopfloor.models.github_ops import RepoName
from shopfloor.models.inbox import Alert, AlertStatus
from shopfloor.models.inbox_state import AlertInboxInput, AlertOutcome, AlertState

# The label every issue filed from an alert carries: how the filing activity finds the open one
# again (GitHub's search does not index the hidden marker, an HTML comment).
ALERT_ISSUE_LABEL = "shopfloor:alert"
ALERT_ISSUE_LABELS = ("bug", ALERT_ISSUE_LABEL)
ISSUE_MARKER_KIND = "alert-issue"  # comment_marker(<alert workflow id>, kind) in the issue body
OCCURRENCES_KIND = "occurrences"  # the one comment with the count, updated in place
ASSESSMENT_KIND = "assessment"  # the assessing agent's verdict on the filed issue

DEFAULT_REFIRE_WINDOW_SECONDS = 24 * 3600.0
DEFAULT_POLL_SECONDS = 60.0
DEFAULT_POLL_MAX_SECONDS = 1800.0
# An issue closed on GitHub whose IssueWorkflow still runs after this long counts as closed anyway
# (its `issues.closed` webhook was lost).
DEFAULT_CLOSE_GRACE_SECONDS = 3600.0
# The assessing agent's verdict on a fingerprint stands this long: firings meanwhile reuse it
# instead of spending a model call each.
DEFAULT_REASSESS_SECONDS = 3600.0

# assessing: no issue yet (deciding, or not actionable so far); filed: the issue exists, its
# IssueWorkflow is not running (not started yet, or ended without closing it); fixing: its
# IssueWorkflow runs; watching: the issue was closed, the refire window is open; reopened: it fired
# again in the window, the issue is open again with a new run; closed: the window passed (the
# run ends); unrouted: no repository, nothing filed (the run ends).
AlertPhase = Literal["assessing", "filed", "fixing", "watching", "reopened", "closed", "unrouted"]
AlertEnd = Literal["watching", "idle", "closed", "unrouted"]


class AlertAssessment(BaseModel):
    """Whether a monitoring alert is worth an issue: the `assess_alert` agent's result (registered
    in agents/outputs.py), kept in AlertWorkflow's state."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is a validation error the model can fix

    actionable: bool = Field(description="True when a code change in this repository can plausibly fix what fired.")
    reason: str = Field(max_length=1000, description="Why (not): what you found in the code, in a few sentences.")
    title: str = Field(min_length=1, max_length=120, description="The title of the issue to file, in your words.")
    severity: Literal["low", "medium", "high", "critical"]
    suspected_area: str = Field(
        default="", max_length=2000, description="Files and functions that likely cause it, with why."
    )


class AlertWatch(AlertState):
    phase: AlertPhase = "assessing"
    assessment: str = ""  # why the alert is (not) actionable: the rules', the agent's, or the fallback's word
    # The assessing agent (workflows/alert_issue.py): its runs so far (child `<id>/assess-<n>`),
    # its last verdict and when it came (it stands for reassess_seconds), what it cost; the verdict
    # the current issue was filed on (None: the rules, or the fallback, filed it) and whether its
    # `assessment` comment is on the issue.
    assessments: int = 0
    verdict: AlertAssessment | None = None
    verdict_run: str = ""  # the child AgentWorkflow that gave it
    assessed_at: datetime | None = None
    assess_cost_usd: float = 0.0
    filing_verdict: AlertAssessment | None = None
    assessment_posted: bool = False
    want_issue: bool = False  # actionable: an issue should exist for this fingerprint
    filing_alert: Alert | None = None  # the notification found actionable: its text files the issue
    issue_number: int | None = None
    issue_url: str = ""
    issues_filed: int = 0  # issues this workflow filed (a firing after the window files another)
    issue_occurrences: int = 0  # firing occurrences since the current issue was wanted
    reported_occurrences: int = 0  # what GitHub shows (issue body at filing, then the comment)
    starts_wanted: int = 0  # IssueWorkflow runs asked for (1 at filing, +1 per reopen)
    starts_done: int = 0
    reopened: int = 0  # times the issue was reopened because the alert fired after the fix
    reopen_pending: bool = False
    issue_closed_at: datetime | None = None
    closed_reason: str | None = None  # GitHub's state_reason: completed (fixed) / not_planned
    watch_until: datetime | None = None
    issue_workflow: str = ""  # the IssueWorkflow's status as last seen: running, completed, absent...
    closed_seen_at: float | None = None  # workflow time we first saw the issue closed on GitHub
    # Verification: when the last `resolved` notification was taken while GitHub showed the issue
    # closed (None: none, or a firing since); once the issue closed as completed, "verified" is
    # recorded on the issue, once per round (`verified_round`: the `reopened` count it was for).
    resolved_at: datetime | None = None
    verified_round: int | None = None
    verified_at: datetime | None = None
    poll_delay: float = 0.0  # seconds to the next status poll (backs off while nothing changes)
    last_error: str = ""  # the last GitHub/Temporal step that failed (retried on the next tick)
    pending: list[Alert] = Field(default_factory=list)  # received, not yet handled (continue-as-new)


class AlertRunInput(AlertInboxInput):
    """AlertWorkflowInput (what the edge sends) plus what the workflow and tests may set."""

    carry: AlertWatch | None = None
    refire_window_seconds: float = Field(default=DEFAULT_REFIRE_WINDOW_SECONDS, gt=0)
    poll_seconds: float = Field(default=DEFAULT_POLL_SECONDS, gt=0)
    poll_max_seconds: float = Field(default=DEFAULT_POLL_MAX_SECONDS, gt=0)
    close_grace_seconds: float = Field(default=DEFAULT_CLOSE_GRACE_SECONDS, ge=0)
    assess_with_agent: bool = True  # False: the deterministic rules alone decide (no model call)
    reassess_seconds: float = Field(default=DEFAULT_REASSESS_SECONDS, gt=0)


class AlertRunOutcome(AlertOutcome):
    # Wider than AlertOutcome's watching/idle on purpose (a run also ends closed or unrouted);
    # the older shape is kept as it was for the clients that read it.
    state: AlertEnd = "idle"  # type: ignore[assignment]
    phase: AlertPhase = "closed"
    issue_number: int | None = None
    issue_url: str = ""
    issues_filed: int = 0
    reopened: int = 0
    reason: str = ""


# --- activities -------------------------------------------------------------------------------


class FileAlertIssueInput(BaseModel):
    repo: RepoName
    workflow_id: str  # the AlertWorkflow's id: the issue body's hidden marker
    source: str
    fingerprint: str
    summary: str = ""
    description: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    links: list[str] = Field(default_factory=list)
    occurrences: int = 1
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    # The assessing agent's title for the issue ("" when the rules alone decided: the summary).
    title: str = Field(default="", max_length=120)


class AlertGoalInput(BaseModel):
    """The alert as the AlertWorkflow holds it: the assessing agent's goal (activities/alert_goal.py).

    The text fields are untrusted (the sender's, sanitized and capped at the edge); the goal quotes them.
    """

    repo: RepoName
    source: str
    fingerprint: str
    status: AlertStatus = "firing"
    summary: str = ""
    description: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    links: list[str] = Field(default_factory=list)
    occurrences: int = 1  # over every notification so far
    notifications: int = 1
    first_seen: datetime | None = None
    last_seen: datetime | None = None


class FiledAlertIssue(BaseModel):
    number: int
    url: str = ""
    title: str = ""
    created: bool  # False: the open issue with our marker was found (a retry, or a restarted run)


class ReopenIssueInput(BaseModel):
    repo: RepoName
    issue_number: int = Field(ge=1)


class ReopenIssueOutput(BaseModel):
    already_open: bool = False


class StartAlertIssueInput(BaseModel):
    repo: RepoName
    number: int = Field(ge=1)
    delivery_id: str  # stable: alert:<source>/<fingerprint>#<n>[:reopened-<k>]
    action: Literal["opened", "reopened"] = "opened"
    # reopened: a finished run of issue/<repo>/<n> may be followed by a new one; opened: it may not.
    new_run: bool = False


class StartAlertIssueOutput(BaseModel):
    workflow_id: str
    outcome: Literal["started", "signalled", "finished_before"]


class AlertIssueStatusInput(BaseModel):
    repo: RepoName
    number: int = Field(ge=1)


class AlertIssueStatus(BaseModel):
    state: str = "open"  # the GitHub issue's
    state_reason: str | None = None
    closed_at: datetime | None = None
    workflow: str = "absent"  # issue/<repo>/<n>'s latest run: running, completed, terminated, ..., absent
    outcome_state: str | None = None  # its IssueOutcome.state when it completed
