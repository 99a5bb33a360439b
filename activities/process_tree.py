"""A command's processes as /proc shows them: its descendants, their memory and thread counts, and
killing all of them so that no fork can outrun it.

Standard library only: the command's first process (`sandbox_init`) uses it too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    threads: int


def _read_stat(pid: str) -> ProcessInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # gone meanwhile
        return None
    # The name (field 2) may hold spaces and parentheses: the fields after it start after the last ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return ProcessInfo(pid=int(pid), ppid=int(fields[1]), threads=int(fields[17]))


def all_processes() -> list[ProcessInfo]:
    return [info for name in os.listdir("/proc") if name.isdigit() and (info := _read_stat(name)) is not None]


def descendants(root: int, table: Iterable[ProcessInfo] | None = None) -> list[ProcessInfo]:
    """Every process below `root` (not `root` itself), parents before children."""
    children: dict[int, list[ProcessInfo]] = {}
    for info in all_processes() if table is None else table:
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcessInfo] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child.pid)
    return found


def memory_bytes(pid: int) -> int:
    """What one process costs in memory: its proportional share of resident and swapped pages
    (shared pages are split among their users, so a sum over processes counts each page once);
    its resident size where smaps_rollup is missing. 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            total = 0
            for line in f:
                if line.startswith((b"Pss:", b"SwapPss:")):
                    total += int(line.split()[1]) * 1024
            return total
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_now(pids: Iterable[int]) -> None:
    _signal(pids, signal.SIGKILL)


def stop_and_kill(members: Callable[[], Iterable[int]], *, rounds: int = 200) -> None:
    """Kill every process `members()` lists, including those forked while this runs: stop them
    all (a stopped process cannot fork) until a listing finds nobody new, then SIGKILL them."""
    stopped: set[int] = set()
    for _ in range(rounds):
        current = set(members())
        fresh = current - stopped
        if not fresh:
            break
        _signal(fresh, signal.SIGSTOP)
        stopped |= fresh
        time.sleep(0.001)  # let a fork already under way finish, so the next listing sees its child
    _signal(stopped | set(members()), signal.SIGKILL)
