"""Repository labels and the labels on an issue or pull request (unknown names are created)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.deps import actor_of, load_issue, load_repo, paginate
from shopfloor.simulator.errors import GitHubError, invalid, not_found
from shopfloor.simulator.store import Issue, Label, Repo, User, now

router = APIRouter()
COLOR_RE = re.compile(r"^[0-9a-fA-F]{6}$")


def get_or_create_label(sim: Any, r: Repo, name: str) -> Label:
    name = name.strip()
    if not name:
        raise invalid("Label", "name", "missing_field")
    found = r.labels.get(name.lower())
    if found is None:
        found = r.labels[name.lower()] = Label(id=sim.store.new_id(), name=name)
    return found


def apply_labels(sim: Any, r: Repo, issue: Issue, names: list[str], user: User, *, emit: bool = True) -> None:
    """Add labels by name (creating unknown ones, as GitHub does), one `labeled` event each."""
    for name in names:
        label = get_or_create_label(sim, r, name)
        if any(lab.id == label.id for lab in issue.labels):
            continue
        issue.labels.append(label)
        issue.updated_at = now()
        if emit:
            sim.events.issue(r, issue, "labeled", user, label=sim.shapes.label(r, label))


@router.get("/repos/{owner}/{repo}/labels")
def list_labels(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        labels = sorted(r.labels.values(), key=lambda lab: lab.name.lower())
        return paginate(request, labels, shape=lambda lab: sim.shapes.label(r, lab))


class NewLabel(BaseModel):
    name: str = Field(min_length=1)
    color: str = "ededed"
    description: str | None = None


@router.post("/repos/{owner}/{repo}/labels", status_code=201)
def create_label(owner: str, repo: str, body: NewLabel, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo, "write")
    color = body.color.lstrip("#")
    if not COLOR_RE.match(color):
        raise invalid("Label", "color")
    with sim.store.lock:
        if body.name.strip().lower() in r.labels:
            raise invalid("Label", "name", "already_exists")
        label = get_or_create_label(sim, r, body.name)
        label.color, label.description = color.lower(), body.description
        shaped = sim.shapes.label(r, label)
        sim.events.send(r, "label", {"action": "created", "label": shaped}, actor_of(request).user)
        return JSONResponse(shaped, status_code=201)


@router.get("/repos/{owner}/{repo}/labels/{name}")
def get_label(owner: str, repo: str, name: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        label = r.labels.get(name.lower())
        if label is None:
            raise not_found()
        return JSONResponse(sim.shapes.label(r, label))


async def _label_names(request: Request) -> list[str]:
    """GitHub takes `{"labels": [...]}` or a bare list of names."""
    try:
        data = await request.json()
    except ValueError:
        raise GitHubError(400, "Problems parsing JSON") from None
    items = data.get("labels", []) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise invalid("Label", "labels")
    names = [str(x.get("name", "")) if isinstance(x, dict) else str(x) for x in items]
    if any(not n.strip() for n in names):
        raise invalid("Label", "name", "missing_field")
    return names


@router.get("/repos/{owner}/{repo}/issues/{number}/labels")
def issue_labels(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    with sim.store.lock:
        issue = load_issue(r, number)
        return paginate(request, list(issue.labels), shape=lambda lab: sim.shapes.label(r, lab))


@router.post("/repos/{owner}/{repo}/issues/{number}/labels")
async def add_labels(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    names = await _label_names(request)
    return await _in_thread(_add, owner, repo, number, names, request, replace=False)


@router.put("/repos/{owner}/{repo}/issues/{number}/labels")
async def set_labels(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
    names = await _label_names(request)
    return await _in_thread(_add, owner, repo, number, names, request, replace=True)


async def _in_thread(fn: Any, *args: Any, **kw: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args, **kw)


def _add(owner: str, repo: str, number: int, names: list[str], request: Request, *, replace: bool) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "triage")
    with sim.store.lock:
        issue = load_issue(r, number)
        if replace:
            keep = {n.lower() for n in names}
            for lab in list(issue.labels):
                if lab.name.lower() not in keep:
                    issue.labels.remove(lab)
                    sim.events.issue(r, issue, "unlabeled", actor.user, label=sim.shapes.label(r, lab))
        apply_labels(sim, r, issue, names, actor.user)
        return JSONResponse([sim.shapes.label(r, lab) for lab in issue.labels])


@router.delete("/repos/{owner}/{repo}/issues/{number}/labels/{name}")
def remove_label(owner: str, repo: str, number: int, name: str, request: Request) -> Response:
    sim, actor, r = load_repo(request, owner, repo, "triage")
    with sim.store.lock:
        issue = load_issue(r, number)
        label = next((lab for lab in issue.labels if lab.name.lower() == name.lower()), None)
        if label is None:
            raise GitHubError(404, "Label does not exist")
        issue.labels.remove(label)
        issue.updated_at = now()
        sim.events.issue(r, issue, "unlabeled", actor.user, label=sim.shapes.label(r, label))
        return JSONResponse([sim.shapes.label(r, lab) for lab in issue.labels])
