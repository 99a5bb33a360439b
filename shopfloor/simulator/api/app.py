"""The GitHub App: `GET /app`, the installation for a repository, minting installation tokens
(`ghs_…`, acting as `shopfloor[bot]`), and the App's own webhook (`/app/hook/config`, its
deliveries and redelivery). These take an app JWT, not a token.

The App's webhook (`Store.app_hook`) exists once `PATCH /app/hook/config` sets it; it hears every
event of every repository the App is installed on (all but people's forks, webhooks.py). Until
then `GET /app/hook/config` answers 200 with an empty `url`, and it has no deliveries.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from shopfloor.simulator.api.hooks import HookConfig, apply_config, deliveries_page, find_delivery, redeliver_to
from shopfloor.simulator.auth import app_jwt, token_of
from shopfloor.simulator.core import Simulator
from shopfloor.simulator.deps import sim_of
from shopfloor.simulator.errors import GitHubError, not_found
from shopfloor.simulator.shapes.checks import APP_EVENTS
from shopfloor.simulator.shapes.common import iso
from shopfloor.simulator.store import APP_SLUG, Hook, InstallationToken, now

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
        "id": inst,
        "account": sim.shapes.user(owner),
        "repository_selection": "all",
        "access_tokens_url": f"{api}/app/installations/{inst}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"{sim.config.base_url}/settings/installations/{inst}",
        "app_id": sim.config.app_id,
        "client_id": f"Iv1.{sim.config.app_id:016x}",
        "target_id": owner.id,
        "target_type": owner.type,
        "permissions": sim.config.app_permissions,
        "events": APP_EVENTS,
        "created_at": t,
        "updated_at": t,
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "app_slug": APP_SLUG,
        "suspended_by": None,
        "suspended_at": None,
    }


@router.get("/repos/{owner}/{repo}/installation")
def repo_installation(owner: str, repo: str, request: Request) -> JSONResponse:
    sim = sim_of(request)
    app_jwt(sim.config, request.headers.get("authorization"))
    r = sim.store.repo(owner, repo)
    if r is None or r.parent is not None:  # not installed on people's forks
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
    return JSONResponse(
        {
            "token": token,
            "expires_at": iso(expires),
            "permissions": sim.config.app_permissions,
            "repository_selection": "all",
        },
        status_code=201,
    )


# ---- the App's own webhook -------------------------------------------------------------------------
def _as_app(request: Request) -> Simulator:
    sim = sim_of(request)
    app_jwt(sim.config, request.headers.get("authorization"))
    return sim


def _hook_config(hook: Hook | None) -> dict[str, Any]:
    """GitHub's `webhook-config`; the secret is never returned, only masked when set."""
    if hook is None:  # an App without a webhook URL: GitHub's shape with an empty url
        return {"content_type": "json", "insecure_ssl": "0", "url": ""}
    config: dict[str, Any] = {"content_type": hook.content_type, "insecure_ssl": hook.insecure_ssl, "url": hook.url}
    if hook.secret:
        config["secret"] = "********"
    return config


@router.get("/app/hook/config")
def get_hook_config(request: Request) -> JSONResponse:
    sim = _as_app(request)
    with sim.store.lock:
        return JSONResponse(_hook_config(sim.store.app_hook))


@router.patch("/app/hook/config")
def update_hook_config(body: HookConfig, request: Request) -> JSONResponse:
    """Sets the keys sent; the first call creates the App's webhook (active, every event)."""
    sim = _as_app(request)
    with sim.store.lock:
        hook = sim.store.app_hook
        if hook is None:
            hook = Hook(
                id=sim.store.new_id(),
                repo_id=0,
                url="",
                secret=None,
                events=["*"],
                active=True,
                app_id=sim.config.app_id,
            )
            apply_config(hook, body)  # validates before anything is kept
            sim.store.app_hook = hook
        else:
            apply_config(hook, body)
        return JSONResponse(_hook_config(hook))


def _app_hook_id(sim: Simulator) -> int | None:
    hook = sim.store.app_hook
    return hook.id if hook is not None else None


@router.get("/app/hook/deliveries")
def list_hook_deliveries(request: Request) -> JSONResponse:
    """Newest first, paged by `cursor` (Link rel="next") like a repository hook's deliveries."""
    sim = _as_app(request)
    with sim.store.lock:
        hook_id = _app_hook_id(sim)
    return deliveries_page(request, hook_id)


@router.get("/app/hook/deliveries/{delivery_id}")
def get_hook_delivery(delivery_id: int, request: Request) -> JSONResponse:
    sim = _as_app(request)
    with sim.store.lock:
        return JSONResponse(sim.checks.delivery(find_delivery(sim, _app_hook_id(sim), delivery_id)))


@router.post("/app/hook/deliveries/{delivery_id}/attempts", status_code=202)
def redeliver_hook_delivery(delivery_id: int, request: Request) -> JSONResponse:
    """Sends the delivery again with its guid; 422 while the App's webhook has no URL."""
    sim = _as_app(request)
    with sim.store.lock:
        original = find_delivery(sim, _app_hook_id(sim), delivery_id)
        hook = sim.store.app_hook
        if hook is None:
            raise not_found()
        return redeliver_to(sim, hook, original)


@router.get("/installation/repositories")
def installation_repositories(request: Request) -> JSONResponse:
    """The repositories an installation token reaches (all of its owner's, forks aside)."""
    sim = sim_of(request)
    token = token_of(request.headers.get("authorization"))
    with sim.store.lock:
        minted = sim.store.tokens.get(token) if token else None
        if minted is None:
            raise GitHubError(403, "This endpoint requires you to be authenticated as an installation.")
        owners = {login for login, inst in sim.store.installations.items() if inst == minted.installation_id}
        repos = sorted(
            (r for r in sim.store.repos.values() if r.owner.login.lower() in owners and r.parent is None),
            key=lambda r: r.full_name,
        )
        return JSONResponse(
            {
                "total_count": len(repos),
                "repository_selection": "all",
                "repositories": [sim.shapes.repo(r, full=True) for r in repos],
            }
        )
