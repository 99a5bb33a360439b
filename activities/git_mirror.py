"""A worker's bare mirrors of the repositories it works on, and how commits get into them.

`<root>/mirrors/<sha256(clone_url)[:16]>.git` is a bare repository caching one repository's
objects, with no remote configured: fetches name the URL on the command line, so nothing (no token
either) is written to its config. A token reaches git as an `http.<origin>/.extraHeader` set
through `GIT_CONFIG_COUNT/KEY/VALUE` (auth_env): never in argv (visible in `ps`), never in the
mirror's config, never in a URL that an error message could echo, and sent only to the remote's
origin. Each commit worked on is pinned as `refs/shopfloor/base/<sha>` (branch moves and gc cannot
drop it); the remote is contacted only for a missing commit or to resolve a name. Fetches hold the
mirror's lock (`mirrors/<h>.git.lock`), across coroutines and processes. Workspace checkouts
(workspace.py) read their objects from here; the git remote activities (git_remote.py) build and
push commits here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from shopfloor.activities.git_cmd import (
    FETCH_TIMEOUT_S,
    GitError,
    GitRunner,
    WorkspaceError,
    check_clone_url,
    redact,
)
from shopfloor.activities.git_plumbing import Git
from shopfloor.activities.path_locks import PathLocks

# Every branch and tag of the remote, kept apart from the pins.
ALL_BRANCHES_AND_TAGS = ("+refs/heads/*:refs/shopfloor/remote/heads/*", "+refs/tags/*:refs/shopfloor/remote/tags/*")


def auth_env(clone_url: str, token: str | None) -> dict[str, str]:
    """Environment giving git `token` for `clone_url`'s origin (HTTP Basic, as GitHub takes it)."""
    parts = urlsplit(clone_url)
    if not token or parts.scheme not in ("http", "https") or not parts.hostname:
        return {}
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    origin = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}/"
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{origin}.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


def dir_key(text: str) -> str:
    """A short, fixed-length directory name for `text` (a clone URL, a run id)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Mirror(Git):
    """git in the bare mirror of `clone_url`: fetching into it, and everything Git builds there."""

    def __init__(self, git_dir: Path, runner: GitRunner, clone_url: str, locks: PathLocks) -> None:
        super().__init__(git_dir, runner)
        self.clone_url = clone_url
        self._locks = locks

    def lock(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The lock every fetch into this mirror holds."""
        return self._locks.hold(f"{self.git_dir}.lock")

    async def pin(self, sha: str) -> None:
        """Keep `sha` whatever the remote's branches do and whatever gc would drop."""
        await self.run("update-ref", f"refs/shopfloor/base/{sha}", sha)

    async def fetch_ref(self, ref: str) -> str:
        """The commit the name `ref` (`HEAD`, a branch, `refs/heads/<b>`) is at on the remote now,
        fetched and pinned. A name moves, so the remote is always asked."""
        async with self.lock():
            await self.run("fetch", "--no-tags", "--quiet", "--", self.clone_url, ref, timeout=FETCH_TIMEOUT_S)
            sha = await self.out("rev-parse", "--verify", "FETCH_HEAD^{commit}")
            await self.pin(sha)
        return sha

    async def ensure_commit(self, sha: str, *, fallback: Sequence[str] = ALL_BRANCHES_AND_TAGS) -> None:
        """The commit `sha` in this mirror, pinned; fetched only when it is missing.

        Fetched by its id first. A server serves a commit no ref advertises only if it allows it
        (git's uploadpack.allowReachableSHA1InWant / allowAnySHA1InWant; GitHub and protocol v2
        servers do, a plain git server by default does not), so when that fetch fails the refspecs
        `fallback` are fetched instead: by default every branch and tag (a workspace's base is the
        tip, or an ancestor, of one of them), for a pull request's head its `refs/pull/<n>/head`
        (a fork's commit is on none of the base repository's branches). `fallback=()`: the fetch's
        GitError stands. WorkspaceError when the remote answered but does not hold the commit.
        """
        if await self.has_commit(sha):
            return
        async with self.lock():
            if await self.has_commit(sha):
                return
            try:
                await self.run("fetch", "--no-tags", "--quiet", "--", self.clone_url, sha, timeout=FETCH_TIMEOUT_S)
            except GitError:
                if not fallback:
                    raise
                await self.run(
                    "fetch", "--no-tags", "--quiet", "--", self.clone_url, *fallback, timeout=FETCH_TIMEOUT_S
                )
            if not await self.has_commit(sha):
                raise WorkspaceError(f"commit {sha} is not in the repository at {redact(self.clone_url)}")
            await self.pin(sha)


class Mirrors:
    """This worker's mirrors, under `root/mirrors`: one per clone URL, made empty when missing."""

    def __init__(self, root: Path, runner: GitRunner, locks: PathLocks) -> None:
        self.root = root
        self.runner = runner
        self._locks = locks

    def path(self, clone_url: str) -> Path:
        return self.root / "mirrors" / f"{dir_key(clone_url)}.git"

    async def open(self, clone_url: str, *, token: str | None = None) -> Mirror:
        """The mirror of `clone_url`, its git carrying `token` for the remote (auth_env) if given."""
        check_clone_url(clone_url)
        path = self.path(clone_url)
        if not (path / "HEAD").is_file():
            async with self._locks.hold(f"{path}.lock"):
                if not (path / "HEAD").is_file():
                    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
                    tmp.parent.mkdir(parents=True, exist_ok=True)
                    await self.runner.run(["init", "--bare", "--quiet", str(tmp)], cwd=self.root)
                    await asyncio.to_thread(shutil.rmtree, path, True)  # a broken leftover
                    await asyncio.to_thread(os.replace, tmp, path)
        env = auth_env(clone_url, token)
        runner = self.runner.with_env(env) if env else self.runner
        return Mirror(path, runner, clone_url, self._locks)
