"""Reads the factory decides on: a user's permission, a file, and a commit's CI status."""

from __future__ import annotations

import base64
import binascii
from typing import get_args
from urllib.parse import quote

from github import GithubException
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi, q
from shopfloor.models import failure_types
from shopfloor.models.github_ops import (
    CiCheck,
    CiState,
    CiStatusInput,
    CiStatusOutput,
    FileOutput,
    Permission,
    PermissionInput,
    PermissionOutput,
    ReadFileInput,
)

_PERMISSIONS = set(get_args(Permission))
_STATUS_STATES: dict[str, CiState] = {
    "success": "success",
    "pending": "pending",
    "failure": "failure",
    "error": "failure",
}
_PASSING_CONCLUSIONS = {"success", "neutral", "skipped"}


def permission(api: GitHubApi, inp: PermissionInput) -> PermissionOutput:
    data = api.get_or_none(f"/repos/{inp.repo}/collaborators/{q(inp.login)}/permission")
    if data is None:  # no such user
        return PermissionOutput(permission="none")
    # `permission` folds maintain into write and triage into read; `role_name` keeps them apart
    # (for custom roles it is the role's own name, so fall back then).
    role = data.get("role_name")
    level = role if role in _PERMISSIONS else data.get("permission")
    return PermissionOutput(permission=level if level in _PERMISSIONS else "none")


def read_file(api: GitHubApi, inp: ReadFileInput) -> FileOutput:
    params = {"ref": inp.ref} if inp.ref else {}
    data = api.get_or_none(f"/repos/{inp.repo}/contents/{quote(inp.path.lstrip('/'), safe='/')}", **params)
    if data is None:
        return FileOutput(found=False)
    if not isinstance(data, dict) or data.get("type") != "file":
        raise ApplicationError(
            f"{api.last}: {inp.path!r} is not a file", type=failure_types.GITHUB_NOT_A_FILE, non_retryable=True
        )
    if int(data.get("size") or 0) > inp.max_bytes:
        raise ApplicationError(
            f"{api.last}: {inp.path!r} is {data['size']} bytes, over the {inp.max_bytes}-byte limit",
            type=failure_types.GITHUB_FILE_TOO_LARGE,
            non_retryable=True,
        )
    try:
        text = base64.b64decode(data.get("content") or "").decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ApplicationError(
            f"{api.last}: {inp.path!r} is not UTF-8 text", type=failure_types.GITHUB_NOT_A_FILE, non_retryable=True
        ) from None
    return FileOutput(found=True, content=text, sha=data.get("sha"))


def required_checks(api: GitHubApi, repo: str, branch: str) -> list[str]:
    """The checks `branch`'s protection requires (GitHub shows them to anyone who can read the
    branch, so the App needs no Administration permission); none when it is not protected."""
    try:
        found = api.poll(f"/repos/{repo}/branches/{quote(branch, safe='/')}")
    except GithubException as exc:
        if exc.status != 404:
            raise
        found = {}  # the base branch went away: the merge says so
    rules = (found.get("protection") or {}).get("required_status_checks") or {}
    named = [*(rules.get("contexts") or []), *(c.get("context") for c in rules.get("checks") or [])]
    return sorted({n for n in named if isinstance(n, str) and n})


def ci_status(api: GitHubApi, inp: CiStatusInput) -> CiStatusOutput:
    """Commit statuses (latest per context) and check runs (latest per name) in one verdict:
    any failure -> failure; else anything running, or nothing reported yet -> pending."""
    checks: list[CiCheck] = []
    combined = api.poll(f"/repos/{inp.repo}/commits/{inp.sha}/status")  # polled while a run waits for CI
    for status in combined.get("statuses") or []:
        checks.append(
            CiCheck(
                name=status.get("context") or "default",
                kind="status",
                state=_STATUS_STATES.get(status.get("state", ""), "pending"),
                url=status.get("target_url"),
            )
        )
    runs = api.paginate(
        f"/repos/{inp.repo}/commits/{inp.sha}/check-runs", items="check_runs", conditional=True, filter="latest"
    )
    for run in runs:
        if run.get("status") != "completed":
            state: CiState = "pending"
        else:
            state = "success" if run.get("conclusion") in _PASSING_CONCLUSIONS else "failure"
        checks.append(CiCheck(name=run["name"], kind="check_run", state=state, url=run.get("html_url")))
    reported = {c.name for c in checks}
    for name in required_checks(api, inp.repo, inp.base_branch) if inp.base_branch else []:
        if name not in reported:
            checks.append(CiCheck(name=name, kind="required", state="pending"))
    states = {c.state for c in checks}
    overall: CiState = "success"
    if "failure" in states:
        overall = "failure"
    elif "pending" in states or not checks:
        overall = "pending"
    return CiStatusOutput(state=overall, total=len(checks), checks=checks)
