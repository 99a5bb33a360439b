"""Git references: get, match, create, move (fast-forward or forced) and delete branches and tags."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from shopfloor.simulator.auth import Actor, permission
from shopfloor.simulator.deps import load_repo
from shopfloor.simulator.errors import GitHubError, invalid, not_found
from shopfloor.simulator.git.repos import ZERO_SHA, GitError, RefUpdate
from shopfloor.simulator.protection import ref_refusal
from shopfloor.simulator.store import Repo

router = APIRouter()


def _full(ref: str) -> str:
    ref = ref.strip("/")
    return ref if ref.startswith("refs/") else f"refs/{ref}"


@router.get("/repos/{owner}/{repo}/git/ref/{ref:path}")
def get_ref(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    full = _full(ref)
    sha = r.git.refs().get(full)
    if sha is None:
        raise not_found()
    return JSONResponse(sim.git_shapes.ref(r, full, sha))


@router.get("/repos/{owner}/{repo}/git/matching-refs/{ref:path}")
def matching_refs(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    prefix = _full(ref) if ref else "refs/"
    refs = sorted((name, sha) for name, sha in r.git.refs().items() if name.startswith(prefix))
    return JSONResponse([sim.git_shapes.ref(r, name, sha) for name, sha in refs])


class NewRef(BaseModel):
    ref: str
    sha: str


@router.post("/repos/{owner}/{repo}/git/refs", status_code=201)
def create_ref(owner: str, repo: str, body: NewRef, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    if not body.ref.startswith("refs/") or body.ref.count("/") < 2:
        raise GitHubError(422, "Reference name must start with 'refs/' and have at least two slashes.")
    if not body.ref.startswith("refs/heads/"):
        raise GitHubError(422, "Only branch references (refs/heads/...) are supported by this simulator")
    with sim.store.lock, r.git.lock:
        if body.ref in r.git.refs():
            raise GitHubError(422, "Reference already exists")
        if not r.git.commit_exists(body.sha):
            raise GitHubError(422, "Object does not exist")
        branch = body.ref.removeprefix("refs/heads/")
        try:
            r.git.set_branch(branch, body.sha, expected_old=ZERO_SHA)
        except GitError as exc:
            raise invalid("Reference", "ref", message=str(exc)) from None
        sim.refs_moved(r, actor.user, [RefUpdate(body.ref, ZERO_SHA, body.sha)])
        return JSONResponse(sim.git_shapes.ref(r, body.ref, body.sha), status_code=201)


def _guard(r: Repo, actor: Actor, branch: str, *, deleting: bool = False, forced: bool = False) -> None:
    admin = permission(r, actor.user) == "admin"
    refused = ref_refusal(r, actor.user, branch, admin=admin, deleting=deleting, forced=forced)
    if refused is not None:
        raise GitHubError(422, refused)


class MoveRef(BaseModel):
    sha: str
    force: bool = False


@router.patch("/repos/{owner}/{repo}/git/refs/{ref:path}")
def update_ref(owner: str, repo: str, ref: str, body: MoveRef, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    full = _full(ref)
    if not full.startswith("refs/heads/"):
        raise GitHubError(422, "Reference does not exist")
    branch = full.removeprefix("refs/heads/")
    with sim.store.lock, r.git.lock:
        old = r.git.ref_sha(branch)
        if old is None:
            raise GitHubError(422, "Reference does not exist")
        if not r.git.commit_exists(body.sha):
            raise GitHubError(422, "Object does not exist")
        forward = r.git.is_ancestor(old, body.sha)
        if not body.force and not forward:
            raise GitHubError(422, "Update is not a fast forward")
        _guard(r, actor, branch, forced=not forward)
        r.git.set_branch(branch, body.sha, force=body.force, expected_old=old)
        if old != body.sha:
            sim.refs_moved(r, actor.user, [RefUpdate(full, old, body.sha)])
        return JSONResponse(sim.git_shapes.ref(r, full, body.sha))


@router.delete("/repos/{owner}/{repo}/git/refs/{ref:path}", status_code=204)
def delete_ref(owner: str, repo: str, ref: str, request: Request) -> Response:
    sim, actor, r = load_repo(request, owner, repo, "write")
    full = _full(ref)
    branch = full.removeprefix("refs/heads/")
    with sim.store.lock, r.git.lock:
        old = r.git.ref_sha(branch) if full.startswith("refs/heads/") else None
        if old is None:
            raise GitHubError(422, "Reference does not exist")
        if branch == r.default_branch:
            raise GitHubError(422, "Cannot delete the default branch")
        _guard(r, actor, branch, deleting=True)
        r.git.delete_branch(branch)
        sim.refs_moved(r, actor.user, [RefUpdate(full, old, ZERO_SHA)])
    return Response(status_code=204)
