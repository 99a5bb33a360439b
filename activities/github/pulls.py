"""Pull requests: find-or-create, one review per (workflow, round), merge behind a head-SHA guard.

Every text written is cleaned by `for_github` first (a model wrote it: no HTML comments, so no
shopfloor marker but the one added here). Each is idempotent under retries: a PR is found by its
head branch before one is created, a review carries a hidden marker and is listed before one is
submitted, and a merge that already happened (the response was lost) is recognized by the PR's
own state.

A review's line comments are the model's choice of lines, and GitHub refuses the whole review
(422) when one of them is off the pull request's diff: those are written into the review's body
instead, and if GitHub still refuses it (the head moved since the diff was read) the review is
submitted again with every comment in its body. A refused review was not kept, so this makes
one review, not two.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from github import GithubException
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi
from shopfloor.agents.github_text import for_github
from shopfloor.agents.progress import untrusted
from shopfloor.diff_lines import FileDiff
from shopfloor.models import failure_types
from shopfloor.models.github_ops import (
    FindOrCreatePrInput,
    MergeOutput,
    MergePrInput,
    PrOutput,
    ReviewComment,
    ReviewOutput,
    SubmitReviewInput,
    comment_marker,
    with_marker,
)


def _pr_output(pr: dict[str, Any], *, created: bool) -> PrOutput:
    return PrOutput(number=pr["number"], url=pr.get("html_url") or "", head_sha=pr["head"]["sha"], created=created)


def find_open_pr(api: GitHubApi, repo: str, head: str) -> dict[str, Any] | None:
    owner = repo.split("/", 1)[0]
    for pr in api.paginate(f"/repos/{repo}/pulls", state="open", head=f"{owner}:{head}"):
        # Filter again: the `head` filter is the server's, the guarantee should be ours.
        if pr["head"]["ref"] == head and (pr["head"].get("repo") or {}).get("full_name") in (repo, None):
            return pr
    return None


def find_or_create_pr(api: GitHubApi, inp: FindOrCreatePrInput) -> PrOutput:
    found = find_open_pr(api, inp.repo, inp.head)
    if found is not None:
        return _pr_output(found, created=False)
    text = for_github(inp.body)
    if inp.workflow_id is not None:  # last, where the edge looks for it: nothing written can follow it
        text = f"{text}\n\n{comment_marker(inp.workflow_id, 'pr')}".lstrip()
    title = " ".join(for_github(inp.title).split()) or inp.head
    body = {"title": title, "head": inp.head, "base": inp.base, "body": text, "draft": inp.draft}
    try:
        return _pr_output(api.post(f"/repos/{inp.repo}/pulls", body), created=True)
    except GithubException as exc:
        failed = api.last
        # 422 "A pull request already exists for owner:head": another attempt won the race.
        if exc.status == 422 and (found := find_open_pr(api, inp.repo, inp.head)) is not None:
            return _pr_output(found, created=False)
        api.last = failed  # the error names the create, not the look-up after it
        raise


def submit_review(api: GitHubApi, inp: SubmitReviewInput) -> ReviewOutput:
    kind = f"review-{inp.round}"
    marker = comment_marker(inp.workflow_id, kind)
    me = api.own_login()
    for review in api.paginate(f"/repos/{inp.repo}/pulls/{inp.pr_number}/reviews"):
        if (review.get("user") or {}).get("login") == me and marker in (review.get("body") or ""):
            return _review_output(review, created=False)
    inline, moved = _on_the_diff(api, inp) if inp.comments else ([], [])

    def payload(inline: list[ReviewComment], moved: list[ReviewComment]) -> dict[str, Any]:
        body = _with_moved(inp.body, moved)
        made: dict[str, Any] = {
            "event": inp.event,
            "body": with_marker(for_github(body), inp.workflow_id, kind),
            "comments": [c.model_dump() | {"body": for_github(c.body)} for c in inline],
        }
        if inp.commit_id:
            made["commit_id"] = inp.commit_id
        return made

    url = f"/repos/{inp.repo}/pulls/{inp.pr_number}/reviews"
    try:
        return _review_output(api.post(url, payload(inline, moved)), created=True)
    except GithubException as exc:
        if exc.status != 422 or not inline:
            raise
    # GitHub does not say which comment it refused: every one goes into the body.
    return _review_output(api.post(url, payload([], list(inp.comments))), created=True)


def _on_the_diff(api: GitHubApi, inp: SubmitReviewInput) -> tuple[list[ReviewComment], list[ReviewComment]]:
    """(the comments on the pull request's diff as it is now, the others)."""
    files = api.paginate(f"/repos/{inp.repo}/pulls/{inp.pr_number}/files")
    diffs = {f["filename"]: FileDiff.parse(f["patch"]) for f in files if f.get("patch")}
    inline: list[ReviewComment] = []
    moved: list[ReviewComment] = []
    for c in inp.comments:
        diff = diffs.get(c.path)
        (inline if diff is not None and diff.allows(c.line, c.side) else moved).append(c)
    return inline, moved


def _with_moved(body: str, moved: list[ReviewComment]) -> str:
    """The review's body with the line comments GitHub would not take on their lines."""
    if not moved:
        return body
    parts = [body.rstrip(), "", "**Comments on lines outside this pull request's diff**"]
    for c in moved:
        side = "" if c.side == "RIGHT" else " (the old file)"
        parts += ["", f"{untrusted(c.path, 200)} line {c.line}{side}:", "", c.body.strip()]
    return "\n".join(parts).strip()


def _review_output(review: dict[str, Any], *, created: bool) -> ReviewOutput:
    url = review.get("html_url") or ""
    return ReviewOutput(id=review["id"], state=review.get("state", ""), url=url, created=created)


def _head_changed(api: GitHubApi, inp: MergePrInput, actual: str, *, merged: bool) -> ApplicationError:
    done = "was merged" if merged else "is"
    return ApplicationError(
        f"{api.last}: pull request #{inp.pr_number} {done} at head {actual[:12]}, not the reviewed {inp.head_sha[:12]}",
        type=failure_types.GITHUB_HEAD_CHANGED,
        non_retryable=True,
    )


def _already_merged(api: GitHubApi, inp: MergePrInput, pr: dict[str, Any]) -> MergeOutput:
    if pr["head"]["sha"] != inp.head_sha:
        raise _head_changed(api, inp, pr["head"]["sha"], merged=True)
    return MergeOutput(sha=pr["merge_commit_sha"], already_merged=True)


def _branch_holds(api: GitHubApi, pr: dict[str, Any], sha: str) -> bool:
    """Whether the pull request's head branch already points at `sha` (read from the branch itself)."""
    head = pr["head"]
    repo = (head.get("repo") or {}).get("full_name")
    if not repo:  # the head's repository was deleted
        return False
    ref = api.get_or_none(f"/repos/{repo}/git/ref/heads/{quote(head['ref'], safe='/')}")
    return bool(ref) and (ref.get("object") or {}).get("sha") == sha


def merge_pr(api: GitHubApi, inp: MergePrInput) -> MergeOutput:
    path = f"/repos/{inp.repo}/pulls/{inp.pr_number}"
    pr = api.get(path)
    if pr.get("merged"):
        return _already_merged(api, inp, pr)  # a retry after a lost response
    if pr["state"] != "open":
        raise ApplicationError(
            f"{api.last}: pull request #{inp.pr_number} was closed without merging",
            type=failure_types.GITHUB_NOT_MERGEABLE,
            non_retryable=True,
        )
    if pr["head"]["sha"] != inp.head_sha:
        read = api.last
        if _branch_holds(api, pr, inp.head_sha):
            raise ApplicationError(
                f"{read}: pull request #{inp.pr_number} still shows head {pr['head']['sha'][:12]} while its "
                f"branch is at {inp.head_sha[:12]}; GitHub moves the head in the background, so this is tried again",
                type=failure_types.GITHUB_PR_HEAD_STALE,
            )
        api.last = read  # the refusal names the pull request's read, not the branch's
        raise _head_changed(api, inp, pr["head"]["sha"], merged=False)
    body: dict[str, Any] = {"sha": inp.head_sha, "merge_method": inp.method}
    if inp.title is not None:
        body["commit_title"] = inp.title
    if inp.message is not None:
        body["commit_message"] = inp.message
    try:
        return MergeOutput(sha=api.put(f"{path}/merge", body)["sha"])
    except GithubException as exc:
        failed = api.last
        if exc.status in (405, 409):  # maybe merged meanwhile by a concurrent attempt
            pr = api.get(path)
            if pr.get("merged"):
                return _already_merged(api, inp, pr)
        api.last = failed  # the error names the merge, not the re-check after it
        raise
