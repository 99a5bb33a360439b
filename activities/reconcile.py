"""The reconciler's Temporal-side activity: start the IssueWorkflow of labelled issues that have none.

It needs the worker's Temporal client, injected at composition (worker.py). For each issue it
first asks Temporal (describe) whether `issue/<repo>/<n>` exists:
- running: nothing to do (its events reach it through the webhook edge);
- closed (completed, failed, terminated ...): left alone. A finished run is a decision (merged,
  declined, stopped); restarting it every few minutes would loop. A human who wants another run
  re-labels the issue or comments `/shopfloor fix`, which arrives as a webhook;
- absent: signal-with-start of IssueWorkflow with a synthetic "issues.labeled" RepoEvent, id
  conflict policy USE_EXISTING (a run started between our describe and start is just signalled)
  and reuse policy REJECT_DUPLICATE (a run that closed in between is not revived).
The synthetic event's delivery id `reconcile:<repo>#<n>:<label>` is stable, so repeated
reconciles (or a retried activity) de-duplicate in the workflow. It carries what the edge would
have: the issue's title and body, sanitized and snapshotted into the blob store (the inbox only
takes a trigger with text), and as sender the issue's author — GitHub's issue API does not say
who added the label, and the inbox ignores events sent by bots, so the bot cannot be the sender.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import structlog
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.activities.github.api import GitHubApi, read_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.blobs import BlobStore, put_json
from shopfloor.models import failure_types
from shopfloor.models.inbox import (
    RepoEvent,
    TextSnapshot,
    issue_workflow_id,
)
from shopfloor.models.reconcile import Skipped, StartIssuesInput, StartIssuesOutput
from shopfloor.temporal import start_issue_workflow

log = structlog.get_logger(__name__)


def reconcile_delivery_id(repo: str, number: int, label: str) -> str:
    return f"reconcile:{repo}#{number}:{label}"


TITLE_CHARS = 256  # GitHub's cap; as the edge snapshots
PREVIEW_CHARS = 200


async def snapshot(blobs: BlobStore, title: str, body: str) -> TextSnapshot:
    """Store the text as the edge does: as people see it, what its markdown hides apart."""
    text = await asyncio.to_thread(snapshot_text, title, body)
    digest = await put_json(blobs, text.model_dump())
    return TextSnapshot(digest=digest, preview=text.body[:PREVIEW_CHARS], chars=len(text.body))


async def synthetic_labeled_event(repo: str, issue: dict[str, Any], label: str, blobs: BlobStore) -> RepoEvent:
    """The `issues.labeled` delivery the edge would have built, had it arrived."""
    number, user = int(issue["number"]), issue.get("user") or {}
    title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
    return RepoEvent(
        delivery_id=reconcile_delivery_id(repo, number, label),
        event="issues",
        action="labeled",
        repo=repo,
        number=number,
        sender=str(user.get("login") or ""),
        sender_type=str(user.get("type") or "User"),
        title=sanitize(title)[:TITLE_CHARS],
        text=await snapshot(blobs, title, body),
        labels=[str(lab.get("name")) for lab in issue.get("labels") or [] if isinstance(lab, dict)],
        label=label,
        state=str(issue.get("state") or "open"),
        received_at=datetime.now(UTC),
    )


def get_issue(api: GitHubApi, repo: str, number: int) -> dict[str, Any]:
    return dict(api.get(f"/repos/{repo}/issues/{number}"))


class ReconcileActivities:
    def __init__(self, client: Client, clients: GitHubClients, blobs: BlobStore, *, task_queue: str) -> None:
        self._client = client
        self._clients = clients
        self._blobs = blobs
        self._task_queue = task_queue  # where the factory workflows run

    async def _status(self, workflow_id: str) -> WorkflowExecutionStatus | None:
        """The latest run's status; None when no workflow of that id ever ran."""
        try:
            desc = await self._client.get_workflow_handle(workflow_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise _temporal_failure(exc, f"describe {workflow_id}") from None
        return desc.status

    @activity.defn(name="reconcile_start_missing_issues")
    async def start_missing_issues(self, inp: StartIssuesInput) -> StartIssuesOutput:
        out = StartIssuesOutput()
        for number in inp.numbers:
            workflow_id = issue_workflow_id(inp.repo, number)
            status = await self._status(workflow_id)
            if status is not None:
                reason = "running" if status == WorkflowExecutionStatus.RUNNING else f"last run {status.name.lower()}"
                out.skipped.append(Skipped(repo=inp.repo, what=f"issue #{number}", reason=reason))
                continue
            try:
                issue = await read_github(self._clients, inp.repo, get_issue, inp.repo, number)
            except ApplicationError as exc:
                if not exc.non_retryable:
                    raise  # Temporal retries the activity; the issues done so far are then "running"
                out.skipped.append(Skipped(repo=inp.repo, what=f"issue #{number}", reason=exc.message[:200]))
                continue
            if issue.get("state") != "open":
                out.skipped.append(Skipped(repo=inp.repo, what=f"issue #{number}", reason="closed meanwhile"))
                continue
            event = await synthetic_labeled_event(inp.repo, issue, inp.label, self._blobs)
            try:
                await start_issue_workflow(
                    self._client,
                    self._task_queue,
                    event,
                    new_run=False,
                    started_by=f"the reconciler (`{inp.label}` label, no workflow)",
                )
            except WorkflowAlreadyStartedError:
                out.skipped.append(Skipped(repo=inp.repo, what=f"issue #{number}", reason="closed meanwhile"))
                continue
            except RPCError as exc:
                raise _temporal_failure(exc, f"start {workflow_id}") from None
            log.info("reconcile started issue workflow", workflow_id=workflow_id)
            out.started.append(workflow_id)
        return out

    def all(self) -> list:
        return [self.start_missing_issues]


def _temporal_failure(exc: RPCError, what: str) -> ApplicationError:
    # Unavailable or overloaded servers are worth retrying; anything else is a bug or a setup issue.
    retryable = exc.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.CANCELLED,
    )
    return ApplicationError(
        f"{what}: {exc.message}", type=failure_types.TEMPORAL_REQUEST_FAILED, non_retryable=not retryable
    )
