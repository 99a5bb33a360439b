"""Branches: create (or find) `shopfloor/*` branches and delete them; never the default branch.

Both are idempotent: a retry after a lost response finds the branch already there (or gone).
A branch found at another commit is reported, not forced, unless the input asks for a reset.
"""

from __future__ import annotations

from urllib.parse import quote

from github import GithubException
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi
from shopfloor.models.github_ops import (
    BRANCH_PREFIX,
    DeleteBranchInput,
    DeleteBranchOutput,
    EnsureBranchInput,
    EnsureBranchOutput,
)


def refused(message: str) -> ApplicationError:
    return ApplicationError(message, type="ShopfloorRefused", non_retryable=True)


def _ref_path(repo: str, branch: str, *, single: bool) -> str:
    # GET uses the exact-match endpoint (`git/ref/`): `git/refs/heads/x` also lists x-prefixed refs.
    return f"/repos/{repo}/git/{'ref' if single else 'refs'}/heads/{quote(branch, safe='/')}"


def guard_branch(api: GitHubApi, repo: str, branch: str, *, allow_any_branch: bool) -> None:
    """shopfloor writes only `shopfloor/*` branches, and never the default branch."""
    if not allow_any_branch and not branch.startswith(BRANCH_PREFIX):
        raise refused(f"{repo}: shopfloor only writes branches under {BRANCH_PREFIX!r}, not {branch!r}")
    default = api.get(f"/repos/{repo}").get("default_branch")
    if branch == default:
        raise refused(f"{repo}: {branch!r} is the default branch; shopfloor never writes it")


def branch_sha(api: GitHubApi, repo: str, branch: str) -> str | None:
    ref = api.get_or_none(_ref_path(repo, branch, single=True))
    return ref["object"]["sha"] if ref else None


def ensure_branch(api: GitHubApi, inp: EnsureBranchInput) -> EnsureBranchOutput:
    repo, branch = inp.repo, inp.branch
    guard_branch(api, repo, branch, allow_any_branch=inp.allow_any_branch)
    current = branch_sha(api, repo, branch)
    if current is None:
        try:
            api.post(f"/repos/{repo}/git/refs", {"ref": f"refs/heads/{branch}", "sha": inp.sha})
            return EnsureBranchOutput(branch=branch, sha=inp.sha, status="created")
        except GithubException as exc:
            failed = api.last
            # 422 "Reference already exists": created by a concurrent attempt since we looked.
            if exc.status != 422 or (current := branch_sha(api, repo, branch)) is None:
                api.last = failed  # the error names the create, not the look-up after it
                raise
    if current == inp.sha:
        return EnsureBranchOutput(branch=branch, sha=current, status="exists")
    if not inp.reset:
        return EnsureBranchOutput(branch=branch, sha=current, status="conflict", previous_sha=current)
    api.patch(_ref_path(repo, branch, single=False), {"sha": inp.sha, "force": True})
    return EnsureBranchOutput(branch=branch, sha=inp.sha, status="moved", previous_sha=current)


def delete_branch(api: GitHubApi, inp: DeleteBranchInput) -> DeleteBranchOutput:
    guard_branch(api, inp.repo, inp.branch, allow_any_branch=inp.allow_any_branch)
    try:
        api.delete(_ref_path(inp.repo, inp.branch, single=False))
    except GithubException as exc:
        if exc.status in (404, 422):  # 422 "Reference does not exist": already deleted
            return DeleteBranchOutput(deleted=False)
        raise
    return DeleteBranchOutput(deleted=True)
