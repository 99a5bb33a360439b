"""Helpers every route uses: the simulator, the caller, repository look-up and pagination."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import JSONResponse

from shopfloor.simulator.auth import Actor, can, require
from shopfloor.simulator.core import Simulator
from shopfloor.simulator.errors import GitHubError, not_found
from shopfloor.simulator.store import Issue, Repo


def sim_of(request: Request) -> Simulator:
    return request.app.state.sim


def actor_of(request: Request) -> Actor:
    actor = getattr(request.state, "actor", None)
    if actor is None:  # the middleware authenticates every API request; this is a safety net
        raise GitHubError(401, "Requires authentication")
    return actor


def load_repo(request: Request, owner: str, name: str, need: str = "read") -> tuple[Simulator, Actor, Repo]:
    """The repository (404 if absent or invisible to the caller), checking `need` permission."""
    sim, actor = sim_of(request), actor_of(request)
    repo = sim.store.repo(owner, name)
    if repo is None or not can(repo, actor.user, "read"):
        raise not_found()
    require(repo, actor, need)
    return sim, actor, repo


def load_issue(repo: Repo, number: int, *, pr: bool | None = None) -> Issue:
    issue = repo.issues.get(number)
    if issue is None or (pr is True and issue.pr is None):
        raise not_found()
    return issue


def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return max(lo, min(hi, int(raw)))
    except ValueError:
        return default


def paginate(
    request: Request,
    items: list[Any],
    *,
    shape: Callable[[Any], Any] | None = None,
    wrap: str | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """One page of `items` with GitHub's Link header (first/prev/next/last), URLs on our base."""
    per_page = _int(request, "per_page", 30, 1, 100)
    page = _int(request, "page", 1, 1, 10**6)
    total_pages = max(1, math.ceil(len(items) / per_page))
    chunk = items[(page - 1) * per_page : page * per_page]
    if shape is not None:  # shape only the page: some shapes ask git for details
        chunk = [shape(x) for x in chunk]
    base = sim_of(request).config.base_url + request.url.path
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in ("page", "per_page")]

    def url(n: int) -> str:
        return base + "?" + urlencode([*params, ("per_page", per_page), ("page", n)])

    links = []
    if page < total_pages:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(total_pages)}>; rel="last"']
    if page > 1:
        links += [f'<{url(1)}>; rel="first"', f'<{url(min(page - 1, total_pages))}>; rel="prev"']
    headers = {"Link": ", ".join(links)} if links else {}
    body: Any = chunk if wrap is None else {**(extra or {}), wrap: chunk}
    return JSONResponse(body, headers=headers)
