"""A command's total limits — memory, processes and threads, scratch disk — across everything it
starts, and killing all of it at once.

With cgroups (`sandbox_cgroups`) the kernel holds memory (swap included) and tasks to the limit
for the whole group; without, a watchdog polls the command's process tree (every descendant of its
first process, which is their subreaper; in bubblewrap, a pid namespace) and sums proportional
memory and threads. Either way the watchdog measures the scratch directory (the command's /tmp and
/dev/shm, on disk) and every file is capped at the scratch limit by RLIMIT_FSIZE. Any limit
reached ends the whole command, with the reason.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import structlog

from shopfloor.activities import process_tree
from shopfloor.activities.sandbox_cgroups import CgroupHost, CommandGroup, find_cgroups
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import CommandPolicy

log = structlog.get_logger(__name__)

POLL_S = 0.1  # how often the watchdog looks (past a limit, a command runs at most about this long)
MB = 1024 * 1024
DIRECTORY_ALLOWANCE = MB  # directory blocks a scratch directory may use without counting


@dataclass(frozen=True)
class CommandLimits:
    memory_bytes: int
    tasks: int
    scratch_bytes: int

    @classmethod
    def of(cls, policy: CommandPolicy) -> CommandLimits:
        return cls(policy.memory_mb * MB, policy.max_processes, policy.scratch_mb * MB)


@dataclass
class Scratch:
    """The command's own writable directories besides the workspace, on disk: `tmp` is its /tmp
    (HOME inside it), `shm` its /dev/shm."""

    root: Path

    @classmethod
    def create(cls, parent: Path) -> Scratch:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(parent)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            # A shared temporary directory: someone else's directory or link must not become ours.
            raise PermissionError(errno.EPERM, f"{parent} is not a directory of this worker's user")
        root = parent / f"cmd-{uuid.uuid4().hex[:16]}"
        (root / "tmp" / "home").mkdir(parents=True)
        (root / "shm").mkdir()
        return cls(root)

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def shm(self) -> Path:
        return self.root / "shm"

    def written_bytes(self) -> int:
        """Disk blocks in use below the root (sparse holes are free, space reserved past a file's
        end is not), beyond the first DIRECTORY_ALLOWANCE bytes of directories: the empty ones
        made here and the mount points bubblewrap makes in /tmp for what lives under the host's."""
        files, dirs = self._used()
        return files + max(0, dirs - DIRECTORY_ALLOWANCE)

    def _used(self) -> tuple[int, int]:
        files = dirs = 0
        todo = [str(self.root)]
        while todo:
            try:
                entries = os.scandir(todo.pop())
            except OSError:
                continue
            with entries:
                for e in entries:
                    try:
                        used = e.stat(follow_symlinks=False).st_blocks * 512
                        if e.is_dir(follow_symlinks=False):
                            dirs += used
                            todo.append(e.path)
                        else:
                            files += used
                    except OSError:
                        continue
        return files, dirs

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class Confinement:
    """Holds one command to its limits: admit its first process, watch it, kill all of it."""

    def __init__(self, limits: CommandLimits, scratch: Scratch, cgroups: CgroupHost | None) -> None:
        self.limits = limits
        self.scratch = scratch
        self.group: CommandGroup | None = cgroups.new_group(limits.memory_bytes, limits.tasks) if cgroups else None
        self.root_pid: int | None = None

    def admit(self, pid: int) -> None:
        """Before the command starts anything (raises CgroupError: then it must not run)."""
        self.root_pid = pid
        if self.group is not None:
            self.group.admit(pid)

    def members(self) -> list[int]:
        if self.group is not None:
            return self.group.pids()
        if self.root_pid is None:
            return []
        return [self.root_pid, *(p.pid for p in process_tree.descendants(self.root_pid))]

    def breach(self, *, tree: bool = True) -> str | None:
        """Which limit the command went past, in words (None: within all of them). `tree=False`
        once the first process is gone: its pid may already belong to someone else."""
        lim = self.limits
        if self.group is not None:
            if self.group.oom_kills():
                return f"its processes together went past the memory limit ({lim.memory_bytes // MB} MB)"
            if self.group.task_limit_hits():
                return f"it tried to run more than {lim.tasks} processes and threads at once"
        elif tree and self.root_pid is not None:
            processes = process_tree.descendants(self.root_pid)
            if sum(p.threads for p in processes) > lim.tasks:
                return f"it tried to run more than {lim.tasks} processes and threads at once"
            if sum(process_tree.memory_bytes(p.pid) for p in processes) > lim.memory_bytes:
                return f"its processes together went past the memory limit ({lim.memory_bytes // MB} MB)"
        if self.scratch.written_bytes() > lim.scratch_bytes:
            return f"it wrote more than the scratch disk limit ({lim.scratch_bytes // MB} MB) to /tmp and /dev/shm"
        return None

    async def watch(self) -> str:
        """Returns (only) once a limit is breached, with the reason."""
        while True:
            started = time.monotonic()
            reason = await asyncio.to_thread(self.breach)
            if reason is not None:
                return reason
            # A slow look (a scratch directory of many files, a crowded /proc) waits longer before
            # the next, so watching never takes more than a fifth of a CPU.
            await asyncio.sleep(max(POLL_S, 4 * (time.monotonic() - started)))

    async def kill_all(self, *, tree: bool = True) -> None:
        """SIGKILL every process of the command (stopping them first, so forks cannot escape).
        `tree=False` once the first process is gone (and has killed what it left behind): then
        only a cgroup's members are certain to be the command's."""
        if self.group is not None:
            await asyncio.to_thread(self.group.kill)
        elif tree:
            await asyncio.to_thread(self._kill_tree)

    def _kill_tree(self) -> None:
        if self.root_pid is None:
            return
        # The top of the tree first: under bubblewrap the first process's grandchild is the pid
        # namespace's init, and its death takes every process in the namespace at once.
        tree = process_tree.descendants(self.root_pid)
        children = {p.pid for p in tree if p.ppid == self.root_pid}
        process_tree.kill_now([p.pid for p in tree if p.pid in children or p.ppid in children])
        process_tree.stop_and_kill(self.members)

    async def close(self) -> None:
        """Kill what is left, remove the cgroup and the scratch directory."""
        await self.kill_all(tree=False)
        if self.group is not None:
            deadline = time.monotonic() + 5
            while not self.group.remove():  # the kernel lets go of a group once its last task is reaped
                if time.monotonic() > deadline:
                    log.warning(
                        "command cgroup not removed: processes remain", cgroup=str(next(iter(self.group.dirs.values())))
                    )
                    break
                await self.kill_all(tree=False)
                await asyncio.sleep(0.02)
        await asyncio.to_thread(self.scratch.remove)


