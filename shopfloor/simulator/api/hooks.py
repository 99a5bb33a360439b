"""Repository webhooks and their deliveries: GitHub's hooks API, which the reconciler also uses.

The config, delivery-listing (cursor paging) and redelivery helpers here also serve the GitHub
App's own webhook (api/app.py, `/app/hook/...`).
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.auth import require
from shopfloor.simulator.deps import load_repo, paginate, sim_of
from shopfloor.simulator.errors import GitHubError, invalid, not_found
from shopfloor.simulator.store import Delivery, Hook, Repo, now

router = APIRouter()


class HookConfig(BaseModel):
    url: str | None = None
    content_type: Literal["json", "form"] | None = None
    secret: str | None = None
    insecure_ssl: str | int | None = None


class NewHook(BaseModel):
    name: str = "web"
    config: HookConfig
    events: list[str] = Field(default_factory=lambda: ["push"])
    active: bool = True


def _hooks_access(request: Request, owner: str, repo: str) -> tuple[Any, Any, Repo]:
    """Repository admins, and the installed app (it holds the `repository_hooks` permission, which
    the reconciler needs to read deliveries)."""
    sim, actor, r = load_repo(request, owner, repo)
    if actor.kind != "bot":
        require(r, actor, "admin")
    return sim, actor, r


def _hook(r: Repo, hook_id: int) -> Hook:
    hook = r.hooks.get(hook_id)
    if hook is None:
        raise not_found()
    return hook


def check_url(url: str | None) -> str:
    if not url or not url.startswith(("http://", "https://")):
        raise invalid("Hook", "url", "custom", "url is not a valid URL")
    return url


def apply_config(hook: Hook, config: HookConfig) -> None:
    """The config keys the request sent (a null or empty `secret` removes it); the caller holds the lock."""
    sent = config.model_fields_set
    if "url" in sent:
        hook.url = check_url(config.url)
    if "secret" in sent:
        hook.secret = config.secret or None
    if "content_type" in sent and config.content_type:
        hook.content_type = config.content_type
    if "insecure_ssl" in sent and config.insecure_ssl is not None:
        hook.insecure_ssl = str(config.insecure_ssl)
    hook.updated_at = now()


@router.post("/repos/{owner}/{repo}/hooks", status_code=201)
def create_hook(owner: str, repo: str, body: NewHook, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    if body.name != "web":
        raise invalid("Hook", "name")
    url = check_url(body.config.url)
    hook = sim.add_hook(
        r,
        url=url,
        secret=body.config.secret,
        events=body.events or ["push"],
        content_type=body.config.content_type or "json",
        active=body.active,
        insecure_ssl=str(body.config.insecure_ssl or "0"),
    )
    with sim.store.lock:
        return JSONResponse(sim.checks.hook(r, hook), status_code=201)


@router.get("/repos/{owner}/{repo}/hooks")
def list_hooks(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        return paginate(request, list(r.hooks.values()), shape=lambda h: sim.checks.hook(r, h))


@router.get("/repos/{owner}/{repo}/hooks/{hook_id}")
def get_hook(owner: str, repo: str, hook_id: int, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.checks.hook(r, _hook(r, hook_id)))


class HookUpdate(BaseModel):
    config: HookConfig | None = None
    events: list[str] | None = None
    add_events: list[str] | None = None
    remove_events: list[str] | None = None
    active: bool | None = None


@router.patch("/repos/{owner}/{repo}/hooks/{hook_id}")
def update_hook(owner: str, repo: str, hook_id: int, body: HookUpdate, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        hook = _hook(r, hook_id)
        if body.config is not None:
            apply_config(hook, body.config)
        if body.events is not None:
            hook.events = body.events
        hook.events = [e for e in hook.events if e not in (body.remove_events or [])]
        hook.events += [e for e in (body.add_events or []) if e not in hook.events]
        if body.active is not None:
            hook.active = body.active
        hook.updated_at = now()
        return JSONResponse(sim.checks.hook(r, hook))


@router.delete("/repos/{owner}/{repo}/hooks/{hook_id}", status_code=204)
def delete_hook(owner: str, repo: str, hook_id: int, request: Request) -> Response:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        _hook(r, hook_id)
        del r.hooks[hook_id]
    return Response(status_code=204)


def _cursor(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(base64.urlsafe_b64decode(value + "==").decode())
    except (ValueError, UnicodeDecodeError):
        raise invalid("HookDelivery", "cursor") from None


def deliveries_page(request: Request, hook_id: int | None) -> JSONResponse:
    """One page of the deliveries of hook `hook_id` (None: none), newest first. `cursor` pages like
    GitHub's (Link rel="next" carries it); `page` works too."""
    sim = sim_of(request)
    q = request.query_params
    with sim.store.lock:
        found = sorted((d for d in sim.store.deliveries if d.hook_id == hook_id), key=lambda d: d.id, reverse=True)
        items = [sim.checks.delivery_item(d) for d in found]
    if "cursor" not in q and "page" in q:
        return paginate(request, items)
    per_page = max(1, min(100, int(q.get("per_page", "30")) if q.get("per_page", "").isdigit() else 30))
    after = _cursor(q.get("cursor"))
    if after is not None:
        items = [d for d in items if d["id"] < after]
    page, rest = items[:per_page], items[per_page:]
    headers = {}
    if rest:
        token = base64.urlsafe_b64encode(str(page[-1]["id"]).encode()).decode().rstrip("=")
        url = f"{sim.config.base_url}{request.url.path}?per_page={per_page}&cursor={token}"
        headers["Link"] = f'<{url}>; rel="next"'
    return JSONResponse(page, headers=headers)


