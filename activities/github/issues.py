"""Issues: read one, upsert shopfloor's marked comments, labels, and close.

Comment bodies are cleaned by `for_github` (no HTML comments, so no marker but our own, which is
put back after). Writes are idempotent: a comment is found by its hidden marker (and our authorship) and edited
in place; labels are set-like on GitHub's side; closing a closed issue changes nothing.
"""

from __future__ import annotations

from typing import Any

from shopfloor.activities.github.api import GitHubApi
from shopfloor.agents.github_text import with_own_marker_kept
from shopfloor.models.github_ops import (
    CloseIssueInput,
    CloseIssueOutput,
    CommentOutput,
    IssueOutput,
    IssueRef,
    LabelsInput,
    LabelsOutput,
    UpsertCommentInput,
    comment_marker,
    with_marker,
)


def _names(labels: Any) -> list[str]:
    return [label["name"] if isinstance(label, dict) else str(label) for label in labels or []]


def get_issue(api: GitHubApi, inp: IssueRef) -> IssueOutput:
    issue = api.get(f"/repos/{inp.repo}/issues/{inp.number}")
    user = issue.get("user") or {}
    return IssueOutput(
        number=issue["number"],
        title=issue.get("title") or "",
        body=issue.get("body") or "",
        state=issue["state"],
        state_reason=issue.get("state_reason"),
        labels=_names(issue.get("labels")),
        author=user.get("login", ""),
        author_type=user.get("type", ""),
        author_association=issue.get("author_association"),
        is_pull_request="pull_request" in issue,
        url=issue.get("html_url") or "",
    )


def upsert_comment(api: GitHubApi, inp: UpsertCommentInput) -> CommentOutput:
    marker = comment_marker(inp.workflow_id, inp.kind)
    clean, marker_last = with_own_marker_kept(inp.body, marker)
    body = f"{clean}\n\n{marker}" if marker_last else with_marker(clean, inp.workflow_id, inp.kind)
    me = api.own_login()
    for comment in api.paginate(f"/repos/{inp.repo}/issues/{inp.issue_number}/comments"):
        # Ours only: a marker pasted into someone else's comment must not capture our updates.
        if (comment.get("user") or {}).get("login") != me or marker not in (comment.get("body") or ""):
            continue
        url = comment.get("html_url") or ""
        if comment.get("body") == body:
            return CommentOutput(id=comment["id"], url=url, action="unchanged")
        api.patch(f"/repos/{inp.repo}/issues/comments/{comment['id']}", {"body": body})
        return CommentOutput(id=comment["id"], url=url, action="updated")
    created = api.post(f"/repos/{inp.repo}/issues/{inp.issue_number}/comments", {"body": body})
    return CommentOutput(id=created["id"], url=created.get("html_url") or "", action="created")


def add_labels(api: GitHubApi, inp: LabelsInput) -> LabelsOutput:
    labels = api.post(f"/repos/{inp.repo}/issues/{inp.issue_number}/labels", {"labels": inp.labels})
    return LabelsOutput(labels=_names(labels))


def close_issue(api: GitHubApi, inp: CloseIssueInput) -> CloseIssueOutput:
    path = f"/repos/{inp.repo}/issues/{inp.issue_number}"
    issue = api.get(path)
    if issue["state"] == "closed":
        return CloseIssueOutput(state_reason=issue.get("state_reason"), already_closed=True)
    closed = api.patch(path, {"state": "closed", "state_reason": inp.state_reason})
    return CloseIssueOutput(state_reason=closed.get("state_reason"), already_closed=False)
