"""The GitHub App: `GET /app`, the installation for a repository, and minting installation tokens
(`ghs_…`, acting as `shopfloor[bot]`). These take an app JWT, not a token."""

from __future__ import annotations

import secrets
from datetime import timedelta

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from shopfloor.simulator.auth import app_jwt
from shopfloor.simulator.deps import sim_of
from shopfloor.simulator.errors import not_found
from shopfloor.simulator.shapes.common import iso
from shopfloor.simulator.shapes.checks import APP_EVENTS, APP_PERMISSIONS
from shopfloor.simulator.store import APP_SLUG, InstallationToken, now

router = APIRouter()


@router.get("/app")
def get_app(request: Request) -> JSONResponse:
    sim = sim_of(request)
    app_jwt(sim.config, request.headers.get("authorization"))
    return JSONResponse(sim.checks.app(APP_SLUG))


def _installation(sim, owner_login: str) -> dict:
    owner = sim.store.user(owner_login)
    inst = sim.store.installation_id(owner_login)
    api = sim.shapes.api
    t = iso(owner.created_at)
    return {
        "id": inst, "account": sim.shapes.user(owner), "repository_selection": "all",
        "access_tokens_url": f"{api}/app/installations/{inst}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"{sim.config.base_url}/settings/installations/{inst}", "app_id": sim.config.app_id,
        "client_id": f"Iv1.{sim.config.app_id:016x}", "target_id": owner.id, "target_type": owner.type,
        "permissions": APP_PERMISSIONS, "events": APP_EVENTS, "created_at": t, "updated_at": t,
        "single_file_name": None, "has_multiple_single_files": False, "single_file_paths": [],
        "app_slug": APP_SLUG, "suspended_by": None, "suspended_at": None,
    }  # fmt: skip


@router.get("/repos/{owner}/{repo}/installation")
def repo_installation(owner: str, repo: str, request: Request) -> JSONResponse:
    sim = sim_of(request)
    app_jwt(sim.config, request.headers.get("authorization"))
    r = sim.store.repo(owner, repo)
    if r is None:
        raise not_found()
    with sim.store.lock:
        return JSONResponse(_installation(sim, r.owner.login))


@router.post("/app/installations/{installation_id}/access_tokens", status_code=201)
def access_token(installation_id: int, request: Request) -> JSONResponse:
    sim = sim_of(request)
    app_jwt(sim.config, request.headers.get("authorization"))
    with sim.store.lock:
        owners = [login for login, inst in sim.store.installations.items() if inst == installation_id]
        if not owners:
            raise not_found()
        token = "ghs_" + secrets.token_urlsafe(27).replace("-", "a").replace("_", "b")[:36]
        expires = now() + timedelta(seconds=sim.config.installation_token_ttl_s)
        sim.store.tokens[token] = InstallationToken(token=token, installation_id=installation_id, expires_at=expires)
    return JSONResponse({"token": token, "expires_at": iso(expires), "permissions": APP_PERMISSIONS,
                         "repository_selection": "all"}, status_code=201)  # fmt: skip
