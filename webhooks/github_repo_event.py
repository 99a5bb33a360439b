"""A parsed GitHub event as the `RepoEvent` its workflow receives: sanitized text, snapshotted.

Untrusted titles and bodies are stripped of hidden content before anything else sees them, and
what a body's markdown hides is set apart from the text people see; both are stored in the blob
store (history carries only the digest and a short preview of the visible text).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from shopfloor.agents.comment_commands import parse_command
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.blobs import BlobStore, put_json
from shopfloor.models.github_events import (
    CheckRunEvent,
    CheckSuiteEvent,
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewEvent,
    StatusEvent,
    WorkflowRunEvent,
)
from shopfloor.models.inbox import RepoEvent, TextSnapshot

PREVIEW_CHARS = 200
TITLE_CHARS = 256


async def snapshot(blobs: BlobStore, title: str | None, body: str | None) -> TextSnapshot:
    """Store {"title", "body", "hidden"} as people see them (`snapshot_text`) and describe it."""
    # Off the event loop: hostile markdown may take the parser most of a second.
    text = await asyncio.to_thread(snapshot_text, title, body)
    digest = await put_json(blobs, text.model_dump())
    return TextSnapshot(digest=digest, preview=text.body[:PREVIEW_CHARS], chars=len(text.body))


def _title(title: str | None) -> str | None:
    return sanitize(title)[:TITLE_CHARS] if title is not None else None


def _pr_number(prs: list[int]) -> int | None:
    return prs[0] if len(prs) == 1 else None


async def repo_event(event: Any, raw: dict[str, Any], delivery_id: str, blobs: BlobStore) -> RepoEvent:
    sender = event.sender
    fields: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": event.event,
        "action": event.action,
        "repo": event.repo_full_name,
        "sender": sender.login if sender else "",
        "sender_type": (sender.type or "User") if sender else "User",
        "installation_id": event.installation_id,
        "received_at": datetime.now(UTC),
    }
    if isinstance(event, IssuesEvent):
        issue = event.issue
        fields.update(
            number=issue.number,
            title=_title(issue.title),
            text=await snapshot(blobs, issue.title, issue.body),
            labels=issue.labels,
            label=event.label_name,
            state=issue.state,
        )
    elif isinstance(event, IssueCommentEvent):
        issue = event.issue
        fields.update(
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
    elif isinstance(event, PullRequestEvent):
        pr = event.pull_request
        fields.update(
            number=pr.number,
            is_pull_request=True,
            title=_title(pr.title),
            text=await snapshot(blobs, pr.title, pr.body),
            labels=pr.labels,
            label=(raw.get("label") or {}).get("name") if isinstance(raw.get("label"), dict) else None,
            head_sha=pr.head.sha,
            state="merged" if pr.merged else pr.state,
            occurred_at=pr.updated_at,  # a push (synchronize) updates it: when the head was there by
        )
    elif isinstance(event, PullRequestReviewEvent):
        pr, review = event.pull_request, event.review
        fields.update(
            number=pr.number,
            is_pull_request=True,
            title=_title(pr.title),
            text=await snapshot(blobs, pr.title, review.body) if review.body else None,
            head_sha=review.commit_id or pr.head.sha,
            state=review.state,
        )
    elif isinstance(event, CheckRunEvent):
        run = event.check_run
        number = _pr_number(run.pull_requests)
        fields.update(
            number=number,
            is_pull_request=number is not None,
            head_sha=run.head_sha,
            state=run.conclusion or run.status,
            check_name=run.name,
        )
    elif isinstance(event, CheckSuiteEvent):
        suite = event.check_suite
        number = _pr_number(suite.pull_requests)
        name = suite.app.slug or suite.app.name if suite.app else None
        fields.update(
            number=number,
            is_pull_request=number is not None,
            head_sha=suite.head_sha,
            state=suite.conclusion or suite.status,
            check_name=name,
        )
    elif isinstance(event, WorkflowRunEvent):
        run = event.workflow_run
        number = _pr_number(run.pull_requests)
        fields.update(
            number=number,
            is_pull_request=number is not None,
            head_sha=run.head_sha,
            state=run.conclusion or run.status,
            check_name=run.name,
        )
    elif isinstance(event, StatusEvent):
        fields.update(head_sha=event.sha, state=event.state, check_name=event.context)
    return RepoEvent(**fields)
