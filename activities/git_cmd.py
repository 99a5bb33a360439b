"""git as every worker runs it: one runner with the safe options and environment, the timeouts, the
failures as clear messages, and the rules for what a commit id, a ref name and a clone URL may be.

Every git a worker starts goes through GitRunner, in a checkout an agent's commands could write or
in a bare mirror of a repository a stranger controls, so nothing a repository or the host says may
choose a program for it to run:

- SAFE_GIT_CONFIG: no hooks, no fsmonitor, no credential helpers, no automatic gc or maintenance
  in the background, no line-ending rewrites, no signing, a fixed identity for the few commands
  that want one;
- the environment (clean_env): an empty HOME, no system or global config, no system
  gitattributes, no terminal prompts, ssh in batch mode, the C locale;
- a timeout: git runs in its own process group, and a timeout or a cancellation kills it with its
  helpers (remote-https, ssh);
- failures: a GitError whose message shows the command and git's stderr, credentials redacted.

Every diff a reader sees (the checkpoint the reviewer is shown, the git_diff tool, a pull request's
change) is built by `diff_argv`: text forced and no diff drivers, whatever the change's own
`.gitattributes` say (`*.py -diff` would otherwise make a binary patch no reviewer can read).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from pathlib import Path

from shopfloor.blobs import CHUNK_BYTES
from shopfloor.errors import ShopfloorError

FETCH_TIMEOUT_S = 900.0  # a fetch or push: the network and the remote's size
GIT_TIMEOUT_S = 300.0  # anything local
STDERR_KEEP_BYTES = 64 * 1024

SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a full commit id, sha1 or sha256
_USERINFO_RE = re.compile(r"(?<=://)[^/@\s]+@")

# git options every git run of a worker takes: no hooks, helpers, background work or line-ending
# rewrites that a repository's own config could ask for; no signing (a key would be the host's);
# an identity, so a command that wants one never reads it from anywhere else.
SAFE_GIT_CONFIG = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "credential.helper=",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "user.name=shopfloor",
    "-c",
    "user.email=shopfloor@localhost",
]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# No attributes but the ones a checkout's own files hold, and those only where git >= 2.42 cannot
# be told otherwise: attr.tree names the tree attributes are read from instead of the work tree
# (and of HEAD, which newer git reads in bare repositories); git 2.39 ignores the key. The flags
# do the rest: --text shows `-diff`/`binary` files as text, --no-textconv and --no-ext-diff run
# no driver a `diff=<driver>` names. GIT_ATTR_NOSYSTEM (in every run's environment) drops
# /etc/gitattributes.
DIFF_CONFIG = ["-c", "core.attributesFile=/dev/null", "-c", f"attr.tree={EMPTY_TREE}"]
DIFF_FLAGS = ["--text", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"]
DIFF_ENV = {"GIT_ATTR_NOSYSTEM": "1"}


def diff_argv(*args: str) -> list[str]:
    """`git diff ARGS` as every diff a reader sees is built: text, no drivers, no attribute files."""
    return [*DIFF_CONFIG, "diff", *DIFF_FLAGS, *args]


class WorkspaceError(ShopfloorError):
    """The git state a workspace ref describes cannot be built or read: a missing commit, a name
    or URL git cannot safely be given, a failed git command (GitError)."""


class GitError(WorkspaceError):
    """A git command failed or timed out; the message carries its stderr."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


def redact(text: str) -> str:
    """`https://user:token@host/...` -> `https://***@host/...`, for messages and logs."""
    return _USERINFO_RE.sub("***@", text)


# --- what git may be given -------------------------------------------------------------------------


def is_full_sha(text: str | None) -> bool:
    """A full commit id (40 or 64 lowercase hex digits): never a name that could move."""
    return text is not None and SHA_RE.fullmatch(text) is not None


def is_ref_name(name: str) -> bool:
    """Whether `name` is a branch, tag or commit name a worker may hand to git.

    git's own rules (`git check-ref-format refs/heads/<name>`): no component starting with `.` or
    ending in `.lock`, no `..`, `@{`, `\\`, `//`, no leading or trailing `/`, no trailing `.`, no
    space, control character or any of `~^:?*[`, and not `@` alone. Stricter than git in two ways:
    no leading `-` (git would read it as an option) and only printable characters (no Unicode
    whitespace or invisible marks a reader would not see). `HEAD`, `main`, `v1.2`, `shopfloor/x`,
    `refs/pull/7/head` and full commit ids all pass.
    """
    if not name or name.startswith(("-", "/")) or name.endswith(("/", ".")) or name == "@":
        return False
    if any(not c.isprintable() or c.isspace() or c in "~^:?*[\\\x7f" for c in name):
        return False
    if ".." in name or "@{" in name or "//" in name:
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def is_clone_url(url: str) -> bool:
    """Whether `url` may be given to git as a remote: not empty, not an option, and printable
    (spaces are allowed: a local path may hold them)."""
    return bool(url) and not url.startswith("-") and all(c.isprintable() for c in url)


def check_ref_name(what: str, name: str) -> None:
    """WorkspaceError unless `name` passes is_ref_name."""
    if not is_ref_name(name):
        raise WorkspaceError(
            f"{what} {redact(repr(name))} is not usable (not a branch, tag or commit name git accepts: "
            "empty, a leading '-', whitespace, or characters git forbids)"
        )


def check_clone_url(url: str) -> None:
    """WorkspaceError unless `url` passes is_clone_url."""
    if not is_clone_url(url):
        raise WorkspaceError(
            f"clone_url {redact(repr(url))} is not usable (empty, a leading '-', or a control character)"
        )


