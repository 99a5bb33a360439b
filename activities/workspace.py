"""Workspace checkpoints: git checkouts any worker rebuilds from a WorkspaceRef.

Under this worker's own `root` (workers share no disk, only the blob store):

- `mirrors/<sha256(clone_url)[:16]>.git`: a bare repository caching the target's objects, with
  no remote configured: fetches name the URL on the command line, so nothing (no token either)
  is written to its config. A token must come at call time as `-c http.extraHeader=...` (a later
  issue), never inside `clone_url`. Each base commit is pinned as `refs/shopfloor/base/<sha>`
  (branch moves and gc cannot drop it); the remote is contacted only for a missing commit or to
  resolve a branch name. Updates hold an fcntl.flock on `mirrors/<h>.lock`.
- `runs/<sha256(run_id)[:16]>/`: the run's checkout, `git clone --shared` from the mirror: objects
  are read through `.git/objects/info/alternates`, nothing is copied or hard-linked, and `.git`
  stays inside the checkout (a sandbox binding the workspace writable and the mirror read-only
  can run git there). Runs never share a directory.
- `<checkout>/.git/shopfloor-ref.json`: the state on disk {base_sha, patch_digest, dirty},
  replaced atomically and only once the disk matches it; open() marks it dirty before handing
  the checkout to a caller that may mutate it, so a worker that died between an edit and its
  checkpoint leaves a state the next open() distrusts: it resets from the ref.

A patch is `git diff --cached --binary <base>` over a private index (`.git/shopfloor-index`)
that `git add --all` fills from the work tree: changed, new, deleted and binary files and mode
changes, never `.git` nor files .gitignore excludes. It is replayed in index space too (applied to
a temporary index, written as a tree, checked out with `git read-tree -u`), so clean/smudge
attributes such as `eol=crlf` round-trip byte for byte.

Patches never pass through the worker's memory: git writes them to a file that is streamed to
the blob store (and back, to replay one). A change larger than `max_checkpoint_bytes` is not
checkpointed: the checkout goes back to the ref it was opened at (so every worker agrees on it)
and CheckpointTooLarge names the largest files, for the model to read.

Every diff a reader sees — the checkpoint, which the reviewer is shown, the git_diff tool, and
git_remote's — is built by `diff_argv`: text forced and no diff drivers, whatever the change's
own `.gitattributes` say (`*.py -diff` would otherwise make a binary patch no reviewer can read).

The agent's commands can write `.git`, so git runs with an explicit --git-dir/--work-tree (a
planted core.worktree cannot redirect a reset), hooks and fsmonitor off, and a `.git` that is no
longer a real directory gets the checkout re-cloned. Before git runs in a checkout, and before a
command's sandbox is set up from it, `.git/config` and `.git/objects/info/alternates` are
rewritten to what shopfloor made them and `.git/commondir` is removed: a planted filter driver
(run by `git add` outside the sandbox), include or commondir, or alternates naming a directory
the sandbox hides (it mounts the alternates back read-only), would otherwise escape the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from shopfloor.activities.tools.confine import resolve_in_workspace
from shopfloor.blobs import CHUNK_BYTES, BlobStore
from shopfloor.errors import ShopfloorError
from shopfloor.models.agent_run import WorkspaceRef

FETCH_TIMEOUT_S = 900.0
GIT_TIMEOUT_S = 300.0
LOCK_POLL_S = 0.05
STATE_FILE = "shopfloor-ref.json"
SHADOW_INDEX = "shopfloor-index"
_SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_USERINFO_RE = re.compile(r"(?<=://)[^/@\s]+@")
# git options every git run of a worker takes: no hooks, helpers, background work or line-ending
# rewrites that a repository's own config could ask for.
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
]
_SAFE = [
    *SAFE_GIT_CONFIG,
    "-c",
    "advice.detachedHead=false",
    "-c",
    "user.name=shopfloor",
    "-c",
    "user.email=shopfloor@localhost",
]
# The largest change a checkpoint stores (its patch): a setting (SHOPFLOOR_MAX_CHECKPOINT_BYTES).
DEFAULT_MAX_CHECKPOINT_BYTES = 20 * 1024 * 1024
DIFF_TOOL_MAX_BYTES = 1024 * 1024  # what the git_diff tool shows at most; a path narrows it
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# No attributes but the ones a checkout's own files hold, and those only where git >= 2.42 cannot
# be told otherwise: attr.tree names the tree attributes are read from instead of the work tree
# (and of HEAD, which newer git reads in bare repositories); git 2.39 ignores the key. The flags
# do the rest: --text shows `-diff`/`binary` files as text, --no-textconv and --no-ext-diff run
# no driver a `diff=<driver>` names.
DIFF_CONFIG = ["-c", "core.attributesFile=/dev/null", "-c", f"attr.tree={EMPTY_TREE}"]
DIFF_FLAGS = ["--text", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"]
DIFF_ENV = {"GIT_ATTR_NOSYSTEM": "1"}
STDERR_KEEP_BYTES = 64 * 1024


def diff_argv(*args: str) -> list[str]:
    """`git diff ARGS` as every diff a reader sees is built: text, no drivers, no attribute files."""
    return [*DIFF_CONFIG, "diff", *DIFF_FLAGS, *args]


# A checkout's whole .git/config (the mirror, made by `git init --bare` without user config, is
# sha1): nothing in it names a program, a file to include or a remote.
_CHECKOUT_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"


class WorkspaceError(ShopfloorError):
    """A workspace cannot be built or read in the state a ref describes."""


class GitError(WorkspaceError):
    """A git command failed or timed out; the message carries its stderr."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


