"""Pull requests: create (one open PR per head/base), read, edit, list, files, commits, merge and
update-branch, with mergeability computed from git."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.api.issues import IssueUpdate, update_fields
from shopfloor.simulator.auth import can
from shopfloor.simulator.core import Simulator
from shopfloor.simulator.deps import load_issue, load_repo, paginate
from shopfloor.simulator.errors import GitHubError, custom_invalid, invalid
from shopfloor.simulator.git.repos import GitError, MergeConflict, RefUpdate
from shopfloor.simulator.merging import merge_pull
from shopfloor.simulator.store import Issue, PullRequest, Repo, now

router = APIRouter()


def _head(sim: Simulator, r: Repo, ref: str) -> tuple[Repo | None, str]:
    """`branch` or `owner:branch` → (the fork it lives in, or None for `r` itself; the branch).
    Another owner's branch must be in their fork of `r` (GitHub's fork network, one level)."""
    who, sep, branch = ref.partition(":")
    if not sep or who.lower() == r.owner.login.lower():
        return None, branch if sep else ref
    fork = sim.store.repo(who, r.name)
    if fork is None or fork.parent is not r:
        raise invalid("PullRequest", "head")
    return fork, branch


class NewPull(BaseModel):
    title: str | None = None
    head: str = Field(min_length=1)
    base: str = Field(min_length=1)
    body: str | None = None
    draft: bool = False
    maintainer_can_modify: bool = True
    issue: int | None = None


@router.post("/repos/{owner}/{repo}/pulls", status_code=201)
def create_pull(owner: str, repo: str, body: NewPull, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    base = body.base
    with sim.store.lock:
        head_repo, head = _head(sim, r, body.head)
        head_sha, base_sha = (head_repo or r).git.ref_sha(head), r.git.ref_sha(base)
        if base_sha is None:
            raise invalid("PullRequest", "base")
        if head_sha is None:
            raise invalid("PullRequest", "head")
        if sim.open_prs(r, head=head, base=base, head_repo=head_repo):
            raise custom_invalid(
                "PullRequest", f"A pull request already exists for {(head_repo or r).owner.login}:{head}."
            )
        if head_repo is not None:
            r.git.fetch_commit(head_repo.git, head_sha)
        if r.git.is_ancestor(head_sha, base_sha):
            raise custom_invalid("PullRequest", f"No commits between {base} and {head}")
        title = body.title
        if body.issue is not None:
            source = r.issues.get(body.issue)
            if source is None or source.pr is not None:
                raise invalid("PullRequest", "issue")
            title = title or source.title
        if not title or not title.strip():
            raise invalid("PullRequest", "title", "missing_field")
        t = now()
        issue = Issue(
            id=sim.store.new_id(),
            number=r.next_number(),
            title=title,
            body=body.body,
            user=actor.user,
            created_at=t,
            updated_at=t,
            pr=PullRequest(
                id=sim.store.new_id(),
                head_ref=head,
                head_sha=head_sha,
                base_ref=base,
                head_repo=head_repo,
                draft=body.draft,
                maintainer_can_modify=body.maintainer_can_modify,
            ),
        )
        r.git.set_pull_head(issue.number, head_sha)
        r.issues[issue.number] = issue
        sim.events.pull_request(r, issue, "opened", actor.user)
        sim.ci.trigger(r, issue)
        return JSONResponse(sim.pulls.full(r, issue), status_code=201)


@router.get("/repos/{owner}/{repo}/pulls/{number}")
def get_pull(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.pulls.full(r, load_issue(r, number, pr=True), asked=True))


class PullUpdate(BaseModel):
    title: str | None = None
    body: str | None = None
    state: Literal["open", "closed"] | None = None
    base: str | None = None
    maintainer_can_modify: bool | None = None


@router.patch("/repos/{owner}/{repo}/pulls/{number}")
def update_pull(owner: str, repo: str, number: int, body: PullUpdate, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        assert issue.pr is not None
        if issue.user.id != actor.user.id and not can(r, actor.user, "write"):
            raise GitHubError(
                403,
                "Resource not accessible by integration"
                if actor.kind == "bot"
                else "Must have write access to edit this pull request.",
            )
        if body.base is not None and body.base != issue.pr.base_ref:
            if issue.state != "open" or r.git.ref_sha(body.base) is None:
                raise invalid("PullRequest", "base")
            old = issue.pr.base_ref
            issue.pr.base_ref = body.base
            issue.updated_at = now()
            sim.events.pull_request(
                r,
                issue,
                "edited",
                actor.user,
                changes={"base": {"ref": {"from": old}, "sha": {"from": r.git.ref_sha(old) or ""}}},
            )
        if body.maintainer_can_modify is not None:
            issue.pr.maintainer_can_modify = body.maintainer_can_modify
        fields = body.model_dump(include={"title", "body", "state"}, exclude_unset=True)
        update_fields(sim, r, issue, IssueUpdate(**fields), actor.user)
        return JSONResponse(sim.pulls.full(r, issue))


@router.get("/repos/{owner}/{repo}/pulls")
def list_pulls(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    q = request.query_params
    state = q.get("state", "open")
    base = q.get("base")
    with sim.store.lock:
        try:
            head_repo, head = _head(sim, r, q["head"]) if q.get("head") else (None, None)
        except GitHubError:  # a head in no fork of this repository: no pull request has it
            return paginate(request, [], shape=lambda i: sim.pulls.simple(r, i))
        found = [
            i
            for i in r.issues.values()
            if i.pr
            and (state == "all" or i.state == state)
            and (head is None or (i.pr.head_ref == head and i.pr.head_repo is head_repo))
            and (base is None or i.pr.base_ref == base)
        ]
        found.sort(key=lambda i: i.number, reverse=q.get("direction", "desc") != "asc")
        return paginate(request, found, shape=lambda i: sim.pulls.simple(r, i))


def diff_range(r, issue: Issue) -> tuple[str, str]:
    """(merge base, head) of the pull request: the commits its diff spans."""
    assert issue.pr is not None
    base = sim_base = issue.pr.frozen_base_sha or r.git.ref_sha(issue.pr.base_ref) or issue.pr.head_sha
    return r.git.merge_base(sim_base, issue.pr.head_sha) or base, issue.pr.head_sha


@router.get("/repos/{owner}/{repo}/pulls/{number}/files")
def pull_files(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        base, head = diff_range(r, issue)
        files = r.git.changed_files(base, head)
        return paginate(request, files, shape=lambda f: sim.git_shapes.file(r, head, f))


@router.get("/repos/{owner}/{repo}/pulls/{number}/commits")
def pull_commits(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        base, head = diff_range(r, load_issue(r, number, pr=True))
        commits = r.git.commits_between(base, head)
        return paginate(request, commits, shape=lambda c: sim.git_shapes.commit(r, c))


class MergeBody(BaseModel):
    commit_title: str | None = None
    commit_message: str | None = None
    sha: str | None = None
    merge_method: Literal["merge", "squash", "rebase"] = "merge"


@router.put("/repos/{owner}/{repo}/pulls/{number}/merge")
def merge(owner: str, repo: str, number: int, request: Request, body: MergeBody | None = None) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    body = body or MergeBody()
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        result = merge_pull(
            sim,
            r,
            issue,
            actor.user,
            method=body.merge_method,
            title=body.commit_title,
            message=body.commit_message,
            sha=body.sha,
        )
        return JSONResponse(result)


@router.get("/repos/{owner}/{repo}/pulls/{number}/merge")
def is_merged(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        if issue.pr and issue.pr.merged:
            return JSONResponse(None, status_code=204)
        raise GitHubError(404, "Not Found")


class UpdateBranch(BaseModel):
    expected_head_sha: str | None = None


@router.put("/repos/{owner}/{repo}/pulls/{number}/update-branch", status_code=202)
def update_branch(
    owner: str, repo: str, number: int, request: Request, body: UpdateBranch | None = None
) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    with sim.store.lock:
        issue = load_issue(r, number, pr=True)
        pr = issue.pr
        assert pr is not None
        if body and body.expected_head_sha and body.expected_head_sha != pr.head_sha:
            raise GitHubError(422, "expected head sha didn’t match current head ref.")
        base_sha = r.git.ref_sha(pr.base_ref)
        head = pr.head_repo or r  # a fork's branch is updated in the fork, if its author allows it
        if head is not r and not pr.maintainer_can_modify and not can(head, actor.user, "write"):
            raise GitHubError(422, "Cannot update the branch of this pull request: maintainers may not modify it")
        if issue.state != "open" or base_sha is None or head.git.ref_sha(pr.head_ref) != pr.head_sha:
            raise GitHubError(422, "Cannot update the branch of this pull request")
        if r.git.is_ancestor(base_sha, pr.head_sha):
            return JSONResponse({"message": "Updating pull request branch.", "url": ""}, status_code=202)
        author = (actor.login, f"{actor.user.id}+{actor.login}@users.noreply.simulator")
        before = pr.head_sha
        try:
            head.git.fetch_commit(r.git, base_sha)
            new = head.git.merge(
                pr.head_ref,
                base_sha,
                method="merge",
                author=author,
                message="",
                title=f"Merge branch '{pr.base_ref}' into {pr.head_ref}",
            )
        except MergeConflict:
            raise GitHubError(422, "merge conflict between base and head") from None
        except GitError as exc:
            raise GitHubError(422, str(exc)) from None
        sim.refs_moved(head, actor.user, [RefUpdate(f"refs/heads/{pr.head_ref}", before, new)])
        url = f"{sim.config.base_url}/{r.full_name}/pull/{number}"
        return JSONResponse({"message": "Updating pull request branch.", "url": url}, status_code=202)
