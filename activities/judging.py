"""Judging a model's tool calls in child processes with a time limit, off the worker's event loop.

Permission judging (agents/permissions.py) and the required-command check (agents/submission.py)
read text the model wrote. They are written to be linear, but they also apply the repository's
own ask/deny regexes and protected-path globs, which Python's `re` may run in exponential time
while holding the GIL: in the worker's process that would freeze every run on it (no queries
answered, no heartbeats). So each call whose judgment could apply them is judged in a child
process (`python -c` importing this module; a few, reused): a judgment that overruns
JUDGE_TIME_LIMIT_S is killed with its process, and the call is denied with a reason the model can
act on. The child inherits no secrets: its environment holds only what Python needs to import
shopfloor. A call no repository rule applies to (a read-only tool's, an edit where the repository
protects no paths), with arguments of bounded size, is judged in the worker: the same `judge`,
without the round trip.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import structlog
from pydantic import BaseModel

from shopfloor.agents.permissions import READ_ONLY, Decision, PermissionPolicy, classify
from shopfloor.agents.submission import runs_required

log = structlog.get_logger(__name__)

JUDGE_TIME_LIMIT_S = 5.0  # a 64 KB command is judged in well under a second on a loaded machine
START_TIME_LIMIT_S = 60.0  # a child imports pydantic and the rules first
CHILDREN = 2  # judgments at once per worker process; each waits for a free child
WRITES = ("edit_file", "write_file")
INLINE_ARGUMENT_CHARS = 64 * 1024  # of a call judged in this process (its arguments as JSON)
_HEADER = struct.Struct(">I")  # every message: its length, then that much UTF-8 JSON
_CHILD_MAIN = "from shopfloor.activities.judging import serve; serve()"


class CallToJudge(BaseModel):
    tool: str
    arguments: dict[str, Any]
    policy: dict[str, Any]  # PermissionPolicy's fields
    required_command: str | None = None
    test_command: str | None = None


class Judgment(BaseModel):
    decision: Decision
    reason: str = ""
    runs_required: bool = False


def judge(call: CallToJudge) -> Judgment:
    """The judgment itself: pure, run in the child."""
    verdict = classify(call.tool, call.arguments, PermissionPolicy(**call.policy))
    try:
        required = runs_required(call.tool, call.arguments, call.required_command, call.test_command)
    except Exception:  # a bug here must not make a call count as the test run
        required = False
    return Judgment(decision=verdict.decision, reason=verdict.reason, runs_required=required)


def judged_here(call: CallToJudge) -> bool:
    """Whether `call` may be judged in this process: its judgment applies none of the
    repository's rules (its ask/deny regexes apply to run_command only, its protected paths to
    edits only), just shopfloor's own fixed patterns, which run in linear time (path_rules), to
    arguments of bounded size; the required-command check looks at run_command and run_tests
    only. Nothing such a call holds can keep the event loop for long."""
    if call.tool not in READ_ONLY and not (call.tool in WRITES and not call.policy.get("protected_paths")):
        return False
    return len(json.dumps(call.arguments, ensure_ascii=False, default=str)) <= INLINE_ARGUMENT_CHARS


async def judge_calls(calls: list[CallToJudge]) -> list[Judgment]:
    """Judge `calls`, in order: in child processes, each within JUDGE_TIME_LIMIT_S, unless the
    call can be judged here (`judged_here`), which spares a round trip to a child per call."""
    loop = asyncio.get_running_loop()
    pending = [None if judged_here(c) else loop.run_in_executor(_pool(), _judge_in_child, c) for c in calls]
    # Judged here in the meantime: the children (if any) work in parallel.
    here = [judge(c) if p is None else None for c, p in zip(calls, pending)]
    if any(p is not None for p in pending):
        done = iter(await asyncio.gather(*(p for p in pending if p is not None)))
        return [h if h is not None else next(done) for h in here]
    return [h for h in here if h is not None]


# --- the parent side: one child per pool thread ------------------------------------------------


class JudgingUnavailable(RuntimeError):
    """No child process could be started or talked to (an operator's problem, retried)."""


_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_local = threading.local()


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=CHILDREN, thread_name_prefix="shopfloor-judge")
        return _executor


