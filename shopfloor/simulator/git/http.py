"""Git smart HTTP for the simulator: `git clone`/`fetch`/`push` against the same URLs as GitHub.

Each request runs `git http-backend` as a CGI process (asyncio subprocess): the request body is
streamed into it and its answer streamed back. Clones and fetches are anonymous; pushes need a
token as the Basic password (`https://x-access-token:<token>@host/owner/repo.git`, as GitHub
takes it) and the pusher's write permission. After a push, the refs that changed are handed to
`on_push` — found by snapshotting the repository's refs before and after receive-pack, under a
per-repository lock so two pushes to one repository never blur each other's changes. What GitHub
refuses whatever the pusher's access (a protected branch, an App changing workflows without the
permission) is decided by a pre-receive hook (`pre_receive.py`) before any ref moves.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import os
import shlex
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from shopfloor.simulator.git.pre_receive import RULES_ENV, PushRules
from shopfloor.simulator.git.repos import ZERO_SHA, BareRepo, RefUpdate

log = structlog.get_logger(__name__)

Authenticate = Callable[[str | None], str | None]  # Authorization header → login, or None (→ 401)
CanPush = Callable[[str, str, str], bool]  # (login, owner, repo) → allowed
CanRead = Callable[[str | None, str, str], bool]  # (login or None when anonymous, owner, repo) → may fetch
OnPush = Callable[[str, str, str, list[RefUpdate]], None]  # (owner, repo, pusher login, updates)
Resolve = Callable[[str, str], BareRepo | None]  # (owner, repo) → the repository, or None (→ 404)
RulesFor = Callable[[str, str, str], PushRules]  # (login, owner, repo) → what the push may do

_SERVICES = ("git-upload-pack", "git-receive-pack")
_CHUNK = 64 * 1024
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="GitHub"'}


def git_router(
    *,
    resolve: Resolve,
    authenticate: Authenticate,
    can_push: CanPush,
    on_push: OnPush,
    can_read: CanRead | None = None,
    rules_for: RulesFor | None = None,
    hooks_dir: Path | None = None,
) -> APIRouter:
    """Routes for `/{owner}/{repo}.git/...` (the `.git` suffix is optional, as on GitHub).

    `on_push` runs after receive-pack has finished and before the push's HTTP answer is sent, so
    a `git push` returns only once it has run. A coroutine function is awaited on the event loop;
    a plain function runs in a worker thread (it may block — but should hand long work such as
    CI to a background task). Its errors are logged, never shown to the pusher: the refs moved.
    """
    router = APIRouter()
    locks: dict[Path, asyncio.Lock] = {}
    hooks = install_hooks(hooks_dir) if rules_for is not None and hooks_dir is not None else None

    def hook_env(login: str, owner: str, repo: str) -> dict[str, str]:
        """The environment that makes receive-pack run our pre-receive hook, when it has work."""
        if hooks is None or rules_for is None:
            return {}
        rules = rules_for(login, owner, repo)
        if not rules.restricts:
            return {}
        return {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": str(hooks),
            RULES_ENV: rules.to_json(),
        }

    def lookup(owner: str, repo: str) -> BareRepo | None:
        return resolve(owner, repo.removesuffix(".git"))

    def pusher(request: Request, owner: str, repo: str) -> str | Response:
        """The login allowed to push, or the 401/403 answer."""
        header = request.headers.get("authorization")
        login = authenticate(_as_token(header)) if header else None
        if login is None:
            return PlainTextResponse("Authentication required to push.\n", 401, headers=_CHALLENGE)
        if not can_push(login, owner, repo.removesuffix(".git")):
            msg = f"Permission to {owner}/{repo.removesuffix('.git')}.git denied to {login}.\n"
            return PlainTextResponse(msg, 403)
        return login

    def reader(request: Request, owner: str, repo: str) -> Response | None:
        """None when this caller may fetch; else GitHub's answers for a private repository: a
        credential challenge to anonymous callers, "not found" to everyone else."""
        if can_read is None:
            return None
        header = request.headers.get("authorization")
        login = authenticate(_as_token(header)) if header else None
        if can_read(login, owner, repo.removesuffix(".git")):
            return None
        if login is None:
            return PlainTextResponse("Authentication required.\n", 401, headers=_CHALLENGE)
        return PlainTextResponse("Repository not found.\n", 404)

    @router.get("/{owner}/{repo}/info/refs")
    async def info_refs(owner: str, repo: str, request: Request) -> Response:
        service = request.query_params.get("service")
        found = lookup(owner, repo)
        if found is None:
            return PlainTextResponse("Repository not found.\n", 404)
        if service not in _SERVICES:
            return PlainTextResponse("Only the smart HTTP protocol is served: give ?service=.\n", 403)
        user = None
        if service == "git-upload-pack" and (refused := reader(request, owner, repo)) is not None:
            return refused
        if service == "git-receive-pack":
            who = pusher(request, owner, repo)
            if isinstance(who, Response):
                return who
            user = who
        return await _stream(found, "info/refs", request, user)

    @router.post("/{owner}/{repo}/git-upload-pack")
    async def upload_pack(owner: str, repo: str, request: Request) -> Response:
        found = lookup(owner, repo)
        if found is None:
            return PlainTextResponse("Repository not found.\n", 404)
        if (refused := reader(request, owner, repo)) is not None:
            return refused
        return await _stream(found, "git-upload-pack", request, None)

    @router.post("/{owner}/{repo}/git-receive-pack")
    async def receive_pack(owner: str, repo: str, request: Request) -> Response:
        found = lookup(owner, repo)
        if found is None:
            return PlainTextResponse("Repository not found.\n", 404)
        who = pusher(request, owner, repo)
        if isinstance(who, Response):
            return who
        name = repo.removesuffix(".git")
        lock = locks.setdefault(found.path.resolve(), asyncio.Lock())
        async with lock:
            before = await asyncio.to_thread(found.refs)
            extra = await asyncio.to_thread(hook_env, who, owner, name)
            cgi = await _Cgi.start(found, "git-receive-pack", request, who, extra)
            body = b"".join([chunk async for chunk in cgi.body()])
            after = await asyncio.to_thread(found.refs)
            updates = ref_updates(before, after)
            if updates:
                log.info("sim_git_push", repo=f"{owner}/{name}", pusher=who, refs=[u.ref for u in updates])
                await _notify(on_push, owner, name, who, updates)
        return Response(body, cgi.status, headers=cgi.headers)

    return router


def install_hooks(directory: Path) -> Path:
    """Write the pre-receive hook into `directory` (a `core.hooksPath`) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    hook = directory / "pre-receive"
    package_root = Path(__file__).resolve().parents[3]  # where `shopfloor` imports from
    hook.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(str(package_root))}\n"
        "export PYTHONPATH\n"
        f"exec {shlex.quote(sys.executable)} -m shopfloor.simulator.git.pre_receive\n"
    )
    hook.chmod(0o755)
    return directory


