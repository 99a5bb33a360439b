"""The GitHub event kinds the edge routes, in one table: per kind, its model, where it goes
(`route`) and what its workflow receives (`to_repo_event`).

Each entry pairs a kind's model with its routing function (webhooks/github_routing.py) and its
fields function (webhooks/github_repo_event.py); both are typed for that model, and the entry
checks once that the parsed event is of it. A kind with no entry is routed nowhere, with a reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from shopfloor.blobs import BlobStore
from shopfloor.models.github_events import (
    CheckRunEvent,
    CheckSuiteEvent,
    EventBase,
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
    PullRequestReviewEvent,
    StatusEvent,
    WorkflowRunEvent,
)
from shopfloor.models.inbox import RepoEvent
from shopfloor.webhooks import github_repo_event as fields
from shopfloor.webhooks import github_routing as routing
from shopfloor.webhooks.github_repo_event import EventFields
from shopfloor.webhooks.github_routing import REPO_NAME, Route, RouteContext, ignore

E = TypeVar("E", bound=EventBase)


class RoutedKind(Protocol):
    """What the edge asks of a routed kind, for an event parsed as that kind."""

    @property
    def model(self) -> type[EventBase]: ...

    def route(self, event: EventBase, at: RouteContext) -> Route: ...

    async def fields(self, event: EventBase, blobs: BlobStore) -> EventFields: ...


@dataclass(frozen=True)
class EventKind(Generic[E]):
    model: type[E]
    route_as: Callable[[E, RouteContext], Route]
    fields_of: Callable[[E, BlobStore], Awaitable[EventFields]]

    def _own(self, event: EventBase) -> E:
        # parse_event builds the model its name says, so this holds for every parsed delivery.
        if not isinstance(event, self.model):
            raise TypeError(f"a {type(event).__name__} is not a {self.model.__name__}")
        return event

    def route(self, event: EventBase, at: RouteContext) -> Route:
        return self.route_as(self._own(event), at)

    async def fields(self, event: EventBase, blobs: BlobStore) -> EventFields:
        return await self.fields_of(self._own(event), blobs)


def _kind(
    model: type[E],
    route: Callable[[E, RouteContext], Route],
    fields_of: Callable[[E, BlobStore], Awaitable[EventFields]],
) -> RoutedKind:
    kind: EventKind[E] = EventKind(model, route, fields_of)  # E from the arguments, checked against each other
    return kind


ROUTED_KINDS: Mapping[str, RoutedKind] = {
    "issues": _kind(IssuesEvent, routing.route_issues, fields.issues_fields),
    "issue_comment": _kind(IssueCommentEvent, routing.route_issue_comment, fields.issue_comment_fields),
    "pull_request": _kind(PullRequestEvent, routing.route_pull_request, fields.pull_request_fields),
    "pull_request_review": _kind(
        PullRequestReviewEvent, routing.route_pull_request_review, fields.pull_request_review_fields
    ),
    "pull_request_review_comment": _kind(
        PullRequestReviewCommentEvent,
        routing.route_pull_request_review_comment,
        fields.pull_request_review_comment_fields,
    ),
    "check_run": _kind(CheckRunEvent, routing.route_check_run, fields.check_run_fields),
    "check_suite": _kind(CheckSuiteEvent, routing.route_check_suite, fields.check_suite_fields),
    "workflow_run": _kind(WorkflowRunEvent, routing.route_workflow_run, fields.workflow_run_fields),
    "status": _kind(StatusEvent, routing.route_status, fields.status_fields),
}


def route(event: EventBase, *, bot_login: str, trigger_label: str) -> Route:
    """Which workflow(s) a parsed event goes to, or why it goes nowhere."""
    repo = event.repo_full_name
    if repo is None:
        return ignore(f"{event.event} event names no repository")
    if not REPO_NAME.match(repo):
        return ignore(f"unsupported repository name {repo[:120]!r}")
    kind = ROUTED_KINDS.get(event.event)
    if kind is None:
        return ignore(routing.NOT_ROUTED.get(event.event, f"{event.event} events are not routed"))
    return kind.route(event, RouteContext(repo=repo, bot_login=bot_login, trigger_label=trigger_label))


async def to_repo_event(event: EventBase, delivery_id: str, blobs: BlobStore) -> RepoEvent:
    """The `RepoEvent` a routed event's workflow receives (text sanitized and snapshotted)."""
    kind = ROUTED_KINDS.get(event.event)
    extra = await kind.fields(event, blobs) if kind is not None else EventFields()
    return RepoEvent(**fields.common_fields(event, delivery_id), **extra)
