"""`/_sim/*`: control endpoints, only for what GitHub has no API for.

Acting as a named person needs no control endpoint: call the normal API with
`Authorization: token user:<login>` (the user is created on first use). Permissions are set with
GitHub's own collaborator API, hooks with GitHub's hooks API.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from shopfloor.simulator.auth import can
from shopfloor.simulator.deps import sim_of
from shopfloor.simulator.errors import GitHubError, not_found
from shopfloor.simulator.faults import FaultSpec
from shopfloor.simulator.shapes.common import iso
from shopfloor.simulator.store import now

router = APIRouter(prefix="/_sim")


class NewRepo(BaseModel):
    owner: str = Field(min_length=1)
    name: str = Field(min_length=1)
    source_dir: Path | None = None
    default_branch: str = "main"
    ci_command: str | None = None
    ci_on_default_branch: bool = False  # CI runs on pushes to the default branch too
    private: bool = False
    description: str | None = None


@router.post("/repos", status_code=201)
def create_repo(body: NewRepo, request: Request) -> JSONResponse:
    sim = sim_of(request)
    repo = sim.create_repo(
        body.owner,
        body.name,
        source_dir=body.source_dir,
        default_branch=body.default_branch,
        ci_command=body.ci_command,
        ci_on_default_branch=body.ci_on_default_branch,
        private=body.private,
        description=body.description,
    )
    with sim.store.lock:
        return JSONResponse(sim.shapes.repo(repo, full=True), status_code=201)


@router.post("/reset", status_code=204)
def reset(request: Request) -> None:
    sim_of(request).reset()


@router.get("/deliveries")
def deliveries(request: Request) -> list[dict]:
    sim = sim_of(request)
    with sim.store.lock:
        return [
            {
                "id": d.id,
                "guid": d.guid,
                "hook_id": d.hook_id,
                "event": d.event,
                "action": d.action,
                "url": d.url,
                "status": d.status,
                "status_code": d.status_code,
                "redelivery": d.redelivery,
                "delivered_at": iso(d.delivered_at),
                "repository_id": d.repository_id,
                "payload": d.payload,
            }
            for d in sim.store.deliveries
        ]


@router.get("/requests")
def requests(request: Request) -> list[dict]:
    sim = sim_of(request)
    with sim.store.lock:
        return list(sim.store.requests)


@router.post("/faults", status_code=201)
def add_fault(spec: FaultSpec, request: Request) -> dict:
    sim_of(request).faults.add(spec)
    return spec.model_dump()


@router.get("/faults")
def list_faults(request: Request) -> list[dict]:
    return sim_of(request).faults.list()


@router.delete("/faults", status_code=204)
def clear_faults(request: Request) -> None:
    sim_of(request).faults.clear()


class DraftState(BaseModel):
    login: str = Field(min_length=1)  # who clicks the button: the author or a writer
    draft: bool = False


@router.post("/repos/{owner}/{repo}/pulls/{number}/draft")
def set_draft(owner: str, repo: str, number: int, body: DraftState, request: Request) -> JSONResponse:
    """ "Ready for review" (`draft: false`) or "Convert to draft" (`draft: true`): GitHub offers
    these only in its UI and GraphQL. Emits `ready_for_review` / `converted_to_draft`."""
    sim = sim_of(request)
    with sim.store.lock:
        r = sim.store.repo(owner, repo)
        issue = r.issues.get(number) if r is not None else None
        if r is None or issue is None or issue.pr is None:
            raise not_found()
        user = sim.store.user(body.login)
        if issue.user.id != user.id and not can(r, user, "write"):
            raise GitHubError(403, f"{body.login} may not change the draft state of this pull request")
        if issue.state != "open":
            raise GitHubError(422, "the pull request is not open")
        if issue.pr.draft != body.draft:
            issue.pr.draft, issue.updated_at = body.draft, now()
            action = "converted_to_draft" if body.draft else "ready_for_review"
            sim.events.pull_request(r, issue, action, user)
        return JSONResponse(sim.pulls.full(r, issue))


@router.post("/wait-idle")
async def wait_idle(request: Request, timeout: float = Query(default=60, gt=0, le=3600)) -> JSONResponse:
    """Returns when every queued webhook delivery and CI run is done (tests wait on this, not sleeps)."""
    idle = await run_in_threadpool(sim_of(request).wait_idle, timeout)
    if not idle:
        return JSONResponse({"idle": False, "message": f"still busy after {timeout}s"}, status_code=408)
    return JSONResponse({"idle": True})
