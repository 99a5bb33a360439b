"""Branch protection: set, read and remove a branch's rules (admins only, as on GitHub)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from shopfloor.simulator.deps import load_repo
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.protection import Protection, ProtectionBody
from shopfloor.simulator.store import Repo

router = APIRouter()


def _enabled(url: str, on: bool) -> dict[str, Any]:
    return {"url": url, "enabled": on}


def protection_shape(api: str, r: Repo, branch: str, rule: Protection) -> dict[str, Any]:
    """GitHub's `branch-protection` body."""
    url = f"{api}/repos/{r.full_name}/branches/{branch}/protection"
    shape: dict[str, Any] = {
        "url": url,
        "enforce_admins": _enabled(f"{url}/enforce_admins", rule.enforce_admins),
        "required_linear_history": {"enabled": False},
        "allow_force_pushes": {"enabled": False},
        "allow_deletions": {"enabled": False},
        "block_creations": {"enabled": False},
        "required_conversation_resolution": {"enabled": False},
        "lock_branch": {"enabled": False},
        "allow_fork_syncing": {"enabled": False},
    }
    if rule.contexts or rule.strict:
        shape["required_status_checks"] = {
            "url": f"{url}/required_status_checks",
            "strict": rule.strict,
            "contexts": list(rule.contexts),
            "contexts_url": f"{url}/required_status_checks/contexts",
            "checks": [{"context": c, "app_id": None} for c in rule.contexts],
        }
    if rule.required_approvals is not None:
        shape["required_pull_request_reviews"] = {
            "url": f"{url}/required_pull_request_reviews",
            "dismiss_stale_reviews": False,
            "require_code_owner_reviews": False,
            "require_last_push_approval": False,
            "required_approving_review_count": rule.required_approvals,
        }
    if rule.push_users is not None:
        shape["restrictions"] = {
            "url": f"{url}/restrictions",
            "users_url": f"{url}/restrictions/users",
            "teams_url": f"{url}/restrictions/teams",
            "apps_url": f"{url}/restrictions/apps",
            "users": [],
            "teams": [],
            "apps": [],
        }
    return shape


def _branch(r: Repo, branch: str) -> None:
    if r.git.ref_sha(branch) is None:
        raise GitHubError(404, "Branch not found")


@router.put("/repos/{owner}/{repo}/branches/{branch:path}/protection")
def put_protection(owner: str, repo: str, branch: str, body: ProtectionBody, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo, "admin")
    with sim.store.lock:
        _branch(r, branch)
        r.protections[branch] = rule = Protection.of(body)
        return JSONResponse(protection_shape(sim.shapes.api, r, branch, rule))


@router.get("/repos/{owner}/{repo}/branches/{branch:path}/protection")
def get_protection(owner: str, repo: str, branch: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo, "admin")
    with sim.store.lock:
        _branch(r, branch)
        rule = r.protections.get(branch)
        if rule is None:
            raise GitHubError(404, "Branch not protected")
        return JSONResponse(protection_shape(sim.shapes.api, r, branch, rule))


@router.delete("/repos/{owner}/{repo}/branches/{branch:path}/protection", status_code=204)
def delete_protection(owner: str, repo: str, branch: str, request: Request) -> Response:
    sim, _, r = load_repo(request, owner, repo, "admin")
    with sim.store.lock:
        _branch(r, branch)
        if r.protections.pop(branch, None) is None:
            raise GitHubError(404, "Branch not protected")
    return Response(status_code=204)