def _judge_in_child(call: CallToJudge) -> Judgment:
    """Runs in a pool thread, which owns one child (started on first use, replaced when killed)."""
    request = call.model_dump_json().encode()
    attempt = 0
    while True:
        attempt += 1
        child: _Child | None = getattr(_local, "child", None)
        if child is None or not child.alive():
            child = _local.child = _Child.start()
        started = time.monotonic()
        try:
            return Judgment.model_validate_json(child.ask(request, JUDGE_TIME_LIMIT_S))
        except TimeoutError:
            child.kill()
            _local.child = None
            log.warning(
                "judging took too long; the call is denied and the judging process replaced",
                tool=call.tool,
                seconds=round(time.monotonic() - started, 1),
                limit_s=JUDGE_TIME_LIMIT_S,
            )
            return Judgment(
                decision="deny",
                reason=(
                    f"checking this {call.tool} call took longer than {JUDGE_TIME_LIMIT_S:.0f} s, so it was refused. "
                    "Make it shorter or simpler (for a long command, write a script file and run that)."
                ),
            )
        except (OSError, EOFError, ValueError) as exc:
            child.kill()
            _local.child = None
            if attempt == 2:  # a child that died between two calls is replaced once
                raise JudgingUnavailable(f"the judging process failed: {exc}") from exc


class _Child:
    def __init__(self, proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
        self.proc = proc
        self.stderr = stderr

    @classmethod
    def start(cls) -> _Child:
        stderr = tempfile.TemporaryFile()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONDONTWRITEBYTECODE": "1",
            # the parent's import path, so the child imports this very shopfloor
            "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in sys.path if p),
        }
        try:
            proc = subprocess.Popen(  # -P and cwd "/": nothing is imported from where the worker was started
                [sys.executable, "-P", "-c", _CHILD_MAIN],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd="/",
                start_new_session=True,  # no Ctrl-C from the terminal
            )
        except OSError as exc:
            stderr.close()
            raise JudgingUnavailable(f"cannot start the judging process: {exc}") from exc
        child = cls(proc, stderr)
        try:
            if child.read(START_TIME_LIMIT_S) != b"ready":
                raise EOFError("it did not say it was ready")
        except (TimeoutError, OSError, EOFError) as exc:
            child.kill()
            stderr.seek(0)
            last = (stderr.read().decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
            log.error("the judging process did not start", error=str(exc), stderr=last[:300])
            raise JudgingUnavailable(f"the judging process did not start: {last[:200]}") from exc
        return child

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: bytes, limit_s: float) -> bytes:
        stdin = self.proc.stdin
        assert stdin is not None  # started with stdin=PIPE
        stdin.write(_HEADER.pack(len(request)) + request)
        stdin.flush()
        return self.read(limit_s)

    def read(self, limit_s: float) -> bytes:
        """One message from the child; TimeoutError when it does not come within `limit_s`."""
        assert self.proc.stdout is not None  # started with stdout=PIPE
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + limit_s
        header = _read_exactly(fd, _HEADER.size, deadline)
        return _read_exactly(fd, _HEADER.unpack(header)[0], deadline)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            if stream is not None:
                stream.close()


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the judging process exited")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# --- the child side ----------------------------------------------------------------------------


def serve() -> None:
    """The child's loop: read a call, write its judgment, until the parent closes the pipe."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the message stream

    def send(data: bytes) -> None:
        stdout.write(_HEADER.pack(len(data)) + data)
        stdout.flush()

    send(b"ready")
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the worker is gone
        body = stdin.read(_HEADER.unpack(header)[0])
        try:
            judgment = judge(CallToJudge.model_validate_json(body))
        except Exception as exc:  # noqa: BLE001 (a bug costs one refused call, never the child)
            judgment = Judgment(
                decision="deny",
                reason=(f"internal error while checking this call ({type(exc).__name__}); try another way."),
            )
        send(judgment.model_dump_json().encode())
