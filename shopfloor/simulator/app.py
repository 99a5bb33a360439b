"""`create_app(config)`: the simulator as one FastAPI app.

- `/api/v3/...`: GitHub's REST subset (auth, rate limits, injected faults, request log here);
- `/{owner}/{repo}.git/...`: real git over smart HTTP (git.http);
- `/_sim/...`: control endpoints for what GitHub has no API for (control.py).
"""

from __future__ import annotations

import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from shopfloor.simulator import errors
from shopfloor.simulator.auth import Actor, authenticate, can, login_for_git, push_rules
from shopfloor.simulator.conditional import with_etag
from shopfloor.simulator.config import SimulatorConfig
from shopfloor.simulator.core import Simulator
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.git.pre_receive import PushRules

log = structlog.get_logger(__name__)
API = "/api/v3"
RATE_LIMIT_PATH = API + "/rate_limit"
DOCS_USER_AGENT = "https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent"
NO_USER_AGENT = (
    "Request forbidden by administrative rules. Please make sure your request has a User-Agent header "
    f"({DOCS_USER_AGENT}). Check https://developer.github.com for other possible causes."
)
WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})  # GitHub's content-creating requests
DOCS_LIMITS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
DOCS_SECONDARY = DOCS_LIMITS + "#about-secondary-rate-limits"
SECONDARY_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach "
    "out to GitHub Support for help, please include the request ID."
)
# Endpoints authenticated by an app JWT instead of a token (auth happens in the route).
_JWT_PATHS = ("/api/v3/app", "/api/v3/app/")
_JWT_SUFFIX = "/installation"


def _uses_jwt(path: str) -> bool:
    return (
        path in _JWT_PATHS
        or path.startswith("/api/v3/app/")
        or (path.startswith("/api/v3/repos/") and path.endswith(_JWT_SUFFIX))
    )


def create_app(config: SimulatorConfig) -> FastAPI:
    sim = Simulator(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        sim.start()
        log.info("simulator_started", base_url=config.base_url, data_dir=str(config.data_dir))
        try:
            yield
        finally:
            await run_in_threadpool(sim.stop)
            log.info("simulator_stopped")

    app = FastAPI(
        title="shopfloor GitHub simulator", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.sim = sim
    errors.install(app)

    @app.middleware("http")
    async def api_gate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if not path.startswith(API):
            return await call_next(request)
        login: str | None = None
        actor: Actor | None = None
        resource = "core"
        headers: dict[str, str] = {}
        try:
            if not request.headers.get("user-agent"):
                raise GitHubError(403, NO_USER_AGENT, docs=DOCS_USER_AGENT)
            if not _uses_jwt(path):
                actor = authenticate(sim.store, sim.config, request.headers.get("authorization"))
                request.state.actor = actor
                login = actor.login
                resource = "search" if path.startswith(API + "/search/") else "core"
                if path != RATE_LIMIT_PATH:  # reading the limit does not count against it
                    headers, allowed = sim.limits.charge(actor.token_key, resource)
                    if not allowed:
                        kind = "installation" if actor.kind == "bot" else "user"
                        raise GitHubError(
                            403,
                            f"API rate limit exceeded for {kind} ID {actor.user.id}.",
                            docs=DOCS_LIMITS,
                        )
                if request.method in WRITES and (wait := sim.limits.over_secondary(actor.token_key)) is not None:
                    raise GitHubError(403, SECONDARY_LIMIT, docs=DOCS_SECONDARY, headers={"retry-after": str(wait)})
            fault = sim.faults.take(request.method, path)
            if fault is not None and fault.spec.when == "before":
                raise fault.error()
            response = await call_next(request)
            if fault is not None:  # "after": the request was applied, its response is lost
                response = fault.error().response()
            elif request.method == "GET" and response.status_code == 200 and actor is not None:
                response, unchanged = await with_etag(response, request.headers.get("if-none-match"))
                if unchanged:  # a 304 costs nothing on GitHub
                    headers = sim.limits.refund(actor.token_key, resource)
        except GitHubError as exc:
            response = exc.response()
        except Exception:  # noqa: BLE001 - a bug answers GitHub's 500 body, still logged and counted
            log.error("simulator_unexpected_error", path=path, error=traceback.format_exc())
            response = GitHubError(500, "Server Error").response()
        for key, value in headers.items():
            response.headers[key] = value
        response.headers.setdefault("x-github-media-type", "github.v3; format=json")
        response.headers["x-github-request-id"] = f"SIM:{id(request):x}"
        with sim.store.lock:
            sim.store.requests.append(
                {
                    "method": request.method,
                    "path": path,
                    "query": request.url.query,
                    "status": response.status_code,
                    "login": login,
                }
            )
        return response

    from shopfloor.simulator.api.routers import api_routers
    from shopfloor.simulator.control import router as control_router

    app.include_router(control_router)
    for router in api_routers():
        app.include_router(router, prefix=API)

    from shopfloor.simulator.git.http import git_router

    def can_push(login: str, owner: str, name: str) -> bool:
        repo = sim.store.repo(owner, name)
        user = sim.store.find_user(login)
        return repo is not None and user is not None and can(repo, user, "write")

    def can_read(login: str | None, owner: str, name: str) -> bool:
        repo = sim.store.repo(owner, name)
        if repo is None or not repo.private:
            return True
        user = sim.store.find_user(login) if login else None
        return user is not None and can(repo, user, "read")

    def resolve(owner: str, name: str):
        repo = sim.store.repo(owner, name)
        return repo.git if repo is not None else None

    def rules_for(login: str, owner: str, name: str) -> PushRules:
        repo, user = sim.store.repo(owner, name), sim.store.find_user(login)
        if repo is None or user is None:
            return PushRules()
        return push_rules(sim.config, repo, user)

    app.include_router(
        git_router(
            resolve=resolve,
            authenticate=lambda header: login_for_git(sim.store, sim.config, header),
            can_push=can_push,
            on_push=sim.on_git_push,
            can_read=can_read,
            rules_for=rules_for,
            hooks_dir=config.data_dir / "git-hooks",
        )
    )
    from shopfloor.simulator.attachments import router as attachments_router
    from shopfloor.simulator.pages import router as pages_router

    app.include_router(attachments_router)

    app.include_router(pages_router)  # after git's routes: `/{owner}/{repo}/info/refs` is git's
    return app
