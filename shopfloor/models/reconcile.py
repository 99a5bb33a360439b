"""The reconciler's inputs and outputs (ReconcileWorkflow and its activities).

The reconciler closes the edge's loop (docs/design.md, Trust and safety): the webhook server answers
503 when Temporal did not accept an event, and this workflow, run by a Temporal Schedule, redelivers
what GitHub recorded as failed and starts the IssueWorkflow of labelled open issues that have none.
Everything here travels through history, so it holds ids, numbers and one-line reasons only. New
fields always get defaults.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from shopfloor.models.github_ops import RepoName

# Only hooks whose URL holds this are shopfloor's: other services' failed deliveries are theirs.
SHOPFLOOR_HOOK_PATH = "/webhooks/github"
# The GitHub App's own webhook, where a report names a repository (its deliveries span them all).
APP_HOOK = "(app webhook)"
APP_HOOK_ID = 0  # FailedDelivery.hook_id of the App's webhook (its API has no hook id)


class ReconcileInput(BaseModel):
    repos: list[RepoName] = Field(default_factory=list)  # which repositories to reconcile
    since_minutes: int = Field(default=60, ge=1)  # how far back to look for failed deliveries
    trigger_label: str = "shopfloor"
    max_redeliveries: int = Field(default=50, ge=0)  # per run, over all repositories
    hook_url_contains: str = SHOPFLOOR_HOOK_PATH  # "" reconciles every hook of the repository
    # Also the GitHub App's own webhook (`/app/hook/deliveries`, with the App's JWT): where a
    # GitHub App deployment's events arrive. Set when the factory runs as a GitHub App.
    app_hook: bool = False


class Redelivered(BaseModel):
    repo: str
    hook_id: int
    delivery_id: int
    guid: str
    event: str = ""


class Skipped(BaseModel):
    repo: str
    what: str  # "delivery <guid>", "hook 12", "issue #7"
    reason: str


class RepoError(BaseModel):
    repo: str
    step: str  # "deliveries", "redeliver", "issues", "start"
    message: str  # one line, no secrets (ApplicationError messages from the GitHub layer)


class ReconcileReport(BaseModel):
    redelivered: list[Redelivered] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    issues_started: list[str] = Field(default_factory=list)  # workflow ids
    errors: list[RepoError] = Field(default_factory=list)


# --- activities -----------------------------------------------------------------------------


class FailedDeliveriesInput(BaseModel):
    repo: RepoName
    since: datetime  # attempts older than this are not looked at
    hook_url_contains: str = SHOPFLOOR_HOOK_PATH
    limit: int = Field(default=50, ge=1)  # failures returned at most (history stays small)


class FailedDelivery(BaseModel):
    hook_id: int
    delivery_id: int  # the latest (failed) attempt; GitHub redelivers it with the same guid
    guid: str
    event: str = ""
    action: str | None = None
    status_code: int = 0
    status: str = ""


class FailedDeliveriesOutput(BaseModel):
    failed: list[FailedDelivery] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)


class RedeliverInput(BaseModel):
    repo: RepoName
    hook_id: int
    delivery_id: int


class FailedAppDeliveriesInput(BaseModel):
    since: datetime  # attempts older than this are not looked at
    limit: int = Field(default=50, ge=1)


class AppRedeliverInput(BaseModel):
    delivery_id: int


class RedeliverOutput(BaseModel):
    accepted: bool = True


class LabelledIssuesInput(BaseModel):
    repo: RepoName
    label: str


class LabelledIssuesOutput(BaseModel):
    numbers: list[int] = Field(default_factory=list)


class StartIssuesInput(BaseModel):
    repo: RepoName
    numbers: list[int] = Field(default_factory=list)
    label: str = "shopfloor"


class StartIssuesOutput(BaseModel):
    started: list[str] = Field(default_factory=list)  # workflow ids
    skipped: list[Skipped] = Field(default_factory=list)
