"""Cgroups for commands: one group per command, whose memory (swap included) and task limits hold
for all of the command's processes together, and which lists them all for killing.

Where the groups go is found once per process: under SHOPFLOOR_SANDBOX_CGROUP (a delegated cgroup
v2 directory) when set, else under the worker's own cgroup — v2 when the unified hierarchy has the
memory and pids controllers, v1 (a `shopfloor` group in the memory and pids hierarchies) otherwise.
A probe group is created, limited and removed before the answer is trusted; when nothing works,
`find_cgroups` says why and commands fall back to the watchdog (`sandbox_limits`).
"""

from __future__ import annotations

import errno
import functools
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog

from shopfloor.activities.process_tree import stop_and_kill

log = structlog.get_logger(__name__)

V1_CONTROLLERS = ("memory", "pids")


class CgroupError(OSError):
    """A cgroup could not be created, limited or joined."""


@dataclass(frozen=True)
class CgroupHost:
    """Where this worker creates its commands' groups."""

    version: Literal[1, 2]
    parents: dict[str, Path]  # v2: {"unified": dir}; v1: {"memory": dir, "pids": dir}

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.parents.values())
        return f"cgroup v{self.version} under {where}"

    def new_group(self, memory_bytes: int, tasks: int) -> CommandGroup:
        name = f"cmd-{uuid.uuid4().hex[:16]}"
        group = CommandGroup(self, {c: parent / name for c, parent in self.parents.items()})
        try:
            group.create(memory_bytes, tasks)
        except OSError as exc:
            group.remove()
            raise CgroupError(exc.errno, f"cannot create the command's cgroup: {exc}") from exc
        return group


