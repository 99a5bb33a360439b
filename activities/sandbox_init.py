"""The first process of every command: waits until the worker has put it in the command's cgroups,
becomes the subreaper of everything the command starts, and when the command ends kills whatever
it left behind — `setsid` daemons included, since orphans are reparented here — before exiting
with the command's status.

Started by `sandbox_process` as `python -I -m shopfloor.activities.sandbox_init WORKER_PID
FILE_SIZE_LIMIT ARGV...` with the gate on stdin: the worker writes one byte once the process is placed (or closes
the pipe to abort). It dies with the worker (SIGTERM on the parent's death), and on SIGTERM kills
the command's processes first. Every file the command writes is capped at FILE_SIZE_LIMIT
bytes (RLIMIT_FSIZE, inherited through bubblewrap). Imports nothing beyond the standard library and `process_tree`.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

from shopfloor.activities.process_tree import descendants, stop_and_kill

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _kill_left_behind() -> None:
    me = os.getpid()
    stop_and_kill(lambda: [p.pid for p in descendants(me)])


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _on_term(signum: int, frame: object) -> None:
    _kill_left_behind()
    _reap_all()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    worker, file_size, command = int(argv[0]), int(argv[1]), argv[2:]
    signal.signal(signal.SIGTERM, _on_term)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != worker:  # the worker died before the line above
        return 125
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.read(0, 1) == b"":  # the worker closed the gate without opening it: run nothing
        return 125
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # Python ignores SIGPIPE and SIGXFSZ; the command gets the defaults, as from a shell.
        child = os.posix_spawnp(
            command[0], command, os.environ, setsigdef=(signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ)
        )
    except OSError as exc:
        print(f"shopfloor: cannot start {command[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127
    status = 0
    while True:  # reap orphans as they come, until the command itself ends
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if pid == child:
            status = wait_status
            break
    _kill_left_behind()
    _reap_all()
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
