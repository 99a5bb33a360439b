"""Real git repositories for tests of the `code` agent on portable workspaces: making a repo,
the AgentInput that points at it, rebuilding a run's result in a fresh clone, reading a run's
transcript back from the blob store, and polling without fixed sleeps."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from shopfloor.blobs import BlobStore, get_json
from shopfloor.models.agent_run import AgentInput, Limits, Timeouts, WorkspaceRef
from shopfloor.models.transcript import Manifest, Message

# git as the test runs it: no user or system config, so the machine's settings cannot interfere.
_GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}
_GIT_OPTS = [
    "-c",
    "user.name=test",
    "-c",
    "user.email=test@localhost",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.autocrlf=false",
]


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *_GIT_OPTS, *args], cwd=cwd, env=_GIT_ENV, input=stdin, capture_output=True, timeout=60
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode(errors="replace")


def make_repo(root: Path, files: dict[str, str]) -> str:
    """A git repository at `root` holding `files` in one commit; returns that commit's sha."""
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "--quiet")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "initial")
    return git(root, "rev-parse", "HEAD").strip()


def code_input(
    repo: Path,
    base_sha: str,
    goal: str,
    *,
    model: str = "openai:fake-model",
    heartbeat_s: float = 30.0,
    max_steps: int = 60,
) -> AgentInput:
    """A `code` agent run on a portable workspace: any worker clones `repo` and checks out base_sha."""
    return AgentInput(
        agent="code",
        model=model,
        goal=goal,
        workspace=WorkspaceRef(repo=f"local/{repo.name}", clone_url=str(repo), base_sha=base_sha),
        limits=Limits(max_steps=max_steps),
        timeouts=Timeouts(model_heartbeat_s=heartbeat_s),
    )


def checkout_with_patch(clone_url: str, base_sha: str, patch: bytes | None, dest: Path) -> Path:
    """A fresh clone of `clone_url` at `base_sha` with `patch` applied (checked first, so a patch
    that does not apply cleanly fails here, saying why)."""
    git(dest.parent, "clone", "--quiet", "--no-checkout", "--", clone_url, str(dest))
    git(dest, "checkout", "--quiet", "--detach", base_sha)
    if patch:
        git(dest, "apply", "--check", "--binary", "-", stdin=patch)
        git(dest, "apply", "--binary", "-", stdin=patch)
    return dest


def run_pytest(cwd: Path) -> subprocess.CompletedProcess[str]:
    """The repository's tests, with this interpreter (which has pytest), leaving no cache behind."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def manifest_digests(blobs: BlobStore, transcript: str) -> list[str]:
    """Every message digest of a stored transcript, read through the manifests it extends."""
    manifest = Manifest.model_validate(await get_json(blobs, transcript))
    if manifest.base is None:
        return manifest.messages
    return [*await manifest_digests(blobs, manifest.base), *manifest.messages]


async def load_messages(blobs: BlobStore, transcript: str) -> list[Message]:
    return [Message.model_validate(await get_json(blobs, d)) for d in await manifest_digests(blobs, transcript)]


def tool_results(messages: Iterable[Message]) -> dict[str, Message]:
    """The tool-result messages of a transcript, by the id of the call they answer."""
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}


def tree_state(root: Path, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, tuple[object, ...]]:
    """Every entry under `root` (symlinks not followed): kind, mode and, for files, size and a
    content hash; for symlinks, the target. Equal states mean nothing was added, removed or
    changed. `skip(path)` leaves a path (and what is below it) out."""
    state: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not skip(here / d)]
        for name in [*dirnames, *filenames]:
            p = here / name
            if skip(p):
                continue
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                state[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                state[rel] = ("dir", st.st_mode)
            else:
                state[rel] = ("file", st.st_mode, st.st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return state


async def wait_for(predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(interval_s)