class PatchError(WorkspaceError):
    """A ref's patch is missing from the blob store or does not apply to its base commit."""


class CheckpointTooLarge(WorkspaceError):
    """The checkout's change is larger than a checkpoint may hold; it was put back to its ref."""

    def __init__(self, message: str, *, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


def redact(text: str) -> str:
    """`https://user:token@host/...` -> `https://***@host/...`, for messages and logs."""
    return _USERINFO_RE.sub("***@", text)


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
    assert proc.stdout is not None and proc.stderr is not None  # both piped above
    command = redact(" ".join(["git", *shown]))
    stderr = asyncio.create_task(_tail(proc.stderr))

    async def pump() -> tuple[int, bool]:
        written = 0
        with open(dest, "xb") as f:
            while chunk := await proc.stdout.read(CHUNK_BYTES):  # type: ignore[union-attr]
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
        await asyncio.wait_for(proc.wait(), timeout)
        err = await stderr
    except (TimeoutError, asyncio.CancelledError) as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stderr.cancel()
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


class Workspaces:
    def __init__(
        self, root: Path, blobs: BlobStore, *, max_checkpoint_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self.blobs = blobs
        self.max_checkpoint_bytes = max_checkpoint_bytes
        self._locks: dict[str, asyncio.Lock] = {}
        home = self.root / "git-home"  # empty: no user config, credentials or templates leak in
        home.mkdir(parents=True, exist_ok=True)
        self._env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
            "LC_ALL": "C",
            **DIFF_ENV,
        }

    async def base_ref(self, repo: str, clone_url: str, ref: str = "HEAD") -> WorkspaceRef:
        """Resolve a branch, tag, `HEAD` or full sha at `clone_url` to the commit to work on."""
        _check_arg("clone_url", clone_url)
        _check_arg("ref", ref)
        if _SHA_RE.fullmatch(ref):
            await self._ensure_commit(clone_url, ref)
            sha = ref
        else:  # a name moves: always ask the remote
            mirror = await self._mirror(clone_url)
            async with self._lock(f"{mirror}.lock"):
                await self._mgit(mirror, "fetch", "--no-tags", "--quiet", "--", clone_url, ref, timeout=FETCH_TIMEOUT_S)
                sha = (await self._mgit(mirror, "rev-parse", "--verify", "FETCH_HEAD^{commit}")).decode().strip()
                await self._mgit(mirror, "update-ref", f"refs/shopfloor/base/{sha}", sha)
        return WorkspaceRef(repo=repo, clone_url=clone_url, base_sha=sha, patch_digest=None)

    async def open(self, ref: WorkspaceRef, run_id: str, *, read_only: bool = False) -> Path:
        """A checkout in exactly the state `ref` describes, reused when the disk already is.

        Unless `read_only`, the checkout is marked dirty before it is returned: the caller may
        change it, and until checkpoint() records the result no later open() trusts the disk.
        """
        clone_url, base = _portable(ref)
        path = self._run_dir(run_id)
        async with self._lock(f"{path}.lock"):
            trusted = _read_state(path) == {"base_sha": base, "patch_digest": ref.patch_digest, "dirty": False}
            if trusted:  # the disk is right, but a command may have planted things in .git since
                try:
                    await asyncio.to_thread(_pin_git_dir, path, self._mirror_path(clone_url))
                except GitError:
                    trusted = False
            if not trusted:
                await self._rebuild(path, base, clone_url, ref.patch_digest)
            if not read_only:
                await asyncio.to_thread(_write_state, path, base, ref.patch_digest, True)
        return path

    async def checkpoint(self, ref: WorkspaceRef, run_id: str) -> WorkspaceRef:
        """Store the checkout's cumulative patch against base_sha; the ref of the new state.

        A change over `max_checkpoint_bytes` raises CheckpointTooLarge, with the checkout put back
        to `ref`. Files new or changed since the last checkpoint whose sizes alone pass the cap are
        refused before git stores them; any other change once its patch, streamed to a file, does.
        """
        clone_url, base = _portable(ref)
        path = self._run_dir(run_id)
        cap = self.max_checkpoint_bytes
        async with self._lock(f"{path}.lock"):
            self._require_checkout(path, base, run_id)
            await asyncio.to_thread(_pin_git_dir, path, self._mirror_path(clone_url))
            await self._shadow_index(path, base)
            listed = ("ls-files", "-z", "--others", "--modified", "--exclude-standard", "--", ":/")
            total, largest = await self._sizes(path, *listed)  # changed since the last checkpoint
            if total <= cap:
                await self._wgit(path, "add", "--all", "--", ":/", env=self._shadow_env(path))
                with tempfile.TemporaryDirectory(dir=self.root, prefix="checkpoint-") as scratch:
                    patch = Path(scratch) / "patch"
                    size, complete = await self._staged_to_file(
                        path, base, patch, cap, "--binary", "--full-index", "--no-renames"
                    )
                    if complete:
                        digest = await self.blobs.put_file(patch) if size else None
                        await asyncio.to_thread(_write_state, path, base, digest, False)
                        return ref.model_copy(update={"patch_digest": digest})
                total, largest = await self._sizes(
                    path, *diff_argv("--cached", "--name-only", "-z", "--no-renames", base)
                )
            # Back to the ref's state, here as on any other worker: nothing of this change is kept.
            await self._rebuild(path, base, clone_url, ref.patch_digest)
        raise CheckpointTooLarge(_too_large_message(total, largest, cap), files=[name for _, name in largest])

    async def diff(self, ref: WorkspaceRef, run_id: str, path: str | None = None) -> str:
        """A readable unified diff of the checkout against base_sha, new files included.

        Like checkpoint(), it reads the checkout as it is: open() it first. A `path` leaving the
        workspace raises ToolError.
        """
        clone_url, base = _portable(ref)
        run_dir = self._run_dir(run_id)
        async with self._lock(f"{run_dir}.lock"):
            self._require_checkout(run_dir, base, run_id)
            await asyncio.to_thread(_pin_git_dir, run_dir, self._mirror_path(clone_url))
            spec: list[str] = []
            if path not in (None, "", "."):
                rel = resolve_in_workspace(run_dir, path).relative_to(os.path.realpath(run_dir))
                spec = ["--", f":(literal){rel.as_posix()}"]
            await self._shadow_index(run_dir, base)
            await self._wgit(run_dir, "add", "--all", "--", ":/", env=self._shadow_env(run_dir))
            with tempfile.TemporaryDirectory(dir=self.root, prefix="diff-") as scratch:
                out = Path(scratch) / "diff"
                _, complete = await self._staged_to_file(run_dir, base, out, DIFF_TOOL_MAX_BYTES, "-M", *spec)
                text = (await asyncio.to_thread(out.read_bytes)).decode("utf-8", "replace")
        if not text:
            return f"no changes{f' in {path!r}' if spec else ''} against the starting commit {base[:12]}"
        if not complete:
            text += f"\n[diff cut at {DIFF_TOOL_MAX_BYTES:,} bytes: call git_diff with a path to see one file's diff]"
        return text

    def cleanup(self, run_id: str) -> None:
        """Remove a run's checkout from this worker (the mirror stays cached)."""
        path = self._run_dir(run_id)
        shutil.rmtree(path, ignore_errors=True)
        _unlink(Path(f"{path}.lock"))

    # --- for activities that build commits in the mirror itself (git_remote.py) --------------------

    async def mirror(self, clone_url: str) -> Path:
        """This worker's bare mirror of `clone_url` (created empty when missing)."""
        _check_arg("clone_url", clone_url)
        return await self._mirror(clone_url)

    def mirror_lock(self, mirror: Path) -> contextlib.AbstractAsyncContextManager[None]:
        """The lock every fetch into `mirror` holds."""
        return self._lock(f"{mirror}.lock")

    async def patch_file(self, digest: str, dest: Path) -> None:
        """Write the patch `digest` names to the new file `dest`, streamed from the blob store."""
        try:
            await self.blobs.get_file(digest, dest)
        except (ShopfloorError, ValueError) as e:
            raise PatchError(f"cannot load workspace patch {digest!r} from the blob store: {e}") from None

    # --- mirror ------------------------------------------------------------------------------------

    def _run_dir(self, run_id: str) -> Path:
        if not run_id:
            raise WorkspaceError("a run id is required to key the workspace checkout")
        return self.root / "runs" / _key(run_id)

    def _mirror_path(self, clone_url: str) -> Path:
        return self.root / "mirrors" / f"{_key(clone_url)}.git"

    async def _mirror(self, clone_url: str) -> Path:
        mirror = self._mirror_path(clone_url)
        if not (mirror / "HEAD").is_file():
            async with self._lock(f"{mirror}.lock"):
                if not (mirror / "HEAD").is_file():
                    tmp = mirror.with_name(f".{mirror.name}.{uuid.uuid4().hex[:8]}")
                    tmp.parent.mkdir(parents=True, exist_ok=True)
                    await self._git(["init", "--bare", "--quiet", str(tmp)], self.root)
                    await asyncio.to_thread(shutil.rmtree, mirror, True)  # a broken leftover
                    await asyncio.to_thread(os.replace, tmp, mirror)
        return mirror

    async def _ensure_commit(self, clone_url: str, sha: str) -> Path:
        """The mirror, holding (and pinning) `sha`; fetched only when it is missing."""
        mirror = await self._mirror(clone_url)
        if await self._has_commit(mirror, sha):
            return mirror
        async with self._lock(f"{mirror}.lock"):
            if not await self._has_commit(mirror, sha):
                try:
                    await self._mgit(
                        mirror, "fetch", "--no-tags", "--quiet", "--", clone_url, sha, timeout=FETCH_TIMEOUT_S
                    )
                except GitError:  # a server that refuses fetching by sha: take all branches and tags
                    every = ["+refs/heads/*:refs/shopfloor/remote/heads/*", "+refs/tags/*:refs/shopfloor/remote/tags/*"]
                    await self._mgit(mirror, "fetch", "--quiet", "--", clone_url, *every, timeout=FETCH_TIMEOUT_S)
                if not await self._has_commit(mirror, sha):
                    raise WorkspaceError(f"commit {sha} is not in the repository at {redact(clone_url)}")
                await self._mgit(mirror, "update-ref", f"refs/shopfloor/base/{sha}", sha)
        return mirror

    async def _has_commit(self, mirror: Path, sha: str) -> bool:
        try:
            await self._mgit(mirror, "cat-file", "-e", f"{sha}^{{commit}}")
        except GitError:
            return False
        return True

    # --- checkout ----------------------------------------------------------------------------------

    async def _reset(self, path: Path, base: str, mirror: Path) -> None:
        git_dir = path / ".git"
        if path.exists() and (git_dir.is_symlink() or not git_dir.is_dir()):
            await asyncio.to_thread(shutil.rmtree, path, True)
        if not path.exists():
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            await self._git(["clone", "--shared", "--no-checkout", "--quiet", "--", str(mirror), str(tmp)], self.root)
            await asyncio.to_thread(os.replace, tmp, path)
        await asyncio.to_thread(_pin_git_dir, path, mirror)
        # Locks left by a killed git are stale: we hold the run's lock.
        _unlink(git_dir / "index.lock", git_dir / SHADOW_INDEX, git_dir / f"{SHADOW_INDEX}.lock")
        await self._wgit(path, "checkout", "--force", "--detach", "--quiet", base)
        await self._wgit(path, "clean", "-ffdxq")
        await self._wgit(path, "reset", "--hard", "--quiet")

    async def _rebuild(self, path: Path, base: str, clone_url: str, digest: str | None) -> None:
        """Make the checkout exactly base + the patch `digest` (streamed), and trust it."""
        with tempfile.TemporaryDirectory(dir=self.root, prefix="patch-") as scratch:
            patch = Path(scratch) / "patch"
            if digest:  # first: a missing patch leaves the checkout as it was
                await self.patch_file(digest, patch)
            mirror = await self._ensure_commit(clone_url, base)
            await asyncio.to_thread(_unlink, path / ".git" / STATE_FILE)  # distrust a half-done reset
            try:
                await self._reset(path, base, mirror)
            except GitError:  # a broken .git, a stale lock, a vanished mirror: start over once
                await asyncio.to_thread(shutil.rmtree, path, True)
                await self._reset(path, base, mirror)
            if digest:
                await self._apply(path, base, patch, digest)
        await asyncio.to_thread(_write_state, path, base, digest, False)

    async def _apply(self, path: Path, base: str, patch: Path, digest: str) -> None:
        index = path / ".git" / f"shopfloor-apply-{uuid.uuid4().hex[:8]}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            await self._wgit(path, "read-tree", base, env=env)
            try:
                await self._wgit(path, "apply", "--cached", "--binary", "--whitespace=nowarn", str(patch), env=env)
            except GitError as e:
                raise PatchError(f"patch {digest} does not apply to {base}: {e.stderr}") from None
            tree = (await self._wgit(path, "write-tree", env=env)).decode().strip()
        finally:
            _unlink(index)
        await self._wgit(path, "read-tree", "-u", "--reset", tree)  # the work tree becomes that tree
        await self._wgit(path, "reset", "--quiet")  # index back to base: changes show as unstaged

    def _shadow_env(self, path: Path) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(path / ".git" / SHADOW_INDEX)}

    async def _shadow_index(self, path: Path, base: str) -> None:
        """The shadow index, made from base when missing (what was staged into it stays)."""
        index = path / ".git" / SHADOW_INDEX
        _unlink(Path(f"{index}.lock"))  # left by a killed checkpoint; we hold the run's lock
        if not index.exists():
            await self._wgit(path, "read-tree", base, env=self._shadow_env(path))

    async def _staged_to_file(self, path: Path, base: str, dest: Path, limit: int, *diff_args: str) -> tuple[int, bool]:
        """The shadow index diffed against base, into `dest`: (bytes, complete) as run_git_to_file."""
        argv = [*_SAFE, *self._where(path), *diff_argv("--cached", *diff_args, base)]
        return await run_git_to_file(
            argv,
            cwd=path,
            env={**self._env, **self._shadow_env(path)},
            dest=dest,
            limit=limit,
            shown=diff_argv("--cached", *diff_args, base),
        )

    async def _sizes(self, path: Path, *args: str) -> tuple[int, list[tuple[int, str]]]:
        """The paths `git ARGS` lists (NUL-separated, from the shadow index's view of the checkout):
        their total size on disk and the five largest. Read as a stream: a command that made a
        million files costs a file of names, not memory."""
        with tempfile.TemporaryDirectory(dir=self.root, prefix="sizes-") as scratch:
            names = Path(scratch) / "names"
            argv = [*_SAFE, *self._where(path), *args]
            await run_git_to_file(
                argv, cwd=path, env={**self._env, **self._shadow_env(path)}, dest=names, shown=list(args)
            )
            return await asyncio.to_thread(_sum_sizes, path, names)

    def _require_checkout(self, path: Path, base: str, run_id: str) -> None:
        state = _read_state(path)
        if state is None or state.get("base_sha") != base:
            raise WorkspaceError(f"run {run_id!r} has no checkout of {base[:12]} on this worker; open() it first")

    # --- plumbing ----------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lock(self, lock_path: str) -> AsyncIterator[None]:
        """Exclusive across coroutines (asyncio.Lock) and processes (a polled flock: no thread
        is held while waiting, and a cancelled waiter leaves nothing behind)."""
        async with self._locks.setdefault(lock_path, asyncio.Lock()):
            os.makedirs(os.path.dirname(lock_path), exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(LOCK_POLL_S)
                yield
            finally:
                os.close(fd)  # releases the flock

    async def _mgit(self, mirror: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> bytes:
        return await self._git([f"--git-dir={mirror}", *args], self.root, timeout=timeout)

    def _where(self, path: Path) -> list[str]:
        return [f"--git-dir={path / '.git'}", f"--work-tree={path}", "-c", "core.bare=false"]

    async def _wgit(
        self, path: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
    ) -> bytes:
        return await self._git([*self._where(path), *args], path, env=env, stdin=stdin)

    async def _git(
        self,
        args: list[str],
        cwd: Path,
        *,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float = GIT_TIMEOUT_S,
    ) -> bytes:
        """Run git in the clean environment: stdout, or GitError carrying stderr."""
        shown = [a for a in args if not a.startswith(("--git-dir=", "--work-tree="))]
        _, out, _ = await run_git(
            [*_SAFE, *args], cwd=cwd, env={**self._env, **(env or {})}, stdin=stdin, timeout=timeout, shown=shown
        )
        return out


def _sum_sizes(root: Path, names: Path) -> tuple[int, list[tuple[int, str]]]:
    """Total size and the five largest of the NUL-separated paths (relative to `root`) in `names`."""
    total, largest, rest = 0, [], b""
    with open(names, "rb") as f:
        while True:
            chunk = f.read(CHUNK_BYTES)
            *done, rest = (rest + chunk).split(b"\0")
            if not chunk:
                done.append(rest)
            for raw in done:
                if not raw:
                    continue
                name = raw.decode("utf-8", "surrogateescape")
                try:
                    st = os.lstat(root / name)
                except OSError:
                    continue  # deleted: no bytes
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                    largest = sorted([*largest, (st.st_size, name)], reverse=True)[:5]
            if not chunk:
                return total, largest


def _too_large_message(total: int, largest: list[tuple[int, str]], cap: int) -> str:
    files = ", ".join(f"{name!r} ({_mb(size)})" for size, name in largest) or "many small files"
    return (
        f"this change was not kept: a workspace's change may hold at most {_mb(cap)}, and this one holds "
        f"{_mb(total)} of new or changed files; the largest: {files}. The workspace is back to how it was "
        "before this call. Do not put large files in the repository: write them under /tmp, or remove them "
        "in the same command that makes them."
    )


def _mb(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _portable(ref: WorkspaceRef) -> tuple[str, str]:
    if not ref.clone_url or not ref.base_sha:
        raise WorkspaceError(f"the workspace of {ref.repo} is not portable: it needs clone_url and base_sha")
    if not _SHA_RE.fullmatch(ref.base_sha):
        raise WorkspaceError(f"base_sha {ref.base_sha!r} is not a full commit id")
    _check_arg("clone_url", ref.clone_url)
    return ref.clone_url, ref.base_sha


def _check_arg(name: str, value: str) -> None:
    """Refuse what git could read as an option, and control characters (spaces only in a URL or path)."""
    spaces = name == "clone_url"
    if not value or value.startswith("-") or any(not (c.isprintable() and (spaces or not c.isspace())) for c in value):
        raise WorkspaceError(f"{name} {redact(repr(value))} is not usable (empty, a leading '-', or whitespace)")


def _read_state(path: Path) -> dict[str, object] | None:
    try:
        state = json.loads((path / ".git" / STATE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _write_state(path: Path, base: str, digest: str | None, dirty: bool) -> None:
    target = path / ".git" / STATE_FILE
    tmp = target.with_name(f"{STATE_FILE}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps({"base_sha": base, "patch_digest": digest, "dirty": dirty}), "utf-8")
    os.replace(tmp, target)  # readers see the old state or the new one, never half of one


def _pin_git_dir(path: Path, mirror: Path) -> None:
    """Put back what the agent's commands may have changed in the checkout's .git that git, run
    outside the sandbox, would act on: its config, its alternates (the sandbox mounts the
    directories they name back, read-only), a commondir or per-worktree config redirecting it.
    GitError when the object store itself is no longer a real directory (the caller re-clones)."""
    git_dir = path / ".git"
    for d in (git_dir, git_dir / "objects"):
        if d.is_symlink() or not d.is_dir():
            raise GitError(f"{d} is not a directory: the checkout was tampered with")
    info = git_dir / "objects" / "info"
    if info.is_symlink() or (info.exists() and not info.is_dir()):
        _unlink(info)
    info.mkdir(exist_ok=True)
    _unlink(git_dir / "commondir", git_dir / "config.worktree")
    # info/attributes would apply to every path, as .gitattributes files do
    git_info = git_dir / "info"
    if git_info.is_symlink() or (git_info.exists() and not git_info.is_dir()):
        _unlink(git_info)
    _unlink(git_info / "attributes")
    _replace_file(git_dir / "config", _CHECKOUT_CONFIG)
    _replace_file(info / "alternates", f"{mirror / 'objects'}\n")


def _replace_file(target: Path, text: str) -> None:
    """Write `target` anew (a symlink there is replaced, never followed)."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, target)


def _unlink(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(path)
