"""Issues (which include pull requests, as on GitHub) and their comments."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.api.labels import apply_labels
from shopfloor.simulator.auth import can
from shopfloor.simulator.deps import load_issue, load_repo, paginate
from shopfloor.simulator.errors import GitHubError, invalid, not_found
from shopfloor.simulator.store import Comment, Issue, now

router = APIRouter()


class NewIssue(BaseModel):
    title: str | int = Field(min_length=1)
    body: str | None = None
    labels: list[str | dict] | None = None
    assignees: list[str] | None = None
    assignee: str | None = None


@router.post("/repos/{owner}/{repo}/issues", status_code=201)
def create_issue(owner: str, repo: str, body: NewIssue, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    title = str(body.title).strip()
    if not title:
        raise invalid("Issue", "title", "missing_field")
    with sim.store.lock:
        t = now()
        issue = Issue(
            id=sim.store.new_id(),
            number=r.next_number(),
            title=title,
            body=body.body,
            user=actor.user,
            created_at=t,
            updated_at=t,
        )
        r.issues[issue.number] = issue
        if can(r, actor.user, "triage"):  # GitHub silently drops labels/assignees from non-triagers
            apply_labels(sim, r, issue, _names(body.labels or []), actor.user, emit=False)
            logins = body.assignees or ([body.assignee] if body.assignee else [])
            issue.assignees = [sim.store.user(login) for login in logins]
        sim.events.issue(r, issue, "opened", actor.user)
        return JSONResponse(sim.shapes.issue(r, issue), status_code=201)


def _names(labels: list[str | dict]) -> list[str]:
    return [str(x.get("name", "")) if isinstance(x, dict) else str(x) for x in labels]


@router.get("/repos/{owner}/{repo}/issues/{number}")
def get_issue(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.shapes.issue(r, load_issue(r, number)))


class IssueUpdate(BaseModel):
    title: str | int | None = None
    body: str | None = None
    state: Literal["open", "closed"] | None = None
    state_reason: Literal["completed", "not_planned", "reopened", "duplicate"] | None = None
    labels: list[str | dict] | None = None
    assignees: list[str] | None = None


@router.patch("/repos/{owner}/{repo}/issues/{number}")
def update_issue(owner: str, repo: str, number: int, body: IssueUpdate, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number)
        # Authors may edit and close their own issues; everyone else needs triage.
        if issue.user.id != actor.user.id and not can(r, actor.user, "triage"):
            raise GitHubError(403, "Must have triage rights to Repository.")
        update_fields(sim, r, issue, body, actor.user)
        return JSONResponse(sim.shapes.issue(r, issue))


def update_fields(sim, r, issue: Issue, body: IssueUpdate, user) -> None:
    sent = body.model_fields_set
    changes: dict = {}
    if "title" in sent and body.title is not None and str(body.title) != issue.title:
        if not str(body.title).strip():
            raise invalid("Issue", "title", "missing_field")
        changes["title"] = {"from": issue.title}
        issue.title = str(body.title)
    if "body" in sent and body.body != issue.body:
        changes["body"] = {"from": issue.body or ""}
        issue.body = body.body
    if changes:
        issue.updated_at = now()
        sim.events.issue(r, issue, "edited", user, changes=changes)
    if "labels" in sent and body.labels is not None and can(r, user, "triage"):
        wanted = _names(body.labels)
        for lab in list(issue.labels):
            if lab.name.lower() not in {w.lower() for w in wanted}:
                issue.labels.remove(lab)
                sim.events.issue(r, issue, "unlabeled", user, label=sim.shapes.label(r, lab))
        apply_labels(sim, r, issue, wanted, user)
    if "assignees" in sent and body.assignees is not None and can(r, user, "triage"):
        issue.assignees = [sim.store.user(login) for login in body.assignees]
    if body.state == "closed" and issue.state == "open":
        close(sim, r, issue, user, body.state_reason or "completed")
    elif body.state == "open" and issue.state == "closed":
        if issue.pr is not None and issue.pr.merged:
            raise GitHubError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": "state cannot be changed. The pull request has been merged.",
                    }
                ],
            )
        issue.state, issue.state_reason, issue.closed_at, issue.closed_by = "open", "reopened", None, None
        if issue.pr is not None:
            issue.pr.frozen_base_sha = None
        issue.updated_at = now()
        sim.events.issue(r, issue, "reopened", user)
        if issue.pr is not None:
            sim.ci.trigger(r, issue)


def close(sim, r, issue: Issue, user, reason: str | None, *, merged: bool = False) -> None:
    t = now()
    issue.state, issue.closed_at, issue.closed_by, issue.updated_at = "closed", t, user, t
    issue.state_reason = None if issue.pr is not None else (reason or "completed")
    if issue.pr is not None and not merged:
        issue.pr.frozen_base_sha = r.git.branches().get(issue.pr.base_ref)
    sim.events.issue(r, issue, "closed", user)


@router.get("/repos/{owner}/{repo}/issues")
def list_issues(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    q = request.query_params
    state = q.get("state", "open")
    labels = {x.strip().lower() for x in q.get("labels", "").split(",") if x.strip()}
    creator = (q.get("creator") or "").lower()
    since = _since(q.get("since"))
    with sim.store.lock:
        found = [
            i
            for i in r.issues.values()
            if (state == "all" or i.state == state)
            and labels <= {lab.name.lower() for lab in i.labels}
            and (not creator or i.user.login.lower() == creator)
            and (since is None or i.updated_at >= since)
        ]
        key = "updated_at" if q.get("sort") == "updated" else "created_at"
        found.sort(key=lambda i: (getattr(i, key), i.number), reverse=q.get("direction", "desc") != "asc")
        return paginate(request, found, shape=lambda i: sim.shapes.issue(r, i))


def _since(raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise invalid("Issue", "since") from None


class CommentBody(BaseModel):
    body: str = Field(min_length=1)


@router.get("/repos/{owner}/{repo}/issues/{number}/comments")
def list_comments(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    since = _since(request.query_params.get("since"))
    with sim.store.lock:
        issue = load_issue(r, number)
        found = [c for c in issue.comments if since is None or c.updated_at >= since]
        return paginate(request, found, shape=lambda c: sim.shapes.comment(r, c))


@router.post("/repos/{owner}/{repo}/issues/{number}/comments", status_code=201)
def create_comment(owner: str, repo: str, number: int, body: CommentBody, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number)
        t = now()
        comment = Comment(
            id=sim.store.new_id(), issue_number=number, user=actor.user, body=body.body, created_at=t, updated_at=t
        )
        issue.comments.append(comment)
        issue.updated_at = t
        sim.events.comment(r, issue, comment, "created", actor.user)
        return JSONResponse(sim.shapes.comment(r, comment), status_code=201)


def _find_comment(r, comment_id: int) -> tuple[Issue, Comment]:
    for issue in r.issues.values():
        for c in issue.comments:
            if c.id == comment_id:
                return issue, c
    raise not_found()


@router.get("/repos/{owner}/{repo}/issues/comments/{comment_id}")
def get_comment(owner: str, repo: str, comment_id: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.shapes.comment(r, _find_comment(r, comment_id)[1]))


@router.patch("/repos/{owner}/{repo}/issues/comments/{comment_id}")
def update_comment(owner: str, repo: str, comment_id: int, body: CommentBody, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue, comment = _find_comment(r, comment_id)
        if comment.user.id != actor.user.id and not can(r, actor.user, "write"):
            raise GitHubError(
                403,
                "Resource not accessible by integration"
                if actor.kind == "bot"
                else "Must have write access to edit another user's comment.",
            )
        if body.body != comment.body:
            old = comment.body
            comment.body, comment.updated_at = body.body, now()
            sim.events.comment(r, issue, comment, "edited", actor.user, changes={"body": {"from": old}})
        return JSONResponse(sim.shapes.comment(r, comment))
