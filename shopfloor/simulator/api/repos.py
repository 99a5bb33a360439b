"""Users, repositories, forks, branches, commits, file contents, collaborators and the rate limit."""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from shopfloor.simulator.auth import RANK, permission, push_rules, require
from shopfloor.simulator.core import LOGIN_RE
from shopfloor.simulator.deps import actor_of, load_repo, paginate, sim_of
from shopfloor.simulator.errors import GitHubError, invalid, not_found
from shopfloor.simulator.git.pre_receive import WORKFLOWS_DIR
from shopfloor.simulator.git.repos import GitError, RefUpdate
from shopfloor.simulator.protection import ref_refusal
from shopfloor.simulator.store import PERMISSIONS, now

router = APIRouter()


@router.get("/user")
def get_me(request: Request) -> JSONResponse:
    sim, actor = sim_of(request), actor_of(request)
    with sim.store.lock:
        return JSONResponse(sim.shapes.full_user(actor.user, private=True))


@router.get("/users/{login}")
def get_user(login: str, request: Request) -> JSONResponse:
    sim = sim_of(request)
    user = _any_user(sim, login)
    with sim.store.lock:
        return JSONResponse(sim.shapes.full_user(user))


def _any_user(sim, login: str):
    """Every well-formed login names a user here (people are created on first use)."""
    if not LOGIN_RE.match(login):
        raise not_found()
    return sim.store.find_user(login) or sim.store.user(login)


@router.get("/rate_limit")
def rate_limit(request: Request) -> JSONResponse:
    sim, actor = sim_of(request), actor_of(request)
    core = sim.limits.peek(actor.token_key, "core")
    search = sim.limits.peek(actor.token_key, "search")
    return JSONResponse({"resources": {"core": core, "search": search}, "rate": core})


@router.get("/repos/{owner}/{repo}")
def get_repo(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo)
    with sim.store.lock:
        data = sim.shapes.repo(r, full=True)
        have = permission(r, actor.user) or "read"
        data["permissions"] = {
            "admin": have == "admin",
            "maintain": RANK[have] >= RANK["maintain"],
            "push": RANK[have] >= RANK["write"],
            "triage": RANK[have] >= RANK["triage"],
            "pull": True,
        }
        return JSONResponse(data)


class NewFork(BaseModel):
    organization: str | None = None
    name: str | None = None
    default_branch_only: bool = False


@router.post("/repos/{owner}/{repo}/forks", status_code=202)
def create_fork(owner: str, repo: str, request: Request, body: NewFork | None = None) -> JSONResponse:
    """A fork owned by the caller (or `organization`); asking again returns the same fork."""
    sim, actor, r = load_repo(request, owner, repo)
    body = body or NewFork()
    if actor.kind == "bot":
        raise GitHubError(403, "Resource not accessible by integration")
    if r.parent is not None:
        raise invalid("Repository", "parent", message="the simulator forks only repositories that are not forks")
    if body.name not in (None, r.name):
        raise invalid("Repository", "name", message="the simulator keeps a fork's name: its parent's")
    target = body.organization or actor.login
    if not LOGIN_RE.match(target) or target.lower() == r.owner.login.lower():
        raise invalid("Repository", "organization")
    fork = sim.fork_repo(r, target)
    with sim.store.lock:
        return JSONResponse(sim.shapes.repo(fork, full=True), status_code=202)


