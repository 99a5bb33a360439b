"""Commit statuses and check runs/suites, with their webhooks."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.deps import load_repo, paginate
from shopfloor.simulator.errors import GitHubError, custom_invalid, not_found
from shopfloor.simulator.shapes.checks import suite_state
from shopfloor.simulator.store import (
    APP_SLUG,
    CheckRun,
    CheckSuite,
    CommitStatus,
    Repo,
    now,
)

router = APIRouter()
Conclusion = Literal["action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"]


def _sha(r: Repo, ref: str) -> str:
    sha = r.git.resolve(ref)
    if sha is None:
        raise GitHubError(422, f"No commit found for SHA: {ref}")
    return sha


class NewStatus(BaseModel):
    state: Literal["error", "failure", "pending", "success"]
    target_url: str | None = None
    description: str | None = None
    context: str = "default"


@router.post("/repos/{owner}/{repo}/statuses/{sha}", status_code=201)
def create_status(owner: str, repo: str, sha: str, body: NewStatus, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    with sim.store.lock:
        full = _sha(r, sha)
        t = now()
        st = CommitStatus(
            id=sim.store.new_id(),
            sha=full,
            state=body.state,
            context=body.context,
            description=body.description,
            target_url=body.target_url,
            creator=actor.user,
            created_at=t,
            updated_at=t,
        )
        r.statuses.append(st)
        shaped = sim.checks.status(r, st)
        commit = sim.git_shapes.commit(r, r.git.commit(full))
        branches = [
            {
                "name": b,
                "commit": {"sha": s, "url": f"{sim.shapes.api}/repos/{r.full_name}/commits/{s}"},
                "protected": False,
            }
            for b, s in r.git.branches().items()
            if s == full
        ]
        sim.events.send(
            r,
            "status",
            {
                "id": st.id,
                "sha": full,
                "name": r.full_name,
                "target_url": st.target_url,
                "context": st.context,
                "description": st.description,
                "state": st.state,
                "commit": commit,
                "branches": branches,
                "created_at": shaped["created_at"],
                "updated_at": shaped["updated_at"],
                "avatar_url": None,
            },
            actor.user,
        )
        return JSONResponse(shaped, status_code=201)


@router.get("/repos/{owner}/{repo}/commits/{ref:path}/status")
def combined_status(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.checks.combined(r, _sha(r, ref)))


@router.get("/repos/{owner}/{repo}/commits/{ref:path}/statuses")
def list_statuses(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        sha = _sha(r, ref)
        found = [st for st in reversed(r.statuses) if st.sha == sha]  # newest first, as GitHub lists them
        return paginate(request, found, shape=lambda st: sim.checks.status(r, st))


class Output(BaseModel):
    title: str | None = None
    summary: str | None = None
    text: str | None = None


class CheckRunBody(BaseModel):
    name: str | None = None
    head_sha: str | None = None
    details_url: str | None = None
    external_id: str | None = None
    status: Literal["queued", "in_progress", "completed", "waiting", "requested", "pending"] | None = None
    started_at: str | None = None
    conclusion: Conclusion | None = None
    completed_at: str | None = None
    output: Output | None = None
    actions: list[Any] = Field(default_factory=list)


def _apply(run: CheckRun, body: CheckRunBody) -> None:
    if body.output is not None:
        run.output = {**run.output, **body.output.model_dump(exclude_unset=True)}
    if body.details_url is not None:
        run.details_url = body.details_url
    if body.external_id is not None:
        run.external_id = body.external_id
    if body.conclusion is not None:
        run.status, run.conclusion, run.completed_at = "completed", body.conclusion, now()
    elif body.status is not None:
        if body.status == "completed":
            raise custom_invalid("CheckRun", "conclusion is required when status is completed")
        run.status = body.status


def _events_for(sim: Any, r: Repo, run: CheckRun, action: str, sender: Any) -> None:
    sim.events.send(
        r, "check_run", {"action": action, "check_run": sim.checks.check_run(r, run, with_suite_detail=True)}, sender
    )
    if run.status == "completed":
        runs = [c for c in r.check_runs.values() if c.suite.id == run.suite.id]
        if suite_state(runs)[0] == "completed":
            sim.events.send(
                r, "check_suite", {"action": "completed", "check_suite": sim.checks.suite(r, run.suite)}, sender
            )


@router.post("/repos/{owner}/{repo}/check-runs", status_code=201)
def create_check_run(owner: str, repo: str, body: CheckRunBody, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    if actor.kind != "bot":
        raise GitHubError(403, "You must authenticate via a GitHub App.")
    if not body.name or not body.head_sha:
        raise custom_invalid("CheckRun", "name and head_sha are required")
    with sim.store.lock:
        sha = _sha(r, body.head_sha)
        t = now()
        suite = next((s for s in r.check_suites.values() if s.head_sha == sha and s.app_slug == APP_SLUG), None)
        if suite is None:
            branch = next((b for b, s in r.git.branches().items() if s == sha), None)
            suite = CheckSuite(
                id=sim.store.new_id(),
                head_sha=sha,
                head_branch=branch,
                app_slug=APP_SLUG,
                before=None,
                after=sha,
                created_at=t,
                updated_at=t,
            )
            r.check_suites[suite.id] = suite
        run = CheckRun(
            id=sim.store.new_id(),
            name=body.name,
            head_sha=sha,
            suite=suite,
            status="queued",
            conclusion=None,
            started_at=t,
            completed_at=None,
            output={"title": None, "summary": None, "text": None},
        )
        _apply(run, body)
        r.check_runs[run.id] = run
        _events_for(sim, r, run, "created", actor.user)
        return JSONResponse(sim.checks.check_run(r, run), status_code=201)


def _run(r: Repo, check_run_id: int) -> CheckRun:
    run = r.check_runs.get(check_run_id)
    if run is None:
        raise not_found()
    return run


@router.patch("/repos/{owner}/{repo}/check-runs/{check_run_id}")
def update_check_run(owner: str, repo: str, check_run_id: int, body: CheckRunBody, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    with sim.store.lock:
        run = _run(r, check_run_id)
        if actor.kind != "bot" or run.suite.app_slug != APP_SLUG:
            raise GitHubError(
                403,
                "Invalid app_id `%s` - check run can only be modified by the GitHub App "
                "that created it." % (sim.config.app_id + 1),
            )
        was_completed = run.status == "completed"
        _apply(run, body)
        run.suite.updated_at = now()
        if run.status == "completed" and not was_completed:
            _events_for(sim, r, run, "completed", actor.user)
        return JSONResponse(sim.checks.check_run(r, run))


@router.get("/repos/{owner}/{repo}/check-runs/{check_run_id}")
def get_check_run(owner: str, repo: str, check_run_id: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        return JSONResponse(sim.checks.check_run(r, _run(r, check_run_id)))


@router.get("/repos/{owner}/{repo}/commits/{ref:path}/check-runs")
def list_check_runs(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    q = request.query_params
    with sim.store.lock:
        sha = _sha(r, ref)
        runs = [
            c
            for c in r.check_runs.values()
            if c.head_sha == sha
            and (not q.get("check_name") or c.name == q["check_name"])
            and (not q.get("status") or c.status == q["status"])
        ]
        if q.get("filter", "latest") == "latest":  # the newest run per name
            latest: dict[str, CheckRun] = {}
            for c in runs:
                latest[c.name] = c
            runs = list(latest.values())
        runs.sort(key=lambda c: c.id, reverse=True)
        return paginate(
            request,
            runs,
            shape=lambda c: sim.checks.check_run(r, c),
            wrap="check_runs",
            extra={"total_count": len(runs)},
        )


@router.get("/repos/{owner}/{repo}/commits/{ref:path}/check-suites")
def list_check_suites(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        sha = _sha(r, ref)
        suites = sorted((s for s in r.check_suites.values() if s.head_sha == sha), key=lambda s: s.id)
        return paginate(
            request,
            suites,
            shape=lambda s: sim.checks.suite(r, s),
            wrap="check_suites",
            extra={"total_count": len(suites)},
        )
