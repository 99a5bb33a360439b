"""Running a prepared command line and collecting what it did: the process half of the sandbox.

Output (stdout and stderr interleaved, as written) is taken as it arrives; at most the cap's head
and tail are kept, with a "[... N bytes cut ...]" marker between them, so memory stays near twice
the cap whatever the command prints.

The command's first process is `sandbox_init`: it waits on stdin until the worker has admitted it
to the command's confinement (cgroups, or the watchdog's process tree: `sandbox_limits`), is the
subreaper of everything the command starts, and kills what the command leaves behind. The whole
command — every process, `setsid` daemons included — is killed at the timeout, on cancellation,
when it goes past a limit, and after it exits (background stragglers).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any, cast

import structlog
from pydantic import BaseModel

from shopfloor.activities.sandbox_cgroups import CgroupError
from shopfloor.activities.sandbox_limits import Confinement
from shopfloor.child_python import python_command
from shopfloor.errors import ToolError
from shopfloor.models.agent_run import CommandPolicy

log = structlog.get_logger(__name__)

DRAIN_S = 2.0  # how long to wait for output after the process is gone


class CommandRefused(ToolError):
    """The command was not run: it could not be held to its limits, or there is no sandbox."""


class CommandOutcome(BaseModel):
    exit_code: int | None  # None when it was stopped at the timeout; 128+N when killed by signal N
    timed_out: bool = False
    killed_reason: str | None = None
    output: str = ""  # stdout and stderr interleaved, head and tail kept around a cut marker
    output_bytes: int = 0  # everything the command wrote
    duration_s: float = 0.0
    sandboxed: bool = False
    sandbox_note: str = ""  # e.g. "bubblewrap is not usable (...): ran UNSANDBOXED"


class _Capture:
    """Keeps the first and the last `cap/2` bytes of a stream, counting everything."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_cap:
            del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> str:
        tail = self.tail[-self.tail_cap :] if self.tail_cap else b""
        cut = self.total - len(self.head) - len(tail)
        if cut <= 0:
            return (bytes(self.head) + bytes(tail)).decode("utf-8", "replace")
        tail = bytes(tail).lstrip(bytes(range(0x80, 0xC0)))  # no half character after the marker
        head = bytes(self.head).decode("utf-8", "replace")
        return f"{head}\n[... {cut} bytes cut ...]\n{tail.decode('utf-8', 'replace')}"


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds output to a capture as it arrives, and tells exit apart from end of output: a
    background process can hold the pipe open long after the command itself exited."""

    def __init__(self, capture: _Capture) -> None:
        loop = asyncio.get_running_loop()
        self.capture = capture
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def execute(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    limit: float,
    policy: CommandPolicy,
    on_progress: Callable[[str], None] | None,
    interval: float,
    confinement: Confinement,
) -> CommandOutcome:
    started = time.monotonic()
    capture = _Capture(policy.output_cap_bytes)
    first = python_command(
        "-m",
        "shopfloor.activities.sandbox_init",
        str(os.getpid()),
        str(confinement.limits.scratch_bytes),
        *argv,
        isolated=True,  # it starts in the repository's workspace: nothing imported from there
    )
    transport, protocol = await asyncio.get_running_loop().subprocess_exec(
        lambda: _Protocol(capture),
        *first,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pid = transport.get_pid()
    # stdin=PIPE above: a write pipe (uvloop's is no subclass of asyncio.WriteTransport, so no
    # isinstance check: only its write and close are used)
    gate = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
    try:
        confinement.admit(pid)
    except CgroupError as exc:
        gate.close()  # an unopened gate: the first process exits without running anything
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        await _drain(protocol)
        transport.close()
        log.error("command refused: cannot hold it to its limits", error=str(exc))
        raise CommandRefused(f"the command was not run: it could not be held to its limits ({exc.strerror})") from exc
    gate.write(b"\x01")
    gate.close()

    async def report() -> None:
        while True:
            await asyncio.sleep(interval)
            if on_progress is not None:
                try:
                    on_progress(f"running for {time.monotonic() - started:.0f} s, {capture.total} bytes of output")
                except Exception:  # a failing reporter must not stop the command
                    log.exception("progress callback failed")

    reporter = asyncio.create_task(report())
    watchdog = asyncio.create_task(confinement.watch())
    timed_out = False
    breach: str | None = None
    try:
        awaited: set[asyncio.Future[Any]] = {protocol.exited, watchdog}
        done, _ = await asyncio.wait(awaited, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        if watchdog in done:
            breach = watchdog.result()
        elif not done:
            timed_out = True
    finally:
        reporter.cancel()
        watchdog.cancel()
        # The whole command: on timeout, past a limit, on cancellation, and stragglers after exit.
        # Its process tree only while the first process is there (not yet reaped, so its pid and
        # group are still its own); once it exited it had killed what it left behind.
        running = transport.get_returncode() is None
        await confinement.kill_all(tree=running)
        if running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        await _drain(protocol)
        transport.close()
    if breach is None and not timed_out:
        # The kernel's counters and the scratch directory outlive the processes.
        breach = await asyncio.to_thread(lambda: confinement.breach(tree=False))
    code = transport.get_returncode()
    exit_code = None if timed_out else (128 - code if code is not None and code < 0 else code)
    if timed_out:
        reason: str | None = f"timed out after {limit:g} s; the command and everything it started were killed"
    elif breach is not None:
        reason = f"{breach}; the command and everything it started were killed"
    else:
        reason = _killed(exit_code, policy)
    return CommandOutcome(
        exit_code=exit_code,
        timed_out=timed_out,
        killed_reason=reason,
        output=capture.text(),
        output_bytes=capture.total,
        duration_s=round(time.monotonic() - started, 3),
    )


async def _drain(protocol: _Protocol) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(protocol.exited), timeout=DRAIN_S)
        # A process that left the group (setsid) may still hold the pipe: wait a little, no more.
        await asyncio.wait_for(asyncio.shield(protocol.closed), timeout=DRAIN_S)
    except TimeoutError:
        pass


def _killed(code: int | None, policy: CommandPolicy) -> str | None:
    if code == 128 + signal.SIGXCPU:
        return f"killed by SIGXCPU: the CPU time limit ({policy.cpu_s} s) was reached"
    if code == 128 + signal.SIGXFSZ:
        return f"killed by SIGXFSZ: a file reached the scratch disk limit ({policy.scratch_mb} MB)"
    if code == 128 + signal.SIGKILL:
        return (
            f"killed by SIGKILL: the CPU time limit ({policy.cpu_s} s) or the memory limit "
            f"({policy.memory_mb} MB) was probably reached"
        )
    return None
