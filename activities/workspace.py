"""Workspace checkpoints: git checkouts any worker rebuilds from a WorkspaceRef.

Under this worker's own `root` (workers share no disk, only the blob store):

- `mirrors/`: a bare mirror per repository caching its objects, each base commit pinned
  (git_mirror.py).
- `runs/<sha256(run_id)[:16]>/`: the run's checkout, `git clone --shared` from the mirror: objects
  are read through `.git/objects/info/alternates`, nothing is copied or hard-linked, and `.git`
  stays inside the checkout (a sandbox binding the workspace writable and the mirror read-only
  can run git there). Runs never share a directory. Beside it, the state it is in
  (checkout_state.py), which open() trusts only when it matches the ref and is not dirty.

A patch is `git diff --cached --binary <base>` over a private index (`.git/shopfloor-index`)
that `git add --all` fills from the work tree: changed, new, deleted and binary files and mode
changes, never `.git` nor files .gitignore excludes. It is replayed in index space too (applied to
a temporary index, written as a tree, checked out with `git read-tree -u`), so clean/smudge
attributes such as `eol=crlf` round-trip byte for byte.

Patches never pass through the worker's memory: git writes them to a file that is streamed to
the blob store (and back, to replay one). A change larger than `max_checkpoint_bytes` is not
checkpointed: the checkout goes back to the ref it was opened at (so every worker agrees on it)
and CheckpointTooLarge names the largest files, for the model to read (checkpoint_size.py).

Every diff a reader sees is built by git_cmd.diff_argv (text forced, no diff drivers). The agent's
commands can write `.git`, so git runs with an explicit --git-dir/--work-tree (a planted
core.worktree cannot redirect a reset), the safe options every worker git takes (git_cmd.py), and
a `.git` that is no longer a real directory gets the checkout re-cloned. Before git runs in a
checkout, and before a command's sandbox is set up from it, its `.git` is put back to what
shopfloor made it (checkout_guard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from shopfloor.activities.checkout_guard import pin_git_dir, unlink
from shopfloor.activities.checkout_state import STATE_FILE, forget_state, is_state, read_state, write_state
from shopfloor.activities.checkpoint_size import DEFAULT_MAX_CHECKPOINT_BYTES, sum_sizes, too_large_message
from shopfloor.activities.git_cmd import (
    GitError,
    GitRunner,
    WorkspaceError,
    check_clone_url,
    check_ref_name,
    diff_argv,
    is_full_sha,
)
from shopfloor.activities.git_mirror import Mirrors, dir_key
from shopfloor.activities.path_locks import PathLocks
from shopfloor.activities.tools.confine import resolve_in_workspace
from shopfloor.blobs import BlobStore
from shopfloor.errors import ShopfloorError
from shopfloor.models.agent_run import WorkspaceRef

__all__ = [
    "DEFAULT_MAX_CHECKPOINT_BYTES",
    "DIFF_TOOL_MAX_BYTES",
    "STATE_FILE",
    "CheckpointTooLarge",
    "GitError",
    "PatchError",
    "WorkspaceError",
    "Workspaces",
    "portable",
]

SHADOW_INDEX = "shopfloor-index"
DIFF_TOOL_MAX_BYTES = 1024 * 1024  # what the git_diff tool shows at most; a path narrows it


class PatchError(WorkspaceError):
    """A ref's patch is missing from the blob store or does not apply to its base commit."""