@router.get("/repos/{owner}/{repo}/branches")
def list_branches(owner: str, repo: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    api = f"{sim.shapes.api}/repos/{r.full_name}/commits"
    branches = sorted(r.git.branches().items())
    return paginate(
        request,
        branches,
        shape=lambda b: {
            "name": b[0],
            "commit": {"sha": b[1], "url": f"{api}/{b[1]}"},
            "protected": b[0] in r.protections,
        },
    )


@router.get("/repos/{owner}/{repo}/branches/{branch:path}")
def get_branch(owner: str, repo: str, branch: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    sha = r.git.ref_sha(branch)
    if sha is None:
        raise GitHubError(404, "Branch not found")
    return JSONResponse(sim.git_shapes.branch(r, branch, r.git.commit(sha)))


@router.get("/repos/{owner}/{repo}/commits/{ref:path}")
def get_commit(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    sha = r.git.resolve(ref)
    if sha is None:
        raise GitHubError(422, f"No commit found for SHA: {ref}")
    commit = r.git.commit(sha)
    files = r.git.changed_files(commit.parents[0], sha) if commit.parents else []
    return JSONResponse(sim.git_shapes.commit(r, commit, files=files))


@router.get("/repos/{owner}/{repo}/contents/{path:path}")
def get_contents(owner: str, repo: str, path: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    ref = request.query_params.get("ref") or r.default_branch
    sha = r.git.resolve(ref)
    if sha is None:
        raise GitHubError(404, f"No commit found for the ref {ref}")
    data = r.git.read_file(sha, path)
    blob = r.git.blob_sha(sha, path)
    if data is None or blob is None:
        raise not_found()
    return JSONResponse(sim.git_shapes.content(r, path.strip("/"), ref, data, blob))


class Person(BaseModel):
    name: str
    email: str


class PutContents(BaseModel):
    message: str
    content: str
    sha: str | None = None
    branch: str | None = None
    committer: Person | None = None
    author: Person | None = None


@router.put("/repos/{owner}/{repo}/contents/{path:path}")
def put_contents(owner: str, repo: str, path: str, body: PutContents, request: Request) -> JSONResponse:
    sim, actor, r = load_repo(request, owner, repo, "write")
    if not push_rules(sim.config, r, actor.user).may_change_workflows and path.strip("/").startswith(WORKFLOWS_DIR):
        raise GitHubError(403, "Resource not accessible by integration")
    try:
        content = base64.b64decode(body.content, validate=False)
    except (binascii.Error, ValueError):
        raise invalid("Content", "content") from None
    branch = body.branch or r.default_branch
    refused = ref_refusal(r, actor.user, branch, admin=permission(r, actor.user) == "admin")
    if refused is not None:
        raise GitHubError(409, refused)
    person = body.author or body.committer
    author = (person.name, person.email) if person else (actor.login, f"{actor.login}@users.noreply.simulator")
    with sim.store.lock, r.git.lock:
        before = r.git.ref_sha(branch)
        existing = r.git.blob_sha(before, path) if before else None
        if existing is not None and body.sha != existing:
            raise GitHubError(
                409 if body.sha else 422,
                f"{path} does not match {body.sha}" if body.sha else 'Invalid request.\n\n"sha" wasn\'t supplied.',
            )
        try:
            commit_sha, blob_sha = r.git.write_file(branch, path, content, message=body.message, author=author)
        except GitError as exc:
            raise invalid("Content", "path", message=str(exc)) from None
        sim.refs_moved(r, actor.user, [RefUpdate(f"refs/heads/{branch}", before or "0" * 40, commit_sha)])
        data = r.git.read_file(commit_sha, path) or b""
        payload = {
            "content": sim.git_shapes.content(r, path.strip("/"), branch, data, blob_sha),
            "commit": sim.git_shapes.git_commit(r, r.git.commit(commit_sha)),
        }
    return JSONResponse(payload, status_code=200 if existing else 201)


class PutCollaborator(BaseModel):
    permission: str = Field(default="push")


_ALIASES = {"pull": "read", "push": "write"}


@router.put("/repos/{owner}/{repo}/collaborators/{login}")
def put_collaborator(owner: str, repo: str, login: str, body: PutCollaborator, request: Request) -> Response:
    sim, actor, r = load_repo(request, owner, repo)
    require(r, actor, "admin")
    level = _ALIASES.get(body.permission, body.permission)
    if level not in PERMISSIONS:
        raise invalid("Collaborator", "permission")
    with sim.store.lock:
        user = sim.store.user(login)
        if user.id == r.owner.id:
            raise custom_owner()
        before = r.collaborators.get(user.login.lower())
        r.collaborators[user.login.lower()] = level
        r.updated_at = now()
        if before != level:
            change = {"permission": {"to": level}} if before is None else {"permission": {"from": before, "to": level}}
            action = "added" if before is None else "edited"
            payload = {"action": action, "member": sim.shapes.user(user), "changes": change}
            sim.events.send(r, "member", payload, actor.user)
    return Response(status_code=204)


def custom_owner() -> GitHubError:
    return GitHubError(
        422,
        "Validation Failed",
        errors=[{"resource": "Repository", "code": "custom", "message": "Repository owner cannot be a collaborator"}],
    )


@router.get("/repos/{owner}/{repo}/collaborators/{login}")
def is_collaborator(owner: str, repo: str, login: str, request: Request) -> Response:
    sim, _, r = load_repo(request, owner, repo)
    user = sim.store.find_user(login)
    ok = user is not None and (user.id == r.owner.id or user.login.lower() in r.collaborators)
    return Response(status_code=204 if ok else 404)


@router.get("/repos/{owner}/{repo}/collaborators/{login}/permission")
def collaborator_permission(owner: str, repo: str, login: str, request: Request) -> JSONResponse:
    sim, _, r = load_repo(request, owner, repo)
    user = _any_user(sim, login)
    with sim.store.lock:
        level = permission(r, user) or "none"
        legacy = {"maintain": "write", "triage": "read"}.get(level, level)  # the old field's vocabulary
        shaped = sim.shapes.user(user) or {}

        def has(p: str) -> bool:
            return level != "none" and RANK[level] >= RANK[p]

        shaped["permissions"] = {
            "admin": has("admin"),
            "maintain": has("maintain"),
            "push": has("write"),
            "triage": has("triage"),
            "pull": has("read"),
        }
        shaped["role_name"] = level
        return JSONResponse({"permission": legacy, "role_name": level, "user": shaped})
