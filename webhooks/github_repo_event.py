"""A parsed GitHub event as the `RepoEvent` its workflow receives: sanitized text, snapshotted.

Untrusted titles and bodies are stripped of hidden content before anything else sees them, and
what a body's markdown hides is set apart from the text people see; both are stored in the blob
store (history carries only the digest and a short preview of the visible text). The fields every
event carries come from `common_fields`; each routed kind adds its own (one function per kind,
paired with its model in github_event_kinds.py).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TypedDict

from shopfloor.agents.comment_commands import parse_command
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.blobs import BlobStore, put_json
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
from shopfloor.models.inbox import CommentCommand, TextSnapshot

PREVIEW_CHARS = 200
TITLE_CHARS = 256
PATH_CHARS = 300  # a line comment's file path (GitHub's paths are rarely longer)
# Text this short is snapshotted on the event loop: the markdown parser's worst case at this size
# (runs of "![" or "[") is under 4 ms, less than the 5 ms a worker thread running the pure
# Python parser may hold the GIL from the loop anyway, so the thread round trip buys nothing.
INLINE_SNAPSHOT_CHARS = 256


class CommonFields(TypedDict):
    """What every `RepoEvent` the edge builds carries, whatever its kind."""

    delivery_id: str
    event: str
    action: str | None
    repo: str
    sender: str
    sender_type: str
    installation_id: int | None
    received_at: datetime


class EventFields(TypedDict, total=False):
    """What one kind of event adds to the common fields."""

    number: int | None
    is_pull_request: bool
    title: str | None
    text: TextSnapshot | None
    labels: list[str]
    label: str | None
    command: CommentCommand | None
    comment_id: int
    head_sha: str | None
    path: str | None
    line: int | None
    review_id: int | None
    state: str | None
    check_name: str | None
    occurred_at: datetime | None


async def snapshot(blobs: BlobStore, title: str | None, body: str | None) -> TextSnapshot:
    """Store {"title", "body", "hidden"} as people see them (`snapshot_text`) and describe it."""
    if len(title or "") + len(body or "") <= INLINE_SNAPSHOT_CHARS:
        text = snapshot_text(title, body)
    else:  # off the event loop: hostile markdown may take the parser most of a second
        text = await asyncio.to_thread(snapshot_text, title, body)
    digest = await put_json(blobs, text.model_dump())
    return TextSnapshot(digest=digest, preview=text.body[:PREVIEW_CHARS], chars=len(text.body))


def _title(title: str | None) -> str | None:
    return sanitize(title)[:TITLE_CHARS] if title is not None else None


def _pr_number(prs: list[int]) -> int | None:
    return prs[0] if len(prs) == 1 else None


def common_fields(event: EventBase, delivery_id: str) -> CommonFields:
    """Raises ValueError for an event that names no repository (routing never sends one here)."""
    sender, repo = event.sender, event.repo_full_name
    if repo is None:
        raise ValueError(f"a {event.event} event that names no repository is no RepoEvent")
    return CommonFields(
        delivery_id=delivery_id,
        event=event.event,
        action=event.action,
        repo=repo,
        sender=sender.login if sender else "",
        sender_type=(sender.type or "User") if sender else "User",
        installation_id=event.installation_id,
        received_at=datetime.now(UTC),
    )


# --- one function per routed kind -------------------------------------------------------------


async def issues_fields(event: IssuesEvent, blobs: BlobStore) -> EventFields:
    issue = event.issue
    return EventFields(
        number=issue.number,
        title=_title(issue.title),
        text=await snapshot(blobs, issue.title, issue.body),
        labels=issue.labels,
        label=event.label_name,
        state=issue.state,
    )


async def issue_comment_fields(event: IssueCommentEvent, blobs: BlobStore) -> EventFields:
    issue = event.issue
    return EventFields(
        number=issue.number,
        is_pull_request=issue.pull_request is not None,
        title=_title(issue.title),
        text=await snapshot(blobs, issue.title, event.comment.body),
        labels=issue.labels,
        command=parse_command(event.comment.body),
        comment_id=event.comment.id,
        state=issue.state,
        occurred_at=event.comment.created_at,  # an approval names the head at this time
    )


async def pull_request_fields(event: PullRequestEvent, blobs: BlobStore) -> EventFields:
    pr = event.pull_request
    return EventFields(
        number=pr.number,
        is_pull_request=True,
        title=_title(pr.title),
        text=await snapshot(blobs, pr.title, pr.body),
        labels=pr.labels,
        label=event.label_name,
        head_sha=pr.head.sha,
        state="merged" if pr.merged else pr.state,
        occurred_at=pr.updated_at,  # a push (synchronize) updates it: when the head was there by
    )


async def pull_request_review_fields(event: PullRequestReviewEvent, blobs: BlobStore) -> EventFields:
    pr, review = event.pull_request, event.review
    return EventFields(
        number=pr.number,
        is_pull_request=True,
        title=_title(pr.title),
        text=await snapshot(blobs, pr.title, review.body) if review.body else None,
        head_sha=review.commit_id or pr.head.sha,
        state=review.state,
        review_id=review.id,
    )


async def pull_request_review_comment_fields(event: PullRequestReviewCommentEvent, blobs: BlobStore) -> EventFields:
    pr, comment = event.pull_request, event.comment
    return EventFields(
        number=pr.number,
        is_pull_request=True,
        title=_title(pr.title),
        text=await snapshot(blobs, pr.title, comment.body),  # sanitized and stored as an issue comment is
        comment_id=comment.id,
        path=sanitize(comment.path)[:PATH_CHARS] if comment.path else None,
        line=comment.line,
        review_id=comment.pull_request_review_id,
        head_sha=comment.commit_id or pr.head.sha,
        occurred_at=comment.created_at,
    )


async def check_run_fields(event: CheckRunEvent, blobs: BlobStore) -> EventFields:
    run = event.check_run
    number = _pr_number(run.pull_requests)
    return EventFields(
        number=number,
        is_pull_request=number is not None,
        head_sha=run.head_sha,
        state=run.conclusion or run.status,
        check_name=run.name,
    )


async def check_suite_fields(event: CheckSuiteEvent, blobs: BlobStore) -> EventFields:
    suite = event.check_suite
    number = _pr_number(suite.pull_requests)
    return EventFields(
        number=number,
        is_pull_request=number is not None,
        head_sha=suite.head_sha,
        state=suite.conclusion or suite.status,
        check_name=suite.app.slug or suite.app.name if suite.app else None,
    )


async def workflow_run_fields(event: WorkflowRunEvent, blobs: BlobStore) -> EventFields:
    run = event.workflow_run
    number = _pr_number(run.pull_requests)
    return EventFields(
        number=number,
        is_pull_request=number is not None,
        head_sha=run.head_sha,
        state=run.conclusion or run.status,
        check_name=run.name,
    )


async def status_fields(event: StatusEvent, blobs: BlobStore) -> EventFields:
    return EventFields(head_sha=event.sha, state=event.state, check_name=event.context)
