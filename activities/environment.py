"""A workspace's prepared environment: where it lives, its reuse key, and its archive in the blob store.

On the host an environment is a directory beside the run's checkout (`<workspaces>/envs/<run>`),
never inside shopfloor's own virtualenv and never shared writable between runs: every run that
uses one gets its own copy, restored from the blob store by digest once per worker. Inside the
bubblewrap sandbox it is mounted at one fixed path, ENV_MOUNT, so the absolute paths setup wrote
into it (a virtualenv's scripts and their shebangs) hold on every worker. Setup's commands and
every later command of the run see `ENV_MOUNT/venv/bin`, then the checkout's `node_modules/.bin`,
first on PATH, with VIRTUAL_ENV set.

The archive (a gzip'd tar) holds the environment directory and what setup left in the checkout
that git ignores (`node_modules`, a build directory), so a worker that rebuilds the checkout from
its commit gets them back. Caches stay out of it: HOME, and so pip's and npm's caches, are the
command's scratch directory. The reuse key names what makes an archive usable: the repository
and base commit, the setup commands, the worker's Python and sandbox, and FORMAT; a named ref in the
blob store (`environments/<key>`) maps the key to the archive's digest, so another worker, or
this one after a restart, finds it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import shutil
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog

from shopfloor.activities.git_mirror import dir_key
from shopfloor.activities.path_locks import PathLocks
from shopfloor.blobs import BlobStore, check_digest
from shopfloor.errors import ShopfloorError

log = structlog.get_logger(__name__)

FORMAT = 1  # what an archive holds and where; a new layout gets a new number (and new keys)
ENV_MOUNT = "/shopfloor/env"  # where commands see the environment
VENV = f"{ENV_MOUNT}/venv"
DEFAULT_MAX_ENVIRONMENT_BYTES = 2 * 1024 * 1024 * 1024
_ENV_PART = "env"  # archive members: env/... (the environment), checkout/... (git-ignored files)
_CHECKOUT_PART = "checkout"
# Appended last to the environment's sys.path for commands (never during setup, where pip must see
# only what the environment holds): the worker's own packages (pytest ...) behind the repository's.
FALLBACK_PTH = "zz-shopfloor-worker.pth"


class EnvironmentUnavailable(ShopfloorError):
    """An environment that cannot be kept, found or restored; the message says why."""


class CheckoutConflict(EnvironmentUnavailable):
    """Setup's git-ignored files cannot be put back into the checkout: something there (a link
    out of it a command made) is in the way. Nothing was written outside the checkout."""


@dataclass(frozen=True)
class SandboxEnvironment:
    """How one command sees an environment: the bind mount, PATH entries and variables."""

    host_dir: Path
    path: list[str]
    variables: dict[str, str]


def python_identity() -> str:
    """What a virtualenv made by this worker depends on: its base interpreter and platform."""
    return f"{sys.base_prefix}|{sys.version}|{platform.machine()}|{sysconfig.get_platform()}"


def environment_key(clone_url: str, base_sha: str, commands: list[str], sandbox: str) -> str:
    """The reuse key of the environment `commands` make for `base_sha`, on a worker like this one."""
    text = json.dumps(
        {
            "format": FORMAT,
            "clone_url": clone_url,
            "base_sha": base_sha,
            "commands": commands,
            "python": python_identity(),
            "sandbox": sandbox,
            "mount": ENV_MOUNT,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def sandbox_environment(host_dir: Path, checkout: Path) -> SandboxEnvironment:
    """The environment at `host_dir` as commands in `checkout` see it."""
    return SandboxEnvironment(
        host_dir=host_dir,
        path=[f"{VENV}/bin", str(checkout / "node_modules" / ".bin")],
        variables={"VIRTUAL_ENV": VENV, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"},
    )


def fallback_site_packages() -> str:
    """The worker's own site-packages (its interpreter's prefix is shown read-only in the sandbox)."""
    return sysconfig.get_paths()["purelib"]


def _venv_site_packages(env_dir: Path) -> list[Path]:
    return sorted((env_dir / "venv" / "lib").glob("python*/site-packages"))


def add_worker_fallback(env_dir: Path) -> None:
    """Make the worker's packages importable behind the environment's own (see FALLBACK_PTH)."""
    for site in _venv_site_packages(env_dir):
        (site / FALLBACK_PTH).write_text(fallback_site_packages() + "\n")


def _kept(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    # Files, directories and links only: a fifo or device node setup made is not worth keeping.
    if info.isreg() or info.isdir() or info.issym() or info.islnk():
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info
    return None


def _without_fallback(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if info.name.endswith(f"/{FALLBACK_PTH}") else _kept(info)


def _present(checkout: Path, ignored: Iterable[str]) -> list[str]:
    """The git-ignored paths (relative, directories with or without their "/") still in `checkout`."""
    return [rel for rel in (r.rstrip("/") for r in ignored) if rel and os.path.lexists(checkout / rel)]


def write_archive(dest: Path, env_dir: Path, checkout: Path, ignored: Iterable[str]) -> None:
    """The archive of `env_dir` and the git-ignored paths `ignored` (relative) in `checkout`."""
    with tarfile.open(dest, "w:gz", compresslevel=1) as tar:
        tar.add(env_dir, arcname=_ENV_PART, recursive=True, filter=_without_fallback)
        for rel in _present(checkout, ignored):
            tar.add(checkout / rel, arcname=f"{_CHECKOUT_PART}/{rel}", recursive=True, filter=_kept)


def extract_archive(archive: Path, env_dir: Path | None, checkout: Path | None) -> list[str]:
    """Extract the environment part into `env_dir` and the checkout part into `checkout` (either
    may be None: not extracted). The top-level checkout entries, relative to the checkout."""
    top: set[str] = set()
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        for part, dest in ((_ENV_PART, env_dir), (_CHECKOUT_PART, checkout)):
            chosen = []
            for m in members:
                head, _, rest = m.name.partition("/")
                if head != part or not rest:
                    continue
                if part == _CHECKOUT_PART:
                    top.add(rest.split("/", 1)[0])
                if dest is not None:
                    chosen.append(_renamed(m, rest))
            if dest is not None:
                dest.mkdir(parents=True, exist_ok=True)
                # "tar": nothing lands outside dest, no device files, no setuid bits.
                tar.extractall(dest, members=chosen, filter="tar")
    return sorted(top)


def _renamed(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    m = member.replace(name=name, deep=False)
    if m.islnk():  # hard links name their target by archive path too
        m = m.replace(linkname=m.linkname.partition("/")[2], deep=False)
    return m


class EnvironmentIndex:
    """Reuse key -> archive digest, as a named ref in the blob store (so every worker sharing the
    store finds it, also after a restart)."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    async def get(self, key: str) -> str | None:
        """The digest of the environment kept under `key`, if it is still in the blob store."""
        try:
            digest = await self.blobs.get_ref(f"environments/{key}")
        except Exception:  # noqa: BLE001 - an unreadable entry means: prepare it again
            return None
        if digest is None or not await self.blobs.exists(digest):
            return None
        return digest

    async def put(self, key: str, digest: str) -> None:
        await self.blobs.put_ref(f"environments/{key}", digest)


