"""The parts of GitHub webhook bodies shopfloor reads: users, repositories, issues, comments,
pull requests, reviews and CI results.

Lenient on purpose: unknown keys are ignored (GitHub adds fields all the time) and anything
GitHub leaves out of some deliveries is optional. Labels, pull-request references and branches
are reduced to the names and numbers routing needs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class GitHubModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


def names(value: Any) -> Any:
    """[{"name": "bug", ...}] -> ["bug"] (strings pass through)."""
    if isinstance(value, list):
        return [v.get("name") if isinstance(v, dict) else v for v in value]
    return value


def numbers(value: Any) -> Any:
    """[{"number": 2, ...}] -> [2] (integers pass through)."""
    if isinstance(value, list):
        return [v.get("number") if isinstance(v, dict) else v for v in value]
    return value


def dict_or_none(value: Any) -> Any:
    """A nested object GitHub may send in another shape: anything but a JSON object is absent."""
    return value if isinstance(value, dict) else None


def str_or_none(value: Any) -> Any:
    return value if isinstance(value, str) else None


def is_bot_sender(login: str | None, sender_type: str | None) -> bool:
    """Whether a sender is an app or bot account: type "Bot", or a login ending in "[bot]" (e.g.
    "shopfloor[bot]", "renovate[bot]"; any case). The edge and the inbox both decide by this."""
    return sender_type == "Bot" or (login or "").lower().endswith("[bot]")


class Actor(GitHubModel):
    """A user, bot or organization as GitHub embeds it (`sender`, `user`, `owner`)."""

    login: str
    id: int | None = None
    type: str | None = None  # "User", "Bot", "Organization"

    @property
    def is_bot(self) -> bool:
        return is_bot_sender(self.login, self.type)


class Label(GitHubModel):
    """The label a `labeled`/`unlabeled` delivery is about."""

    name: str | None = None


class Repository(GitHubModel):
    id: int
    name: str
    full_name: str
    owner: Actor
    default_branch: str | None = None
    clone_url: str | None = None
    html_url: str | None = None
    private: bool = False


class RepoRef(GitHubModel):
    """A repository as referenced from a branch (`head.repo`); GitHub sends null for a deleted fork."""

    id: int | None = None
    name: str | None = None
    full_name: str | None = None


class InstallationRef(GitHubModel):
    id: int


class Installation(GitHubModel):
    id: int
    app_id: int | None = None
    account: Actor | None = None


class Issue(GitHubModel):
    number: int
    title: str
    body: str | None = None
    state: str  # "open" | "closed"
    state_reason: str | None = None  # "completed" | "not_planned" | "reopened"
    labels: list[str] = Field(default_factory=list)
    user: Actor
    author_association: str | None = None
    html_url: str | None = None
    pull_request: dict[str, Any] | None = None  # present (links only) when the issue is a PR
    created_at: datetime | None = None
    updated_at: datetime | None = None

    _labels = field_validator("labels", mode="before")(names)

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None


class Comment(GitHubModel):
    """An issue comment, or a pull-request review comment (which also has path and commit)."""

    id: int
    body: str | None = None
    user: Actor
    author_association: str | None = None
    html_url: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    path: str | None = None
    commit_id: str | None = None
    line: int | None = None
    pull_request_review_id: int | None = None


class Branch(GitHubModel):
    ref: str
    sha: str
    label: str | None = None  # "owner:branch"
    repo: RepoRef | None = None

    @property
    def repo_full_name(self) -> str | None:
        return self.repo.full_name if self.repo else None


class PullRequest(GitHubModel):
    number: int
    title: str
    body: str | None = None
    state: str  # "open" | "closed"
    draft: bool = False
    merged: bool = False
    merged_at: datetime | None = None
    merge_commit_sha: str | None = None  # on an open PR: GitHub's test-merge commit, not a merge
    head: Branch
    base: Branch
    user: Actor
    html_url: str | None = None
    labels: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    _labels = field_validator("labels", mode="before")(names)

    @model_validator(mode="after")
    def _merged_from_timestamp(self) -> PullRequest:
        # Review and review-comment deliveries omit `merged`; `merged_at` still tells.
        if self.merged_at is not None:
            self.merged = True
        return self


class Review(GitHubModel):
    id: int
    state: str  # webhooks: "approved" | "changes_requested" | "commented" | "dismissed"
    body: str | None = None
    user: Actor
    commit_id: str | None = None
    html_url: str | None = None
    submitted_at: datetime | None = None

    @field_validator("state", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        # The REST API says "APPROVED", webhooks say "approved": one spelling downstream.
        return value.lower() if isinstance(value, str) else value


class App(GitHubModel):
    id: int | None = None
    slug: str | None = None  # absent from some older deliveries
    name: str | None = None


class CheckSuiteRef(GitHubModel):
    """The suite a check run belongs to, as the run embeds it: only its branch is read."""

    head_branch: str | None = None

    _branch = field_validator("head_branch", mode="before")(str_or_none)


class CheckRun(GitHubModel):
    id: int
    name: str
    status: str  # "queued" | "in_progress" | "completed" ...
    conclusion: str | None = None
    head_sha: str
    html_url: str | None = None
    details_url: str | None = None
    app: App | None = None
    pull_requests: list[int] = Field(default_factory=list)
    check_suite: CheckSuiteRef | None = None

    _prs = field_validator("pull_requests", mode="before")(numbers)
    _suite = field_validator("check_suite", mode="before")(dict_or_none)

    @property
    def head_branch(self) -> str | None:
        """The branch the run's suite ran on (None when the delivery does not say)."""
        return self.check_suite.head_branch if self.check_suite is not None else None


class CheckSuite(GitHubModel):
    id: int
    status: str | None = None
    conclusion: str | None = None
    head_sha: str
    head_branch: str | None = None
    app: App | None = None
    pull_requests: list[int] = Field(default_factory=list)

    _prs = field_validator("pull_requests", mode="before")(numbers)


class WorkflowRun(GitHubModel):
    id: int
    name: str | None = None
    status: str | None = None
    conclusion: str | None = None
    head_sha: str
    head_branch: str | None = None
    html_url: str | None = None
    run_number: int | None = None
    pull_requests: list[int] = Field(default_factory=list)

    _prs = field_validator("pull_requests", mode="before")(numbers)


class PushCommit(GitHubModel):
    id: str
    message: str = ""


class Pusher(GitHubModel):
    name: str
    email: str | None = None


class Hook(GitHubModel):
    id: int | None = None
    type: str | None = None  # "Repository" | "Organization" | "App"
    app_id: int | None = None
    events: list[str] = Field(default_factory=list)
