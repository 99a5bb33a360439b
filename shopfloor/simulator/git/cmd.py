"""Running the `git` CLI for the simulator: an isolated environment, errors that carry git's stderr,
and the value types the repository API hands out.

Every git the simulator runs sees no user or system configuration and none of the server's
environment (tokens included): only PATH, an empty HOME, and what the caller adds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

ZERO_SHA = "0" * 40
# The hash of the empty tree: the "before" of a diff against a commit with no parents.
EMPTY_TREE_SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# Settings every simulator git runs with, whatever the repository's own config says.
GIT_OPTIONS: tuple[str, ...] = (
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.quotepath=false",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "gc.auto=0",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "core.hooksPath=/dev/null",
)

_STDERR_TAIL = 2000
_home_lock = threading.Lock()
_home: str | None = None


class GitError(Exception):
    """A git operation failed; the message says which and ends with git's stderr."""


class MergeConflict(GitError):
    """A merge, squash or rebase stopped on conflicting changes; nothing was moved."""


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree_sha: str
    message: str
    author_name: str
    author_email: str
    author_date: str  # ISO-8601 UTC, "2026-11-30T04:00:00Z"
    committer_name: str
    committer_email: str
    committer_date: str
    parents: tuple[str, ...]


@dataclass(frozen=True)
class FileChange:
    filename: str
    status: Literal["added", "removed", "modified", "renamed"]
    additions: int
    deletions: int
    changes: int
    patch: str | None
    previous_filename: str | None
    blob_sha: str | None


@dataclass(frozen=True)
class RefUpdate:
    ref: str  # "refs/heads/x" or "refs/tags/x"
    before: str  # ZERO_SHA when the ref was created
    after: str  # ZERO_SHA when the ref was deleted


def empty_home() -> str:
    """One empty directory per process to serve as HOME, so no ~/.gitconfig is ever read; removed
    when the process exits."""
    global _home
    with _home_lock:
        if _home is None or not os.path.isdir(_home):
            _home = tempfile.mkdtemp(prefix="shopfloor-sim-home-")
            atexit.register(shutil.rmtree, _home, ignore_errors=True)
        return _home


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for git: nothing inherited but PATH."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": empty_home(),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    if extra:
        env.update(extra)
    return env


def identity_env(author: tuple[str, str], committer: tuple[str, str] | None = None) -> dict[str, str]:
    name, email = author
    c_name, c_email = committer or author
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": c_name,
        "GIT_COMMITTER_EMAIL": c_email,
    }


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = 300.0,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git args`; with check, a non-zero exit raises GitError with the stderr tail."""
    cmd = ["git", *GIT_OPTIONS]
    if git_dir is not None:
        cmd.append(f"--git-dir={git_dir}")
    cmd.extend(args)
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=git_env(env), input=input, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {' '.join(args)} timed out after {timeout:.0f}s") from exc
    if check and done.returncode != 0:
        raise GitError(failure_message(args, done))
    return done


def failure_message(args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> str:
    tail = (done.stderr or b"").decode(errors="replace").strip()[-_STDERR_TAIL:]
    if not tail:
        tail = (done.stdout or b"").decode(errors="replace").strip()[-_STDERR_TAIL:]
    return f"git {' '.join(args)} failed (exit {done.returncode}): {tail}"


def iso_utc(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_commit(sha: str, raw: bytes) -> CommitInfo:
    """A raw commit object (`git cat-file commit`) as CommitInfo."""
    head, _, body = raw.partition(b"\n\n")
    fields: dict[str, str] = {}
    parents: list[str] = []
    for line in head.decode(errors="replace").split("\n"):
        if line.startswith(" "):  # continuation of a multi-line header (gpgsig)
            continue
        key, _, value = line.partition(" ")
        if key == "parent":
            parents.append(value)
        elif key not in fields:
            fields[key] = value
    a_name, a_email, a_date = _person(fields.get("author", ""))
    c_name, c_email, c_date = _person(fields.get("committer", ""))
    return CommitInfo(
        sha=sha,
        tree_sha=fields.get("tree", ""),
        message=body.decode(errors="replace").rstrip("\n"),
        author_name=a_name,
        author_email=a_email,
        author_date=a_date,
        committer_name=c_name,
        committer_email=c_email,
        committer_date=c_date,
        parents=tuple(parents),
    )


def _person(value: str) -> tuple[str, str, str]:
    """`Name <email> 1700000000 +0100` → (name, email, ISO UTC date)."""
    name, _, rest = value.partition(" <")
    email, _, when = rest.partition("> ")
    stamp = when.split(" ")[0] if when else "0"
    return name, email, iso_utc(int(stamp) if stamp.lstrip("-").isdigit() else 0)