class CommandGroup:
    """One command's cgroup(s): limits, admission, what happened, killing, removal."""

    def __init__(self, host: CgroupHost, dirs: dict[str, Path]) -> None:
        self.host = host
        self.dirs = dirs

    def create(self, memory_bytes: int, tasks: int) -> None:
        for d in self.dirs.values():
            d.mkdir()
        if self.host.version == 2:
            d = self.dirs["unified"]
            _write(d / "memory.max", memory_bytes)
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", 0)
            if (d / "memory.oom.group").exists():  # Linux 4.19+: an OOM kill takes the whole command
                _write(d / "memory.oom.group", 1)
            _write(d / "pids.max", tasks)
        else:
            mem = self.dirs["memory"]
            _write(mem / "memory.limit_in_bytes", memory_bytes)
            if (mem / "memory.memsw.limit_in_bytes").exists():  # memory + swap: no swapping past the limit
                _write(mem / "memory.memsw.limit_in_bytes", memory_bytes)
            _write(self.dirs["pids"] / "pids.max", tasks)

    def admit(self, pid: int) -> None:
        """Move `pid` into every hierarchy's group (before it has started anything)."""
        try:
            for d in self.dirs.values():
                _write(d / "cgroup.procs", pid)
        except OSError as exc:
            raise CgroupError(exc.errno, f"cannot move the command into its cgroup: {exc}") from exc

    def oom_kills(self) -> int:
        d = self.dirs["unified"] if self.host.version == 2 else self.dirs["memory"]
        name = "memory.events" if self.host.version == 2 else "memory.oom_control"
        return _counter(d / name, "oom_kill")

    def task_limit_hits(self) -> int:
        return _counter(self.dirs["unified" if self.host.version == 2 else "pids"] / "pids.events", "max")

    def pids(self) -> list[int]:
        d = self.dirs["unified" if self.host.version == 2 else "pids"]
        try:
            return [int(line) for line in (d / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL everything in the group (cgroup.kill where the kernel has it)."""
        kill_file = self.dirs.get("unified", Path("/nonexistent")) / "cgroup.kill"
        if kill_file.exists():
            try:
                _write(kill_file, 1)
                return
            except OSError:
                pass
        stop_and_kill(self.pids)

    def remove(self) -> bool:
        """Remove the group's directories; False while a process (or zombie) is still in one."""
        done = True
        for d in self.dirs.values():
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        return done


def _write(path: Path, value: int | str) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root within the filesystem, mount point, filesystem type, super options) of cgroup mounts."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under "" its v2 cgroup."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


def _located(mount_root: str, mount_point: str, path: str) -> Path | None:
    rel = os.path.relpath(path, mount_root)
    if rel.startswith(".."):
        return None  # our group is outside what this mount shows
    return Path(os.path.normpath(os.path.join(mount_point, rel)))


def _v2_parent(parent: Path) -> Path:
    """A v2 directory whose children may get memory and pids limits (it is made so if it can be)."""
    if not (parent / "cgroup.controllers").is_file():
        raise CgroupError(errno.ENOENT, f"{parent} is not a cgroup v2 directory")
    available = set((parent / "cgroup.controllers").read_text().split())
    if not {"memory", "pids"} <= available:
        raise CgroupError(
            errno.ENOTSUP,
            f"{parent} lacks the memory or pids controller (has: {' '.join(sorted(available)) or 'none'})",
        )
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    if {"memory", "pids"} <= enabled:
        return parent
    try:
        _write(parent / "cgroup.subtree_control", "+memory +pids")
        return parent
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise CgroupError(exc.errno, f"cannot enable memory and pids in {parent}: {exc}") from exc
    # A v2 group with processes in it cannot hand controllers to children: move this worker into
    # a leaf of its own, and retry (fails when other processes share the group).
    leaf = parent / "shopfloor-worker"
    leaf.mkdir(exist_ok=True)
    _write(leaf / "cgroup.procs", os.getpid())
    try:
        _write(parent / "cgroup.subtree_control", "+memory +pids")
    except OSError as exc:
        _write(parent / "cgroup.procs", os.getpid())
        raise CgroupError(
            exc.errno,
            f"{parent} holds other processes, so it cannot hand memory and pids to "
            "command groups; give the worker a delegated cgroup in SHOPFLOOR_SANDBOX_CGROUP",
        ) from exc
    log.info("worker moved into its own leaf cgroup so commands can get cgroups", cgroup=str(leaf))
    return parent


def _locate(setting: str) -> CgroupHost:
    mounts = _mounts()
    if setting != "auto":
        return CgroupHost(2, {"unified": _v2_parent(Path(setting))})
    own = _own_paths()
    problems = []
    if "" in own:
        for root, point, fstype, _ in mounts:
            if fstype == "cgroup2" and (d := _located(root, point, own[""])) is not None:
                try:
                    return CgroupHost(2, {"unified": _v2_parent(d)})
                except OSError as exc:
                    problems.append(f"v2: {exc.strerror or exc}")
                break
    parents: dict[str, Path] = {}
    for controller in V1_CONTROLLERS:
        for root, point, fstype, options in mounts:
            if fstype == "cgroup" and controller in options and controller in own:
                if (d := _located(root, point, own[controller])) is not None:
                    parents[controller] = d / "shopfloor"
                break
    missing = [c for c in V1_CONTROLLERS if c not in parents]
    if missing:
        problems.append(f"v1: no {' or '.join(missing)} hierarchy")
        raise CgroupError(errno.ENOTSUP, "; ".join(problems))
    try:
        for d in parents.values():
            d.mkdir(exist_ok=True)
    except OSError as exc:
        problems.append(f"v1: cannot create {exc.filename}: {exc.strerror}")
        raise CgroupError(exc.errno, "; ".join(problems)) from exc
    return CgroupHost(1, parents)


@functools.cache
def find_cgroups(setting: str = "auto") -> CgroupHost | str:
    """Where commands' cgroups go, or why there are none ("off", or what failed). Probed once:
    a group is created with limits, joined by nothing, and removed."""
    if setting == "off":
        return "cgroups are off (SHOPFLOOR_SANDBOX_CGROUP=off)"
    try:
        host = _locate(setting)
        host.new_group(64 * 1024 * 1024, 16).remove()
        return host
    except OSError as exc:
        return f"no usable cgroup ({exc.strerror or exc})"