# --- running it ---------------------------------------------------------------------------------------


def clean_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git a worker runs: nothing from the host's user or system config,
    credentials or templates (HOME is an empty directory of the worker's own), no prompts."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
        "LC_ALL": "C",
        **DIFF_ENV,
        **(extra or {}),
    }


class GitRunner:
    """Runs git with SAFE_GIT_CONFIG in clean_env(home, extra_env): the only way a worker starts git."""

    def __init__(self, home: Path, extra_env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.env = clean_env(home, extra_env)

    def with_env(self, extra_env: Mapping[str, str]) -> GitRunner:
        """The same runner with more environment (a remote's credentials: never in argv)."""
        runner = GitRunner(self.home)
        runner.env = {**self.env, **extra_env}
        return runner

    async def run(
        self,
        args: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float = GIT_TIMEOUT_S,
        ok: tuple[int, ...] = (0,),
    ) -> tuple[int, bytes, bytes]:
        """`git ARGS`: (exit code, stdout, stderr); GitError for a code outside `ok` or a timeout."""
        return await run_git(
            [*SAFE_GIT_CONFIG, *args],
            cwd=cwd,
            env={**self.env, **(env or {})},
            stdin=stdin,
            timeout=timeout,
            ok=ok,
            shown=_shown(args),
        )

    async def to_file(
        self,
        args: list[str],
        *,
        cwd: Path,
        dest: Path,
        env: Mapping[str, str] | None = None,
        limit: int | None = None,
        timeout: float = GIT_TIMEOUT_S,
    ) -> tuple[int, bool]:
        """`git ARGS` streamed into the new file `dest`: (bytes written, complete), as run_git_to_file."""
        return await run_git_to_file(
            [*SAFE_GIT_CONFIG, *args],
            cwd=cwd,
            env={**self.env, **(env or {})},
            dest=dest,
            limit=limit,
            timeout=timeout,
            shown=_shown(args),
        )


def _shown(args: list[str]) -> list[str]:
    """The command as a message shows it: without the worker's own paths."""
    return [a for a in args if not a.startswith(("--git-dir=", "--work-tree="))]


async def run_git(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    shown: list[str],
    stdin: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
    ok: tuple[int, ...] = (0,),
) -> tuple[int, bytes, bytes]:
    """`git ARGV` in its own process group: (exit code, stdout, stderr). A timeout or cancellation
    kills git with its helpers (remote-https, ssh); an exit code outside `ok` is a GitError whose
    message shows `git SHOWN` and the stderr, both with credentials redacted."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *argv,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    command = redact(" ".join(["git", *shown]))
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except (TimeoutError, asyncio.CancelledError) as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(e, asyncio.CancelledError):
            raise
        raise GitError(f"`{command}` timed out after {timeout:.0f} s") from None
    code = proc.returncode or 0
    if code not in ok:
        stderr = redact(err.decode("utf-8", "replace").strip())
        raise GitError(f"`{command}` failed (exit {code}): {stderr}", stderr=stderr, returncode=code)
    return code, out, err


async def _discard(stream: asyncio.StreamReader) -> None:
    """Read a killed git's pipe to its end. asyncio's Process.wait() returns only once every pipe
    has closed, and a pipe left unread with a full buffer stays paused and never sees its end."""
    while await stream.read(CHUNK_BYTES):
        pass


async def run_git_to_file(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    shown: list[str],
    dest: Path,
    limit: int | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> tuple[int, bool]:
    """`git ARGV` with its output streamed into the new file `dest` chunk by chunk, so none of it
    collects in this process: (bytes written, complete). Past `limit` bytes git is stopped and
    `dest` holds the first `limit` (complete is False). Failures as run_git."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *argv,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    stdout, stderr_stream = proc.stdout, proc.stderr
    assert stdout is not None and stderr_stream is not None  # both piped above
    command = redact(" ".join(["git", *shown]))
    stderr = asyncio.create_task(_tail(stderr_stream))

    async def pump() -> tuple[int, bool]:
        written = 0
        with open(dest, "xb") as f:
            while chunk := await stdout.read(CHUNK_BYTES):
                if limit is not None and written + len(chunk) > limit:
                    f.write(chunk[: limit - written])
                    return limit, False
                f.write(chunk)
                written += len(chunk)
        return written, True

    try:
        written, complete = await asyncio.wait_for(pump(), timeout)
        if not complete:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.wait_for(_discard(stdout), timeout)
        await asyncio.wait_for(proc.wait(), timeout)
        err = await stderr
    except (TimeoutError, asyncio.CancelledError) as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stderr.cancel()
        await asyncio.wait([stderr])  # its read ended before the pipe is read here
        with contextlib.suppress(TimeoutError):  # killed above: its pipes end at once
            await asyncio.wait_for(asyncio.gather(_discard(stdout), _discard(stderr_stream)), timeout)
        await proc.wait()
        if isinstance(e, asyncio.CancelledError):
            raise
        raise GitError(f"`{command}` timed out after {timeout:.0f} s") from None
    code = proc.returncode or 0
    if complete and code != 0:
        text = redact(err.decode("utf-8", "replace").strip())
        raise GitError(f"`{command}` failed (exit {code}): {text}", stderr=text, returncode=code)
    return written, complete


async def _tail(stream: asyncio.StreamReader) -> bytes:
    """Everything `stream` says, keeping only its last STDERR_KEEP_BYTES."""
    kept = b""
    while chunk := await stream.read(CHUNK_BYTES):
        kept = (kept + chunk)[-STDERR_KEEP_BYTES:]
    return kept