class CheckpointTooLarge(WorkspaceError):
    """The checkout's change is larger than a checkpoint may hold; it was put back to its ref."""

    def __init__(self, message: str, *, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


def portable(ref: WorkspaceRef) -> tuple[str, str]:
    """(clone_url, base_sha) of a ref any worker can rebuild; WorkspaceError for one it cannot."""
    if not ref.clone_url or not ref.base_sha:
        raise WorkspaceError(f"the workspace of {ref.repo} is not portable: it needs clone_url and base_sha")
    if not is_full_sha(ref.base_sha):
        raise WorkspaceError(f"base_sha {ref.base_sha!r} is not a full commit id")
    check_clone_url(ref.clone_url)
    return ref.clone_url, ref.base_sha


class Workspaces:
    def __init__(
        self, root: Path, blobs: BlobStore, *, max_checkpoint_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self.blobs = blobs
        self.max_checkpoint_bytes = max_checkpoint_bytes
        self._locks = PathLocks()
        home = self.root / "git-home"  # empty: no user config, credentials or templates leak in
        home.mkdir(parents=True, exist_ok=True)
        self.runner = GitRunner(home)
        self.mirrors = Mirrors(self.root, self.runner, self._locks)

    async def base_ref(self, repo: str, clone_url: str, ref: str = "HEAD") -> WorkspaceRef:
        """Resolve a branch, tag, `HEAD` or full sha at `clone_url` to the commit to work on."""
        check_clone_url(clone_url)
        check_ref_name("ref", ref)
        mirror = await self.mirrors.open(clone_url)
        if is_full_sha(ref):
            await mirror.ensure_commit(ref)
            sha = ref
        else:  # a name moves: always ask the remote
            sha = await mirror.fetch_ref(ref)
        return WorkspaceRef(repo=repo, clone_url=clone_url, base_sha=sha, patch_digest=None)

    async def open(self, ref: WorkspaceRef, run_id: str, *, read_only: bool = False) -> Path:
        """A checkout in exactly the state `ref` describes, reused when the disk already is.

        Unless `read_only`, the checkout is marked dirty before it is returned: the caller may
        change it, and until checkpoint() records the result no later open() trusts the disk.
        """
        clone_url, base = portable(ref)
        path = self._run_dir(run_id)
        async with self._run_lock(path):
            trusted = is_state(path, base, ref.patch_digest, dirty=False)
            if trusted:  # the disk is right, but a command may have planted things in .git since
                try:
                    await asyncio.to_thread(pin_git_dir, path, self.mirrors.path(clone_url))
                except GitError:
                    trusted = False
            if not trusted:
                await self._rebuild(path, base, clone_url, ref.patch_digest)
            if not read_only:
                await asyncio.to_thread(write_state, path, base, ref.patch_digest, True)
        return path

    async def checkpoint(self, ref: WorkspaceRef, run_id: str) -> WorkspaceRef:
        """Store the checkout's cumulative patch against base_sha; the ref of the new state.

        A change over `max_checkpoint_bytes` raises CheckpointTooLarge, with the checkout put back
        to `ref`. Files new or changed since the last checkpoint whose sizes alone pass the cap are
        refused before git stores them; any other change once its patch, streamed to a file, does.
        """
        clone_url, base = portable(ref)
        path = self._run_dir(run_id)
        cap = self.max_checkpoint_bytes
        async with self._run_lock(path):
            self._require_checkout(path, base, run_id)
            await asyncio.to_thread(pin_git_dir, path, self.mirrors.path(clone_url))
            await self._shadow_index(path, base)
            listed = ("ls-files", "-z", "--others", "--modified", "--exclude-standard", "--", ":/")
            total, largest = await self._sizes(path, *listed)  # changed since the last checkpoint
            if total <= cap:
                await self.checkout_git(path, "add", "--all", "--", ":/", env=self._shadow_env(path))
                with tempfile.TemporaryDirectory(dir=self.root, prefix="checkpoint-") as scratch:
                    patch = Path(scratch) / "patch"
                    size, complete = await self._staged_to_file(
                        path, base, patch, cap, "--binary", "--full-index", "--no-renames"
                    )
                    if complete:
                        digest = await self.blobs.put_file(patch) if size else None
                        await asyncio.to_thread(write_state, path, base, digest, False)
                        return ref.model_copy(update={"patch_digest": digest})
                total, largest = await self._sizes(
                    path, *diff_argv("--cached", "--name-only", "-z", "--no-renames", base)
                )
            # Back to the ref's state, here as on any other worker: nothing of this change is kept.
            await self._rebuild(path, base, clone_url, ref.patch_digest)
        raise CheckpointTooLarge(too_large_message(total, largest, cap), files=[name for _, name in largest])

    async def diff(self, ref: WorkspaceRef, run_id: str, path: str | None = None) -> str:
        """A readable unified diff of the checkout against base_sha, new files included.

        Like checkpoint(), it reads the checkout as it is: open() it first. A `path` leaving the
        workspace raises ToolError.
        """
        clone_url, base = portable(ref)
        run_dir = self._run_dir(run_id)
        async with self._run_lock(run_dir):
            self._require_checkout(run_dir, base, run_id)
            await asyncio.to_thread(pin_git_dir, run_dir, self.mirrors.path(clone_url))
            spec: list[str] = []
            if path not in (None, "", "."):
                rel = resolve_in_workspace(run_dir, path).relative_to(os.path.realpath(run_dir))
                spec = ["--", f":(literal){rel.as_posix()}"]
            await self._shadow_index(run_dir, base)
            await self.checkout_git(run_dir, "add", "--all", "--", ":/", env=self._shadow_env(run_dir))
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
        unlink(Path(f"{path}.lock"))

    async def patch_file(self, digest: str, dest: Path) -> None:
        """Write the patch `digest` names to the new file `dest`, streamed from the blob store."""
        try:
            await self.blobs.get_file(digest, dest)
        except (ShopfloorError, ValueError) as e:
            raise PatchError(f"cannot load workspace patch {digest!r} from the blob store: {e}") from None

    # --- checkout ----------------------------------------------------------------------------------

    def _run_dir(self, run_id: str) -> Path:
        if not run_id:
            raise WorkspaceError("a run id is required to key the workspace checkout")
        return self.root / "runs" / dir_key(run_id)

    def _run_lock(self, path: Path) -> contextlib.AbstractAsyncContextManager[None]:
        return self._locks.hold(f"{path}.lock")

    async def _reset(self, path: Path, base: str, mirror: Path) -> None:
        git_dir = path / ".git"
        if path.exists() and (git_dir.is_symlink() or not git_dir.is_dir()):
            await asyncio.to_thread(shutil.rmtree, path, True)
        if not path.exists():
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            await self.runner.run(
                ["clone", "--shared", "--no-checkout", "--quiet", "--", str(mirror), str(tmp)], cwd=self.root
            )
            await asyncio.to_thread(os.replace, tmp, path)
        await asyncio.to_thread(pin_git_dir, path, mirror)
        # Locks left by a killed git are stale: we hold the run's lock.
        unlink(git_dir / "index.lock", git_dir / SHADOW_INDEX, git_dir / f"{SHADOW_INDEX}.lock")
        await self.checkout_git(path, "checkout", "--force", "--detach", "--quiet", base)
        await self.checkout_git(path, "clean", "-ffdxq")
        await self.checkout_git(path, "reset", "--hard", "--quiet")

    async def _rebuild(self, path: Path, base: str, clone_url: str, digest: str | None) -> None:
        """Make the checkout exactly base + the patch `digest` (streamed), and trust it."""
        with tempfile.TemporaryDirectory(dir=self.root, prefix="patch-") as scratch:
            patch = Path(scratch) / "patch"
            if digest:  # first: a missing patch leaves the checkout as it was
                await self.patch_file(digest, patch)
            mirror = await self.mirrors.open(clone_url)
            await mirror.ensure_commit(base)
            await asyncio.to_thread(forget_state, path)  # distrust a half-done reset
            try:
                await self._reset(path, base, mirror.git_dir)
            except GitError:  # a broken .git, a stale lock, a vanished mirror: start over once
                await asyncio.to_thread(shutil.rmtree, path, True)
                await self._reset(path, base, mirror.git_dir)
            if digest:
                await self._apply(path, base, patch, digest)
        await asyncio.to_thread(write_state, path, base, digest, False)

    async def _apply(self, path: Path, base: str, patch: Path, digest: str) -> None:
        index = path / ".git" / f"shopfloor-apply-{uuid.uuid4().hex[:8]}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            await self.checkout_git(path, "read-tree", base, env=env)
            try:
                await self.checkout_git(
                    path, "apply", "--cached", "--binary", "--whitespace=nowarn", str(patch), env=env
                )
            except GitError as e:
                raise PatchError(f"patch {digest} does not apply to {base}: {e.stderr}") from None
            tree = (await self.checkout_git(path, "write-tree", env=env)).decode().strip()
        finally:
            unlink(index)
        await self.checkout_git(path, "read-tree", "-u", "--reset", tree)  # the work tree becomes that tree
        await self.checkout_git(path, "reset", "--quiet")  # index back to base: changes show as unstaged

    def _shadow_env(self, path: Path) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(path / ".git" / SHADOW_INDEX)}

    async def _shadow_index(self, path: Path, base: str) -> None:
        """The shadow index, made from base when missing (what was staged into it stays)."""
        index = path / ".git" / SHADOW_INDEX
        unlink(Path(f"{index}.lock"))  # left by a killed checkpoint; we hold the run's lock
        if not index.exists():
            await self.checkout_git(path, "read-tree", base, env=self._shadow_env(path))

    async def _staged_to_file(self, path: Path, base: str, dest: Path, limit: int, *diff_args: str) -> tuple[int, bool]:
        """The shadow index diffed against base, into `dest`: (bytes, complete) as run_git_to_file."""
        return await self.runner.to_file(
            [*self._where(path), *diff_argv("--cached", *diff_args, base)],
            cwd=path,
            env=self._shadow_env(path),
            dest=dest,
            limit=limit,
        )

    async def _sizes(self, path: Path, *args: str) -> tuple[int, list[tuple[int, str]]]:
        """The paths `git ARGS` lists (NUL-separated, from the shadow index's view of the checkout):
        their total size on disk and the five largest."""
        with tempfile.TemporaryDirectory(dir=self.root, prefix="sizes-") as scratch:
            names = Path(scratch) / "names"
            await self.runner.to_file([*self._where(path), *args], cwd=path, env=self._shadow_env(path), dest=names)
            return await asyncio.to_thread(sum_sizes, path, names)

    def _require_checkout(self, path: Path, base: str, run_id: str) -> None:
        state = read_state(path)
        if state is None or state.get("base_sha") != base:
            raise WorkspaceError(f"run {run_id!r} has no checkout of {base[:12]} on this worker; open() it first")

    def _where(self, path: Path) -> list[str]:
        return [f"--git-dir={path / '.git'}", f"--work-tree={path}", "-c", "core.bare=false"]

    async def checkout_git(
        self, path: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
    ) -> bytes:
        """git in the checkout at `path`: stdout, or GitError carrying stderr."""
        _, out, _ = await self.runner.run([*self._where(path), *args], cwd=path, env=env, stdin=stdin)
        return out
