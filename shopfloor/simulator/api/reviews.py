"""Pull request reviews: APPROVE / REQUEST_CHANGES / COMMENT, never approving your own PR; their line
comments (one webhook delivery each), and a single line comment (a COMMENTED review holding it) or
a reply to one.

A line comment must be on the pull request's diff, as on GitHub (shopfloor/diff_lines.py): one
that is not fails the whole review with 422 and nothing is kept; each kept comment carries its
`diff_hunk` and `position` as GitHub computes them."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from shopfloor.diff_lines import FileDiff
from shopfloor.simulator.api.pulls import diff_range
from shopfloor.simulator.deps import load_issue, load_repo, paginate
from shopfloor.simulator.errors import GitHubError, custom_invalid
from shopfloor.simulator.store import Issue, Repo, Review, now

router = APIRouter()
STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


class _Place(BaseModel):
    """Where on the diff a line comment asks to sit."""

    position: int | None = None
    line: int | None = None
    side: Literal["LEFT", "RIGHT"] | None = None
    start_line: int | None = None
    start_side: Literal["LEFT", "RIGHT"] | None = None


class InlineComment(_Place):
    path: str
    body: str


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
        diffs = _diffs(r, issue, commit_id) if body.comments else {}
        inline: list[dict[str, Any]] = []
        for wanted in body.comments:
            resolved = _on_diff(wanted.path, wanted.body, wanted, diffs)
            if isinstance(resolved, OffDiff):  # GitHub does not say which comment: the whole review fails
                raise GitHubError(
                    422, "Unprocessable Entity", errors=[f"Pull request review thread {resolved.message}"]
                )
            inline.append({"id": sim.store.new_id(), **resolved})
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
        for kept in inline:  # GitHub sends each line comment as its own delivery too
            sim.events.review_comment(r, issue, review, kept, actor.user)
        return JSONResponse(sim.pulls.review(r, issue, review))


class OffDiff(NamedTuple):
    """Why a comment cannot sit where it asks: the field a single comment's 422 names, and the
    message a review's 422 gives."""

    field: str
    message: str


_OFF_LINE = OffDiff("line", "line must be part of the diff")


def _diffs(r: Repo, issue: Issue, commit_id: str) -> dict[str, FileDiff]:
    """The pull request's changed files at `commit_id`, by path, as lines a comment may name."""
    base, _ = diff_range(r, issue)
    return {f.filename: FileDiff.parse(f.patch or "") for f in r.git.changed_files(base, commit_id)}


def _on_diff(path: str, body: str, c: _Place, diffs: dict[str, FileDiff]) -> dict[str, Any] | OffDiff:
    """The comment as kept (its line, side, position and diff hunk resolved), or why GitHub
    refuses it."""
    diff = diffs.get(path)
    if c.line is None and c.position is None:
        return _OFF_LINE
    if diff is None:
        return OffDiff("path", "path could not be resolved") if c.line is None else _OFF_LINE
    side = c.side or "RIGHT"
    if c.line is not None:
        if not diff.allows(c.line, side):
            return _OFF_LINE
        if c.start_line is not None and not diff.allows(c.line, side, c.start_line, c.start_side):
            return OffDiff("start_line", "start line must be part of the same hunk as the line.")
        entry = diff.find(c.line, side)
        assert entry is not None
        line: int | None = c.line
    else:
        assert c.position is not None
        entry = diff.at_position(c.position)
        if entry is None:
            return OffDiff("position", "position could not be resolved")
        side = "LEFT" if entry.new is None else "RIGHT"
        line = entry.new if entry.new is not None else entry.old
    return {
        "path": path,
        "body": body,
        "line": line,
        "side": side,
        "start_line": c.start_line,
        "start_side": (c.start_side or side) if c.start_line is not None else None,
        "position": entry.position,
        "diff_hunk": diff.hunk_up_to(entry),
    }


class NewReviewComment(_Place):
    body: str
    path: str | None = None  # required unless it answers another comment
    commit_id: str | None = None
    in_reply_to: int | None = None  # another line comment's id: this one answers it, on its line


@router.post("/repos/{owner}/{repo}/pulls/{number}/comments")
def create_review_comment(owner: str, repo: str, number: int, body: NewReviewComment, request: Request) -> JSONResponse:
    """One line comment, or a reply to one: GitHub keeps it in a COMMENTED review of its own."""
    sim, actor, r = load_repo(request, owner, repo)
    if not body.body.strip():
        raise custom_invalid("PullRequestReviewComment", "body is required")
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        pr = issue.pr
        assert pr is not None
        comment: dict[str, Any]
        if body.in_reply_to is not None:
            found = _comment(issue, body.in_reply_to)
            if found is None:
                raise GitHubError(404, "Not Found")
            _, answered = found
            if answered.get("in_reply_to_id"):  # replies join the thread's first comment
                _, answered = _comment(issue, answered["in_reply_to_id"]) or found
            commit_id = pr.head_sha
            keep = ("path", "line", "side", "start_line", "start_side", "position", "diff_hunk")
            comment = {"id": sim.store.new_id(), "body": body.body, "in_reply_to_id": answered["id"]}
            comment |= {k: answered.get(k) for k in keep}
        else:
            commit_id = body.commit_id or pr.head_sha
            if not r.git.commit_exists(commit_id):
                raise custom_invalid("PullRequestReviewComment", "commit_id is not part of the pull request")
            if body.path is None:
                raise GitHubError(422, "Invalid request.\n\nFor 'path', Field required.")
            resolved = _on_diff(body.path, body.body, body, _diffs(r, issue, commit_id))
            if isinstance(resolved, OffDiff):  # one comment alone: GitHub names the field
                error = {
                    "resource": "PullRequestReviewComment",
                    "code": "custom",
                    "field": f"pull_request_review_thread.{resolved.field}",
                    "message": "could not be resolved",
                }
                raise GitHubError(422, "Validation Failed", errors=[error])
            comment = {"id": sim.store.new_id(), **resolved}
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


@router.get("/repos/{owner}/{repo}/pulls/comments/{comment_id}")
def get_review_comment(owner: str, repo: str, comment_id: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        for issue in r.issues.values():
            if (found := _comment(issue, comment_id)) is not None:
                return JSONResponse(sim.pulls.review_comment(r, issue, *found))
        raise GitHubError(404, "Not Found")


def _comment(issue: Issue, comment_id: int) -> tuple[Review, dict[str, Any]] | None:
    """The pull request's line comment with this id, and the review holding it."""
    reviews = issue.pr.reviews if issue.pr is not None else []
    return next(((rv, c) for rv in reviews for c in rv.comments if c["id"] == comment_id), None)


@router.get("/repos/{owner}/{repo}/pulls/{number}/comments")
def list_review_comments(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    """The inline comments of every review, oldest first (GitHub's "review comments")."""
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        assert issue.pr is not None
        pairs = [(rv, c) for rv in issue.pr.reviews for c in rv.comments]
        return paginate(request, pairs, shape=lambda p: sim.pulls.review_comment(r, issue, *p))