@router.get("/repos/{owner}/{repo}/hooks/{hook_id}/deliveries")
def list_deliveries(owner: str, repo: str, hook_id: int, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        _hook(r, hook_id)
    return deliveries_page(request, hook_id)


def find_delivery(sim: Any, hook_id: int | None, delivery_id: int) -> Delivery:
    """A delivery (any attempt) of hook `hook_id`; 404 otherwise. The caller holds the lock."""
    found = next((d for d in sim.store.deliveries if d.id == delivery_id and d.hook_id == hook_id), None)
    if found is None:
        raise not_found()
    return found


def redeliver_to(sim: Any, hook: Hook, original: Delivery) -> JSONResponse:
    """GitHub's `POST .../deliveries/{id}/attempts`: queue `original` again with its guid (202)."""
    if not hook.active or not hook.url:
        raise GitHubError(422, "Hook is not active")
    sim.dispatcher.redeliver(hook, original)
    return JSONResponse({}, status_code=202)


@router.get("/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}")
def get_delivery(owner: str, repo: str, hook_id: int, delivery_id: int, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        _hook(r, hook_id)
        return JSONResponse(sim.checks.delivery(find_delivery(sim, hook_id, delivery_id)))


@router.post("/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}/attempts", status_code=202)
def redeliver(owner: str, repo: str, hook_id: int, delivery_id: int, request: Request) -> JSONResponse:
    sim, _, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        hook = _hook(r, hook_id)
        return redeliver_to(sim, hook, find_delivery(sim, hook_id, delivery_id))


@router.post("/repos/{owner}/{repo}/hooks/{hook_id}/pings", status_code=204)
def ping(owner: str, repo: str, hook_id: int, request: Request) -> Response:
    sim, actor, r = _hooks_access(request, owner, repo)
    with sim.store.lock:
        hook = _hook(r, hook_id)
        sim.events.send(
            r,
            "ping",
            {"zen": "Design for failure.", "hook_id": hook.id, "hook": sim.checks.hook(r, hook)},
            actor.user,
            only_hook=hook,
        )
    return Response(status_code=204)