def ref_updates(before: dict[str, str], after: dict[str, str]) -> list[RefUpdate]:
    """The refs that differ between two snapshots, sorted by name. `refs/pull/*` are GitHub's own
    (heads and test merges, moved by the simulator itself, never by a push) and not counted."""
    names = sorted(n for n in set(before) | set(after) if not n.startswith("refs/pull/"))
    return [
        RefUpdate(ref=ref, before=before.get(ref, ZERO_SHA), after=after.get(ref, ZERO_SHA))
        for ref in names
        if before.get(ref) != after.get(ref)
    ]


async def _notify(on_push: OnPush, owner: str, repo: str, login: str, updates: list[RefUpdate]) -> None:
    try:
        if inspect.iscoroutinefunction(on_push):
            await on_push(owner, repo, login, updates)
        else:
            await asyncio.to_thread(on_push, owner, repo, login, updates)
    except Exception:
        log.exception("sim_on_push_failed", repo=f"{owner}/{repo}", pusher=login)


def _as_token(header: str) -> str:
    """`Basic base64(user:token)` → `token <token>`, the form the REST API authenticates.

    The user part is ignored (GitHub's `x-access-token:<token>`); a token given as the user name
    with an empty password counts too. Other schemes pass through unchanged.
    """
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return header
    try:
        user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    secret = password or user
    return f"token {secret}" if secret else ""