class Environments:
    """The environments of this worker's runs (`<root>/envs/<run>`), kept and restored."""

    def __init__(self, root: Path, blobs: BlobStore, *, max_bytes: int = DEFAULT_MAX_ENVIRONMENT_BYTES) -> None:
        self.root = Path(os.path.abspath(root))
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.index = EnvironmentIndex(blobs)
        self._locks = PathLocks()

    def dir_for(self, run_id: str) -> Path:
        if not run_id:
            raise EnvironmentUnavailable("a run id is required to key the environment")
        return self.root / "envs" / dir_key(run_id)

    def _marker(self, env_dir: Path) -> Path:
        return env_dir.with_name(env_dir.name + ".json")  # beside it: commands cannot write it

    def _archive_path(self, digest: str) -> Path:
        return self.root / "env-archives" / check_digest(digest)

    def fresh(self, run_id: str) -> Path:
        """An empty environment directory for `run_id` (what was there is removed)."""
        env_dir = self.dir_for(run_id)
        shutil.rmtree(env_dir, ignore_errors=True)
        self._marker(env_dir).unlink(missing_ok=True)
        env_dir.mkdir(parents=True)
        return env_dir

    async def keep(self, run_id: str, checkout: Path, ignored: list[str]) -> str:
        """Archive the run's environment and `ignored` into the blob store: its digest."""
        env_dir = self.dir_for(run_id)
        scratch = self.root / "env-archives"
        scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=scratch, prefix=".new-", suffix=".tgz")
        os.close(fd)
        tmp = Path(name)
        try:
            await asyncio.to_thread(write_archive, tmp, env_dir, checkout, ignored)
            size = tmp.stat().st_size
            if size > self.max_bytes:
                raise EnvironmentUnavailable(
                    f"the prepared environment is {size / 1e6:,.0f} MB packed, more than the "
                    f"{self.max_bytes / 1e6:,.0f} MB this worker keeps (SHOPFLOOR_MAX_ENVIRONMENT_BYTES)"
                )
            digest = await self.blobs.put_file(tmp)
            os.replace(tmp, self._archive_path(digest))  # this worker's copy: no download later
        finally:
            tmp.unlink(missing_ok=True)
        top = sorted({rel.split("/", 1)[0] for rel in _present(checkout, ignored)})  # what the archive holds
        self._write_marker(env_dir, digest, top)
        await asyncio.to_thread(add_worker_fallback, env_dir)
        return digest

    def _write_marker(self, env_dir: Path, digest: str, top: list[str]) -> None:
        self._marker(env_dir).write_text(json.dumps({"digest": digest, "checkout": top}))

    def _read_marker(self, env_dir: Path) -> tuple[str | None, list[str]]:
        """(digest, top-level checkout entries) of the environment restored here, if any."""
        try:
            data = json.loads(self._marker(env_dir).read_text())
            return str(data["digest"]), [str(t) for t in data["checkout"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None, []

    async def _archive(self, digest: str) -> Path:
        path = self._archive_path(digest)
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".get-{os.getpid()}-{id(path):x}")
            try:
                await self.blobs.get_file(digest, tmp)
                os.replace(tmp, path)
            except (ShopfloorError, ValueError) as exc:
                raise EnvironmentUnavailable(
                    f"the prepared environment {digest[:12]} is not in the blob store: {exc}"
                ) from None
            finally:
                tmp.unlink(missing_ok=True)
        return path

    async def restore(self, digest: str, run_id: str, checkout: Path) -> SandboxEnvironment:
        """The run's copy of environment `digest`, restored when this worker does not have it, and
        the checkout's git-ignored files from setup put back when they are missing."""
        env_dir = self.dir_for(run_id)
        async with self._locks.hold(f"{env_dir}.lock"):
            restored, top = self._read_marker(env_dir)
            if restored != digest or not env_dir.is_dir():
                archive = await self._archive(digest)
                await asyncio.to_thread(self.fresh, run_id)
                try:
                    top = await asyncio.to_thread(extract_archive, archive, env_dir, None)
                except (tarfile.TarError, OSError) as exc:
                    raise EnvironmentUnavailable(
                        f"the prepared environment {digest[:12]} cannot be restored: {exc}"
                    ) from None
                await asyncio.to_thread(add_worker_fallback, env_dir)
                self._write_marker(env_dir, digest, top)
                missing = top
                log.info("environment restored", digest=digest[:12], run_id=run_id)
            else:
                missing = [t for t in top if not os.path.lexists(checkout / t)]  # a rebuilt checkout lost them
            if missing:
                archive = await self._archive(digest)
                try:
                    # Extracted on the worker, into a checkout commands write to: the "tar" filter
                    # refuses any member whose path leads outside it (through a link a command made).
                    await asyncio.to_thread(extract_archive, archive, None, checkout)
                except (tarfile.TarError, OSError) as exc:
                    raise CheckoutConflict(
                        f"setup's files ({', '.join(missing[:5])}) could not be put back into the checkout: {exc}"
                    ) from None
        return sandbox_environment(env_dir, checkout)

    def cleanup(self, run_id: str) -> None:
        env_dir = self.dir_for(run_id)
        shutil.rmtree(env_dir, ignore_errors=True)
        self._marker(env_dir).unlink(missing_ok=True)
