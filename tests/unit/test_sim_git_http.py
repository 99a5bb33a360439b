"""Git smart HTTP for the simulator: the real `git` client against `git_router` served by uvicorn."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request, Response

from shopfloor.devserver import free_port
from shopfloor.simulator.git.http import git_router
from shopfloor.simulator.git.repos import ZERO_SHA, BareRepo, RefUpdate

TOKENS = {"alice-token": "alice", "bob-token": "bob"}  # bob may read but not push


class BackgroundServer:
    """uvicorn serving `app` on a free port from a daemon thread."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Sim:
    server: BackgroundServer
    repo: BareRepo
    home: Path
    pushes: list[tuple[str, str, str, list[RefUpdate]]] = field(default_factory=list)
    encodings: list[str] = field(default_factory=list)  # Content-Encoding of each request with one

    def url(self, token: str | None = None, path: str = "acme/app.git") -> str:
        creds = f"x-access-token:{token}@" if token else ""
        return f"http://{creds}127.0.0.1:{self.server.port}/{path}"

    def git(
        self, cwd: Path, *args: str, ok: bool = True, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The git client with no user, system or credential-helper config (plus `extra_env`)."""
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            **(extra_env or {}),
        }
        opts = [
            "-c",
            "user.name=Dev",
            "-c",
            "user.email=dev@example.com",
            "-c",
            "credential.helper=",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.version=2",
        ]
        done = subprocess.run(
            ["git", *opts, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        if ok and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
        return done


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Python's temporary directory for this test only, so what the router leaves there shows."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


@pytest.fixture
def sim(tmp_path: Path, temp_dir: Path) -> Iterator[Sim]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.py").write_text("print('hello')\n")
    repo = BareRepo.create(tmp_path / "repos" / "acme" / "app.git", source_dir=src)
    home = tmp_path / "home"
    home.mkdir()
    pushes: list[tuple[str, str, str, list[RefUpdate]]] = []

    def resolve(owner: str, name: str) -> BareRepo | None:
        return repo if (owner, name) == ("acme", "app") else None

    def authenticate(header: str | None) -> str | None:
        if header and header.startswith("token "):
            return TOKENS.get(header.removeprefix("token "))
        return None

    def can_push(login: str, owner: str, name: str) -> bool:
        return login == "alice" and (owner, name) == ("acme", "app")

    def on_push(owner: str, name: str, login: str, updates: list[RefUpdate]) -> None:
        pushes.append((owner, name, login, updates))

    encodings: list[str] = []
    app = FastAPI()
    app.include_router(git_router(resolve=resolve, authenticate=authenticate, can_push=can_push, on_push=on_push))

    @app.middleware("http")
    async def note_encoding(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if "content-encoding" in request.headers:
            encodings.append(request.headers["content-encoding"])
        return await call_next(request)

    with BackgroundServer(app) as server:
        yield Sim(server=server, repo=repo, home=home, pushes=pushes, encodings=encodings)


def test_clone_push_fetch_force_push_and_delete(sim: Sim, tmp_path: Path) -> None:
    work = tmp_path / "work"
    sim.git(tmp_path, "clone", sim.url(), str(work))  # anonymous
    assert (work / "hello.py").read_text() == "print('hello')\n"
    main = sim.repo.ref_sha("main")
    assert sim.git(work, "rev-parse", "HEAD").stdout.strip() == main

    sim.git(work, "checkout", "-b", "feature")
    (work / "feature.py").write_text("X = 1\n")
    sim.git(work, "add", ".")
    sim.git(work, "commit", "-m", "add feature")
    first = sim.git(work, "rev-parse", "HEAD").stdout.strip()

    anonymous = sim.git(work, "push", "origin", "feature", ok=False)
    assert anonymous.returncode != 0
    assert "could not read Username" in anonymous.stderr or "Authentication" in anonymous.stderr
    assert sim.repo.ref_sha("feature") is None and sim.pushes == []

    sim.git(work, "push", sim.url("alice-token"), "feature")
    assert sim.repo.ref_sha("feature") == first
    assert sim.pushes == [("acme", "app", "alice", [RefUpdate("refs/heads/feature", ZERO_SHA, first)])]

    other = tmp_path / "other"
    sim.git(tmp_path, "clone", sim.url(), str(other))
    sim.git(other, "fetch", "origin", "feature")
    assert sim.git(other, "rev-parse", "FETCH_HEAD").stdout.strip() == first

    (work / "feature.py").write_text("X = 2\n")
    sim.git(work, "commit", "-a", "--amend", "-m", "add feature, v2")
    second = sim.git(work, "rev-parse", "HEAD").stdout.strip()
    sim.git(work, "push", "--force", sim.url("alice-token"), "feature")
    assert sim.repo.ref_sha("feature") == second
    assert sim.pushes[-1][3] == [RefUpdate("refs/heads/feature", first, second)]

    sim.git(work, "push", sim.url("alice-token"), "HEAD:main", "--tags")  # a fast-forward of main
    assert sim.pushes[-1][3] == [RefUpdate("refs/heads/main", main, second)]

    sim.git(work, "push", sim.url("alice-token"), ":feature")
    assert sim.repo.ref_sha("feature") is None
    assert sim.pushes[-1][3] == [RefUpdate("refs/heads/feature", second, ZERO_SHA)]

    sim.git(other, "pull", "--ff-only", "origin", "main")  # fetch after pushes, with haves to negotiate
    assert (other / "feature.py").read_text() == "X = 2\n"
    assert len(sim.pushes) == 4


def test_serving_leaves_nothing_in_the_temporary_directory(sim: Sim, tmp_path: Path, temp_dir: Path) -> None:
    """A simulator is started for every test and demo: a directory per start, never removed,
    filled /tmp with thousands."""
    work = tmp_path / "work"
    sim.git(tmp_path, "clone", sim.url(), str(work))
    (work / "more.py").write_text("Y = 2\n")
    sim.git(work, "add", ".")
    sim.git(work, "commit", "-m", "more")
    sim.git(work, "push", sim.url("alice-token"), "main")
    assert sim.repo.ref_sha("main") == sim.git(work, "rev-parse", "HEAD").stdout.strip()
    assert list(temp_dir.iterdir()) == []


def test_forbidden_pusher_gets_403_and_nothing_moves(sim: Sim, tmp_path: Path) -> None:
    work = tmp_path / "work"
    sim.git(tmp_path, "clone", sim.url("bob-token"), str(work))  # reading with a token is fine
    (work / "x.txt").write_text("x\n")
    sim.git(work, "add", ".")
    sim.git(work, "commit", "-m", "x")
    denied = sim.git(work, "push", sim.url("bob-token"), "HEAD:main", ok=False)
    assert denied.returncode != 0 and "403" in denied.stderr
    bad_token = sim.git(work, "push", sim.url("nope"), "HEAD:main", ok=False)
    assert bad_token.returncode != 0
    assert sim.repo.branches() == {"main": sim.repo.ref_sha("main")} and sim.pushes == []
    assert sim.git(work, "rev-parse", "origin/main").stdout.strip() == sim.repo.ref_sha("main")


def test_unknown_repo_is_404(sim: Sim, tmp_path: Path) -> None:
    missing = sim.git(tmp_path, "clone", sim.url(path="acme/nope.git"), str(tmp_path / "c"), ok=False)
    assert missing.returncode != 0 and "not found" in missing.stderr.lower()
    response = httpx.get(f"{sim.server.base}/acme/nope.git/info/refs", params={"service": "git-upload-pack"})
    assert response.status_code == 404


def test_receive_pack_challenges_for_basic_credentials(sim: Sim) -> None:
    url = f"{sim.server.base}/acme/app.git/info/refs"
    params = {"service": "git-receive-pack"}
    bare = httpx.get(url, params=params)
    assert bare.status_code == 401 and bare.headers["www-authenticate"] == 'Basic realm="GitHub"'
    assert httpx.get(url, params=params, auth=("x-access-token", "wrong")).status_code == 401
    forbidden = httpx.get(url, params=params, auth=("x-access-token", "bob-token"))
    assert forbidden.status_code == 403 and forbidden.text == "Permission to acme/app.git denied to bob.\n"
    allowed = httpx.get(url, params=params, auth=("anything", "alice-token"))
    assert allowed.status_code == 200
    assert allowed.headers["content-type"] == "application/x-git-receive-pack-advertisement"
    assert sim.repo.ref_sha("main") in allowed.text  # the advertisement lists main
    token_header = httpx.get(url, params=params, headers={"Authorization": "token alice-token"})
    assert token_header.status_code == 200  # non-Basic schemes reach `authenticate` unchanged
    no_repo_suffix = httpx.get(f"{sim.server.base}/acme/app/info/refs", params={"service": "git-upload-pack"})
    assert no_repo_suffix.status_code == 200
    dumb = httpx.get(url)
    assert dumb.status_code == 403
    post = httpx.post(f"{sim.server.base}/acme/app.git/git-receive-pack", content=b"0000")
    assert post.status_code == 401 and sim.pushes == []


def test_gzipped_negotiation_from_a_clone_with_many_local_commits(sim: Sim, tmp_path: Path) -> None:
    """git gzips request bodies over 1 KiB: a fetch with many `have` lines sends one."""
    work, other = tmp_path / "work", tmp_path / "other"
    sim.git(tmp_path, "clone", sim.url(), str(work))
    sim.git(tmp_path, "clone", sim.url(), str(other))
    for i in range(60):
        (other / "local.txt").write_text(f"{i}\n")
        sim.git(other, "add", ".")
        # Dated after the clone: git sends `have`s newest first, and a common commit with the
        # same second could be acknowledged in the first (small, unzipped) round.
        later = {"GIT_COMMITTER_DATE": f"2099-01-01T00:{i // 60:02}:{i % 60:02}Z"}
        sim.git(other, "commit", "-q", "-m", f"local {i}", extra_env=later)
    (work / "upstream.txt").write_text("new\n")
    sim.git(work, "add", ".")
    sim.git(work, "commit", "-m", "upstream")
    sim.git(work, "push", sim.url("alice-token"), "HEAD:main")
    sim.git(other, "fetch", "origin")
    assert "gzip" in sim.encodings
    assert sim.git(other, "show", "origin/main:upstream.txt").stdout == "new\n"
