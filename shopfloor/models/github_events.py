"""shopfloor's own models of GitHub webhook events, and `parse_event` to build one from a delivery.

Each model carries the event name (the `X-GitHub-Event` header) in `event`, so a parsed event
round-trips through Temporal's data converter as the same type (`GitHubEvent` discriminates on
it). Events shopfloor does not route on become an `OtherEvent` with the common fields only.
Beside them, the two questions the edge and the workflows' inbox both ask of an event: is it a CI
result (`is_ci_event`), and is its sender a bot (`is_bot_sender`)?
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationError, field_validator

from shopfloor.models.github_objects import (
    Actor,
    CheckRun,
    CheckSuite,
    Comment,
    GitHubModel,
    Hook,
    Installation,
    InstallationRef,
    Issue,
    Label,
    PullRequest,
    PushCommit,
    Pusher,
    Repository,
    Review,
    WorkflowRun,
    dict_or_none,
    names,
)
from shopfloor.models.github_objects import is_bot_sender as is_bot_sender  # re-exported: asked of events

# CI results come from apps (github-actions[bot], a CI app): facts about a commit that a workflow
# waits for, not requests, so a bot sender does not make them ignorable.
CI_EVENTS = frozenset({"check_run", "check_suite", "status", "workflow_run"})


def is_ci_event(event_name: str) -> bool:
    """Whether an event (its `X-GitHub-Event` name) reports a CI result about a commit."""
    return event_name in CI_EVENTS


class MalformedEvent(ValueError):
    """A webhook body that is not a valid event of its kind; the message says what is wrong."""


class EventBase(GitHubModel):
    """What every delivery may carry. Events about a repository require it (`RepoEventBase`)."""

    event: str
    action: str | None = None  # push, status and ping carry none
    repository: Repository | None = None  # absent on installation, organization and App hook events
    sender: Actor | None = None
    installation: InstallationRef | None = None  # present on deliveries to a GitHub App

    @property
    def repo_full_name(self) -> str | None:
        return self.repository.full_name if self.repository is not None else None

    @property
    def sender_login(self) -> str | None:
        return self.sender.login if self.sender else None

    @property
    def sender_is_bot(self) -> bool:
        return self.sender is not None and self.sender.is_bot

    @property
    def installation_id(self) -> int | None:
        return self.installation.id if self.installation else None


class RepoEventBase(EventBase):
    repository: Repository


class IssuesEvent(RepoEventBase):
    event: Literal["issues"] = "issues"
    issue: Issue
    label: Label | None = None  # on labeled/unlabeled

    @property
    def label_name(self) -> str | None:
        return self.label.name if self.label else None


class IssueCommentEvent(RepoEventBase):
    event: Literal["issue_comment"] = "issue_comment"
    issue: Issue
    comment: Comment


class PullRequestEvent(RepoEventBase):
    event: Literal["pull_request"] = "pull_request"
    number: int | None = None
    pull_request: PullRequest
    before: str | None = None  # on synchronize
    after: str | None = None
    label: Label | None = None  # on labeled/unlabeled

    _label = field_validator("label", mode="before")(dict_or_none)  # read only when it is an object

    @property
    def label_name(self) -> str | None:
        return self.label.name if self.label else None


class PullRequestReviewEvent(RepoEventBase):
    event: Literal["pull_request_review"] = "pull_request_review"
    review: Review
    pull_request: PullRequest


class PullRequestReviewCommentEvent(RepoEventBase):
    event: Literal["pull_request_review_comment"] = "pull_request_review_comment"
    comment: Comment
    pull_request: PullRequest


class PushEvent(RepoEventBase):
    event: Literal["push"] = "push"
    ref: str
    before: str
    after: str
    created: bool = False
    deleted: bool = False
    forced: bool = False
    commits: list[PushCommit] = Field(default_factory=list)
    head_commit: PushCommit | None = None  # null when a branch or tag is deleted
    pusher: Pusher | None = None

    @property
    def branch(self) -> str | None:
        """The branch pushed to; None for a tag."""
        return self.ref.removeprefix("refs/heads/") if self.ref.startswith("refs/heads/") else None

    @property
    def commit_count(self) -> int:
        return len(self.commits)

    @property
    def commit_ids(self) -> list[str]:
        return [c.id for c in self.commits]


class StatusEvent(RepoEventBase):
    event: Literal["status"] = "status"
    id: int | None = None
    sha: str
    state: str  # "pending" | "success" | "failure" | "error"
    context: str = "default"
    description: str | None = None
    target_url: str | None = None
    branches: list[str] = Field(default_factory=list)

    _branches = field_validator("branches", mode="before")(names)  # the branches holding `sha`


class CheckRunEvent(RepoEventBase):
    event: Literal["check_run"] = "check_run"
    check_run: CheckRun


class CheckSuiteEvent(RepoEventBase):
    event: Literal["check_suite"] = "check_suite"
    check_suite: CheckSuite


class WorkflowRunEvent(RepoEventBase):
    event: Literal["workflow_run"] = "workflow_run"
    workflow_run: WorkflowRun


class InstallationEvent(EventBase):
    event: Literal["installation"] = "installation"
    installation: Installation  # type: ignore[assignment]  # the full object here, not just the id
    repositories: list[str] = Field(default_factory=list)  # full names, on created

    @field_validator("repositories", mode="before")
    @classmethod
    def _full_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [r.get("full_name") if isinstance(r, dict) else r for r in value]
        return value


class PingEvent(EventBase):
    event: Literal["ping"] = "ping"
    zen: str | None = None
    hook_id: int | None = None
    hook: Hook | None = None


class OtherEvent(EventBase):
    """An event shopfloor does not route on: the common fields only."""


EVENT_MODELS: dict[str, type[EventBase]] = {
    "issues": IssuesEvent,
    "issue_comment": IssueCommentEvent,
    "pull_request": PullRequestEvent,
    "pull_request_review": PullRequestReviewEvent,
    "pull_request_review_comment": PullRequestReviewCommentEvent,
    "push": PushEvent,
    "status": StatusEvent,
    "check_run": CheckRunEvent,
    "check_suite": CheckSuiteEvent,
    "workflow_run": WorkflowRunEvent,
    "installation": InstallationEvent,
    "ping": PingEvent,
}


def _event_tag(value: Any) -> str:
    event = value.get("event") if isinstance(value, dict) else getattr(value, "event", None)
    return event if event in EVENT_MODELS else "other"


GitHubEvent = Annotated[
    Annotated[IssuesEvent, Tag("issues")]
    | Annotated[IssueCommentEvent, Tag("issue_comment")]
    | Annotated[PullRequestEvent, Tag("pull_request")]
    | Annotated[PullRequestReviewEvent, Tag("pull_request_review")]
    | Annotated[PullRequestReviewCommentEvent, Tag("pull_request_review_comment")]
    | Annotated[PushEvent, Tag("push")]
    | Annotated[StatusEvent, Tag("status")]
    | Annotated[CheckRunEvent, Tag("check_run")]
    | Annotated[CheckSuiteEvent, Tag("check_suite")]
    | Annotated[WorkflowRunEvent, Tag("workflow_run")]
    | Annotated[InstallationEvent, Tag("installation")]
    | Annotated[PingEvent, Tag("ping")]
    | Annotated[OtherEvent, Tag("other")],
    Discriminator(_event_tag),
]

_MAX_PROBLEMS = 5


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:_MAX_PROBLEMS]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - _MAX_PROBLEMS
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def parse_event(event_name: str, payload: Any) -> GitHubEvent:
    """Build the typed event for a delivery (`event_name` is the `X-GitHub-Event` header).

    Raises MalformedEvent (a ValueError) naming the fields that are missing or of the wrong type.
    """
    if not event_name or not event_name.strip():
        raise MalformedEvent("GitHub webhook without an event name (the X-GitHub-Event header)")
    event_name = event_name.strip()
    if not isinstance(payload, dict):
        raise MalformedEvent(
            f"GitHub {event_name!r} webhook: the body must be a JSON object, not {type(payload).__name__}"
        )
    model = EVENT_MODELS.get(event_name, OtherEvent)
    try:
        return model.model_validate({**payload, "event": event_name})  # type: ignore[return-value]
    except ValidationError as exc:
        action = payload.get("action")
        kind = f"{event_name}.{action}" if isinstance(action, str) else event_name
        raise MalformedEvent(f"malformed GitHub {kind!r} webhook: {_describe(exc)}") from exc