def open_confinement(policy: CommandPolicy, scratch_parent: Path, cgroup_setting: str) -> Confinement:
    found = find_cgroups(cgroup_setting)
    scratch = Scratch.create(scratch_parent)
    try:
        return Confinement(CommandLimits.of(policy), scratch, found if isinstance(found, CgroupHost) else None)
    except BaseException:
        scratch.remove()
        raise


def check_cgroup_setting(cgroup_setting: str) -> None:
    """A cgroup the operator named must work: no quiet fall back to the watchdog then."""
    found = find_cgroups(cgroup_setting)
    if cgroup_setting not in ("auto", "off") and not isinstance(found, CgroupHost):
        raise UsageError(
            f"SHOPFLOOR_SANDBOX_CGROUP={cgroup_setting} cannot hold commands: {found}. Delegate that "
            "cgroup v2 directory to the worker's user with the memory and pids controllers, or set "
            "SHOPFLOOR_SANDBOX_CGROUP=auto"
        )


def enforcement(cgroup_setting: str, scratch_parent: Path) -> dict[str, str]:
    """How each limit is enforced on this machine, for the worker's start-up log."""
    found = find_cgroups(cgroup_setting)
    scratch = (
        f"per-command directory under {scratch_parent} as /tmp and /dev/shm, each file capped by "
        f"RLIMIT_FSIZE, the total measured every {POLL_S:g} s (the command is killed past the limit)"
    )
    if isinstance(found, CgroupHost):
        how = found.describe()
        memory = f"{how}: memory {'memory.max, swap.max=0' if found.version == 2 else 'limit_in_bytes + memsw'} for all processes together"
        tasks = f"{how}: pids.max for all processes and threads together"
    else:
        memory = (
            f"watchdog ({found}): proportional memory of every process of the command summed every "
            f"{POLL_S:g} s, the command killed past the limit; each process also capped by RLIMIT_AS"
        )
        tasks = (
            f"watchdog ({found}): processes and threads of the command counted every {POLL_S:g} s, the "
            "command killed past the limit (its pid namespace at once under bubblewrap)"
        )
    return {
        "memory": memory,
        "processes": tasks,
        "scratch": scratch,
        "cpu": "RLIMIT_CPU per process and the wall-clock timeout for the whole command",
    }
