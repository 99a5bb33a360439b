"""Replies to the people who wrote to a run (a refused command, an answered call, a control's
result): one marker comment per reply, upserted, so a retry or a second delivery never posts
twice, and a reply GitHub does not take never fails the run."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.github_ops import UpsertCommentInput
    from shopfloor.workflows.activity_catalogue import GITHUB_UPSERT_COMMENT, call


async def reply_on_github(repo: str, number: int, *, kind: str, body: str, summary: str) -> bool:
    """Upsert the reply `kind` on issue or pull request `number`; False when it was not posted
    (what the reply reports took effect either way: the reply is a courtesy)."""
    try:
        await call(
            GITHUB_UPSERT_COMMENT,
            UpsertCommentInput(
                repo=repo, issue_number=number, workflow_id=workflow.info().workflow_id, kind=kind, body=body
            ),
            summary=summary,
        )
    except ActivityError as exc:
        workflow.logger.warning("reply %s on %s#%s not posted: %s", kind, repo, number, exc)
        return False
    return True