async def _stream(repo: BareRepo, action: str, request: Request, user: str | None) -> Response:
    cgi = await _Cgi.start(repo, action, request, user)
    return _PipeResponse(cgi.body(), cgi.status, headers=cgi.headers)


class _PipeResponse(StreamingResponse):
    """A streamed answer that never reads `receive`.

    Under ASGI spec < 2.4 (uvicorn says 2.3) StreamingResponse also reads `receive` to notice a
    disconnect — racing `_feed` for the request body, so a body message could be lost and the
    backend wait forever for it. Here `_feed` is the only reader; a client that goes away shows
    up there (ClientDisconnect), and the backend's output is then drained and dropped.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.stream_response(send)


class _Cgi:
    """One `git http-backend` run: request body streamed in, CGI headers parsed, body streamed out."""

    def __init__(self, proc: asyncio.subprocess.Process, feeder: asyncio.Task[None], what: str) -> None:
        self.proc = proc
        self.feeder = feeder
        self.what = what
        self.status = 200
        self.headers: dict[str, str] = {}
        self.stderr = asyncio.ensure_future(proc.stderr.read()) if proc.stderr else None

    @classmethod
    async def start(
        cls, repo: BareRepo, action: str, request: Request, user: str | None, extra: dict[str, str] | None = None
    ) -> _Cgi:
        path = repo.path.resolve()
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            # Git reads no user or system config here (below); HOME only has to be somewhere
            # that is the simulator's own, so the repositories' root will do.
            "HOME": str(path.parent.parent),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_PROJECT_ROOT": str(path.parent.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": request.method,
            "PATH_INFO": f"/{path.parent.name}/{path.name}/{action}",
            "QUERY_STRING": request.url.query,
            "REMOTE_ADDR": request.client.host if request.client else "127.0.0.1",
        }
        optional = {
            "CONTENT_TYPE": request.headers.get("content-type"),
            "CONTENT_LENGTH": request.headers.get("content-length"),
            "HTTP_CONTENT_ENCODING": request.headers.get("content-encoding"),
            "GIT_PROTOCOL": request.headers.get("git-protocol"),
            "REMOTE_USER": user,
        }
        env.update({k: v for k, v in optional.items() if v})
        env.update(extra or {})
        proc = await asyncio.create_subprocess_exec(
            "git",
            "http-backend",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        feeder = asyncio.ensure_future(_feed(proc, request))
        cgi = cls(proc, feeder, f"{path.parent.name}/{path.name} {action}")
        await cgi._read_headers()
        return cgi

    async def _read_headers(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            text = line.decode("latin-1").rstrip("\r\n")
            if not text:  # blank line ends the headers; EOF too
                return
            key, _, value = text.partition(":")
            if key.strip().lower() == "status":
                self.status = int(value.strip().split(" ")[0])
            else:
                self.headers[key.strip()] = value.strip()

    async def body(self) -> AsyncIterator[bytes]:
        assert self.proc.stdout is not None
        try:
            while chunk := await self.proc.stdout.read(_CHUNK):
                yield chunk
            await self.feeder
            code = await self.proc.wait()
            err = (await self.stderr).decode(errors="replace").strip() if self.stderr else ""
            if code != 0 or err:
                log.warning("sim_http_backend", what=self.what, exit_code=code, stderr=err[-2000:])
        finally:
            if self.proc.returncode is None:  # the client went away mid-answer
                self.proc.kill()
                await self.proc.wait()
            self.feeder.cancel()


async def _feed(proc: asyncio.subprocess.Process, request: Request) -> None:
    """Copy the request body into the backend's stdin, then close it."""
    assert proc.stdin is not None
    try:
        async for chunk in request.stream():
            if chunk:
                proc.stdin.write(chunk)
                await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError, ClientDisconnect):
        pass  # the backend stopped reading (its answer says why), or the client went away
    finally:
        proc.stdin.close()
