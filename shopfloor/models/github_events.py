"""shopfloor's own models of GitHub webhook events, and `parse_event` to build one from a delivery.

Each model carries the event name (the `X-GitHub-Event` header) in `event`, so a parsed event
round-trips through Temporal's data converter as the same type (`GitHubEvent` discriminates on
it). Events shopfloor does not route on become an `OtherEvent` with the common fields only.
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
    PullRequest,
    PushCommit,
    Pusher,
    Repository,
    Review,
    WorkflowRun,
    names,
)


class MalformedEvent(ValueError):
    """A webhook body that is not a valid event of its kind; the message says what is wrong."""


class EventBase(GitHubModel):
    event: str
    action: str | None = None  # push, status and ping carry none
    repository: Repository
    sender: Actor | None = None
    installation: InstallationRef | None = None  # present on deliveries to a GitHub App

    @property
    def repo_full_name(self) -> str | None:
        repo = getattr(self, "repository", None)
        return repo.full_name if repo is not None else None

    @property
    def sender_login(self) -> str | None:
        return self.sender.login if self.sender else None

    @property
    def sender_is_bot(self) -> bool:
        return self.sender is not None and self.sender.is_bot

    @property
    def installation_id(self) -> int | None:
        return self.installation.id if self.installation else None


class IssuesEvent(EventBase):
    event: Literal["issues"] = "issues"
    issue: Issue
    label: dict[str, Any] | None = None  # on labeled/unlabeled

    @property
    def label_name(self) -> str | None:
        return self.label.get("name") if self.label else None


class IssueCommentEvent(EventBase):
    event: Literal["issue_comment"] = "issue_comment"
    issue: Issue
    comment: Comment


class PullRequestEvent(EventBase):
    event: Literal["pull_request"] = "pull_request"
    number: int | None = None
    pull_request: PullRequest
    before: str | None = None  # on synchronize
    after: str | None = None


class PullRequestReviewEvent(EventBase):
    event: Literal["pull_request_review"] = "pull_request_review"
    review: Review
    pull_request: PullRequest


class PullRequestReviewCommentEvent(EventBase):
    event: Literal["pull_request_review_comment"] = "pull_request_review_comment"
    comment: Comment
    pull_request: PullRequest


class PushEvent(EventBase):
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


class StatusEvent(EventBase):
    event: Literal["status"] = "status"
    id: int | None = None
    sha: str
    state: str  # "pending" | "success" | "failure" | "error"
    context: str = "default"
    description: str | None = None
    target_url: str | None = None
    branches: list[str] = Field(default_factory=list)

    _branches = field_validator("branches", mode="before")(names)  # the branches holding `sha`


class CheckRunEvent(EventBase):
    event: Literal["check_run"] = "check_run"
    check_run: CheckRun


class CheckSuiteEvent(EventBase):
    event: Literal["check_suite"] = "check_suite"
    check_suite: CheckSuite


class WorkflowRunEvent(EventBase):
    event: Literal["workflow_run"] = "workflow_run"
    workflow_run: WorkflowRun


class InstallationEvent(EventBase):
    event: Literal["installation"] = "installation"
    repository: Repository | None = None  # installation events are about an account, not a repo
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
    repository: Repository | None = None  # absent for organization and App hooks
    zen: str | None = None
    hook_id: int | None = None
    hook: Hook | None = None


class OtherEvent(EventBase):
    """An event shopfloor does not route on: the common fields only."""

    event: str
    repository: Repository | None = None


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
