"""Pull request reviews: APPROVE / REQUEST_CHANGES / COMMENT, never approving your own PR; their line
comments (one webhook delivery each), and a single line comment (a COMMENTED review holding it)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from shopfloor.simulator.deps import load_issue, load_repo, paginate
from shopfloor.simulator.errors import GitHubError, custom_invalid
from shopfloor.simulator.store import Review, now

router = APIRouter()
STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


class InlineComment(BaseModel):
    path: str
    body: str
    position: int | None = None
    line: int | None = None
    side: str | None = None
    start_line: int | None = None
    start_side: str | None = None


class NewReview(BaseModel):
    commit_id: str | None = None
    body: str | None = None
    event: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"] | None = None
    comments: list[InlineComment] = []


@router.post("/repos/{owner}/{repo}/pulls/{number}/reviews")
def create_review(owner: str, repo: str, number: int, body: NewReview, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    if body.event is None:
        # GitHub would keep a PENDING review; the simulator has no pending reviews to submit later.
        raise custom_invalid("PullRequestReview", "event is required: APPROVE, REQUEST_CHANGES or COMMENT")
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        pr = issue.pr
        assert pr is not None
        if issue.state != "open" and body.event != "COMMENT":
            raise GitHubError(
                422,
                "Unprocessable Entity",
                errors=["Can not approve a closed pull request"]
                if body.event == "APPROVE"
                else ["Can not request changes on a closed pull request"],
            )
        if issue.user.id == actor.user.id and body.event != "COMMENT":
            verb = "approve" if body.event == "APPROVE" else "request changes on"
            raise GitHubError(422, "Unprocessable Entity", errors=[f"Can not {verb} your own pull request"])
        if body.event in ("REQUEST_CHANGES", "COMMENT") and not (body.body or "").strip() and not body.comments:
            raise GitHubError(
                422, "Unprocessable Entity", errors=[f"Review Body is required when using the {body.event} event"]
            )
        commit_id = body.commit_id or pr.head_sha
        if not r.git.commit_exists(commit_id):
            raise custom_invalid("PullRequestReview", "commit_id is not part of the pull request")
        inline: list[dict[str, Any]] = [{"id": sim.store.new_id(), **c.model_dump()} for c in body.comments]
        review = Review(
            id=sim.store.new_id(),
            user=actor.user,
            body=body.body or "",
            state=STATES[body.event],
            commit_id=commit_id,
            submitted_at=now(),
            comments=inline,
        )
        pr.reviews.append(review)
        issue.updated_at = now()
        sim.events.review(r, issue, review, actor.user)
        for c in inline:  # GitHub sends each line comment as its own delivery too
            sim.events.review_comment(r, issue, review, c, actor.user)
        return JSONResponse(sim.pulls.review(r, issue, review))


class NewReviewComment(InlineComment):
    commit_id: str | None = None


@router.post("/repos/{owner}/{repo}/pulls/{number}/comments")
def create_review_comment(owner: str, repo: str, number: int, body: NewReviewComment, request: Request) -> JSONResponse:
    """One line comment: GitHub keeps it in a COMMENTED review of its own."""
    sim, actor, r = load_repo(request, owner, repo)
    if not body.body.strip():
        raise custom_invalid("PullRequestReviewComment", "body is required")
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        pr = issue.pr
        assert pr is not None
        commit_id = body.commit_id or pr.head_sha
        if not r.git.commit_exists(commit_id):
            raise custom_invalid("PullRequestReviewComment", "commit_id is not part of the pull request")
        comment: dict[str, Any] = {"id": sim.store.new_id(), **body.model_dump(exclude={"commit_id"})}
        review = Review(
            id=sim.store.new_id(),
            user=actor.user,
            body="",
            state="COMMENTED",
            commit_id=commit_id,
            submitted_at=now(),
            comments=[comment],
        )
        pr.reviews.append(review)
        issue.updated_at = now()
        sim.events.review(r, issue, review, actor.user)
        sim.events.review_comment(r, issue, review, comment, actor.user)
        return JSONResponse(sim.pulls.review_comment(r, issue, review, comment), status_code=201)


@router.get("/repos/{owner}/{repo}/pulls/{number}/reviews")
def list_reviews(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        assert issue.pr is not None
        return paginate(request, list(issue.pr.reviews), shape=lambda rv: sim.pulls.review(r, issue, rv))


@router.get("/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}")
def get_review(owner: str, repo: str, number: int, review_id: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        assert issue.pr is not None
        review = next((rv for rv in issue.pr.reviews if rv.id == review_id), None)
        if review is None:
            raise GitHubError(404, "Not Found")
        return JSONResponse(sim.pulls.review(r, issue, review))


@router.get("/repos/{owner}/{repo}/pulls/{number}/comments")
def list_review_comments(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    """The inline comments of every review, oldest first (GitHub's "review comments")."""
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        assert issue.pr is not None
        pairs = [(rv, c) for rv in issue.pr.reviews for c in rv.comments]
        return paginate(request, pairs, shape=lambda p: sim.pulls.review_comment(r, issue, *p))
