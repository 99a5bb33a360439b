"""Branches: delete `shopfloor/*` branches (never the default branch), and the guard every branch
write passes. Idempotent: a retry after a lost response finds the branch already gone.
"""

from __future__ import annotations

from urllib.parse import quote

from github import GithubException
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi
from shopfloor.models import failure_types
from shopfloor.models.github_ops import BRANCH_PREFIX, DeleteBranchInput, DeleteBranchOutput


def refused(message: str) -> ApplicationError:
    return ApplicationError(message, type=failure_types.SHOPFLOOR_REFUSED, non_retryable=True)


def _ref_path(repo: str, branch: str) -> str:
    return f"/repos/{repo}/git/refs/heads/{quote(branch, safe='/')}"


def guard_branch(api: GitHubApi, repo: str, branch: str, *, allow_any_branch: bool) -> None:
    """shopfloor writes only `shopfloor/*` branches, and never the default branch."""
    if not allow_any_branch and not branch.startswith(BRANCH_PREFIX):
        raise refused(f"{repo}: shopfloor only writes branches under {BRANCH_PREFIX!r}, not {branch!r}")
    default = api.get(f"/repos/{repo}").get("default_branch")
    if branch == default:
        raise refused(f"{repo}: {branch!r} is the default branch; shopfloor never writes it")


def delete_branch(api: GitHubApi, inp: DeleteBranchInput) -> DeleteBranchOutput:
    guard_branch(api, inp.repo, inp.branch, allow_any_branch=inp.allow_any_branch)
    try:
        api.delete(_ref_path(inp.repo, inp.branch))
    except GithubException as exc:
        if exc.status in (404, 422):  # 422 "Reference does not exist": already deleted
            return DeleteBranchOutput(deleted=False)
        raise
    return DeleteBranchOutput(deleted=True)
