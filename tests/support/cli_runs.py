"""Running the real `shopfloor` console script in tests: one-shot commands and long-running ones;
and `invoke_cli`, the same command line run in this process (argument parsing, validation and
the one-line refusals need no process of their own).

Every process gets an explicit environment (no SHOPFLOOR_*/OPENAI_*/ANTHROPIC_* from the caller),
a timeout, and is cleaned up even when the test fails, including the `temporal` child that
`shopfloor dev` starts in its own session (found through /proc by its unique database path).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from worker_process import SHOPFLOOR, WorkerProcess, worker_env

T = TypeVar("T")

__all__ = [
    "SHOPFLOOR",
    "cli_env",
    "run_cli",
    "arun_cli",
    "invoke_cli",
    "LongRunning",
    "pids_with_arg",
    "kill_pids",
    "pid_alive",
    "port_open",
    "wait_until",
    "one_line",
    "StreamedRun",
    "polling_worker",
]


def cli_env(**overrides: str) -> dict[str, str]:
    """The caller's environment minus shopfloor's and the providers' variables, plus overrides."""
    env = worker_env(**overrides)
    env.pop("PYTHONPATH", None)  # never the repo root
    return env


@dataclass
class CliResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (
            f"shopfloor {' '.join(self.args)} -> {self.returncode}\n--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )


def run_cli(args: Sequence[str], env: dict[str, str], *, timeout_s: float = 60.0, cwd: Path | None = None) -> CliResult:
    """Run `shopfloor ARGS` to completion. On timeout: SIGINT (so `dev` stops its children), then
    SIGKILL, and the test fails."""
    proc = subprocess.Popen(
        [SHOPFLOOR, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(proc, signal.SIGINT, 20)
        out, err = proc.communicate()
        raise AssertionError(
            f"shopfloor {' '.join(args)} did not finish within {timeout_s:.0f} s\n--- stdout\n{out}--- stderr\n{err}"
        ) from None
    finally:
        if proc.poll() is None:
            _stop_group(proc, signal.SIGKILL, 10)
    return CliResult(list(args), proc.returncode, out, err)


async def arun_cli(
    args: Sequence[str], env: dict[str, str], *, timeout_s: float = 60.0, cwd: Path | None = None
) -> CliResult:
    """run_cli off the event loop, for async tests."""
    return await asyncio.to_thread(run_cli, args, env, timeout_s=timeout_s, cwd=cwd)


def invoke_cli(args: Sequence[str], env: dict[str, str], *, timeout_s: float = 60.0) -> CliResult:
    """`shopfloor ARGS` run in this process by typer's CliRunner, with exactly `env` as its
    environment (variables not in it are removed while it runs): what `run_cli` reports, without
    a process start. It runs on a thread of its own, so the command's asyncio.run leaves the
    caller's event loop alone (an async test may call it through asyncio.to_thread too), and the
    process-wide logging set-up the command makes is put back afterwards. An exception the command
    lets escape fails the test with its traceback, as it would have printed one."""
    import structlog
    from typer.testing import CliRunner

    from shopfloor.cli.main import app

    overrides: dict[str, str | None] = {key: None for key in os.environ if key not in env}
    overrides.update(env)
    root = logging.getLogger()
    handlers, level, structlog_config = root.handlers[:], root.level, structlog.get_config()

    def invoke():
        return CliRunner().invoke(app, list(args), env=overrides, catch_exceptions=False)

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="invoke-cli")
    try:
        result = pool.submit(invoke).result(timeout=timeout_s)
    except TimeoutError:
        raise AssertionError(f"shopfloor {' '.join(args)} did not finish within {timeout_s:.0f} s") from None
    finally:
        pool.shutdown(wait=False)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
        structlog.configure(**structlog_config)
    return CliResult(list(args), result.exit_code, result.stdout, result.stderr)


def _stop_group(proc: subprocess.Popen, sig: int, wait_s: float) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class LongRunning:
    """`shopfloor ARGS` in the background (its own process group, as a shell job would be),
    output to a log file. `interrupt()` is a terminal's Ctrl-C; `close()` always cleans up,
    including stray processes whose command line holds `reap_marker` (e.g. a database path)."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log: Path, *, reap_marker: str | None = None) -> None:
        self.args = list(args)
        self.log = log
        self.reap_marker = reap_marker
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(
            [SHOPFLOOR, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"shopfloor {' '.join(self.args)} exited early with status {self.proc.returncode}:\n{self.output()}"
            )

    def interrupt(self, timeout_s: float = 20.0) -> tuple[int, float]:
        """SIGINT to the process group; (exit status, seconds it took). Fails on timeout."""
        started = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"shopfloor {' '.join(self.args)} still running {timeout_s:.0f} s after SIGINT:\n{self.output()}"
            ) from None
        return code, time.monotonic() - started

    def close(self) -> None:
        if self.proc.poll() is None:
            _stop_group(self.proc, signal.SIGINT, 20)
        if self.reap_marker:
            kill_pids(pids_with_arg(self.reap_marker))
        self._out.close()

    def __enter__(self) -> LongRunning:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pids_with_arg(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line contains `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on host:port."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


async def wait_until(
    probe: Callable[[], Awaitable[T | None]], timeout_s: float, what: str, interval_s: float = 0.2
) -> T:
    """Poll an async probe until it returns something truthy; fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            value = await probe()
            if value:
                return value
            last = value
        except AssertionError:
            raise
        except Exception as exc:  # not ready yet (connection refused, 503, ...)
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval_s)


def one_line(text: str) -> str:
    """The single non-empty line of `text`; fails when there are none or several."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one line, got {len(lines)}:\n{text}"
    return lines[0]


class StreamedRun:
    """`shopfloor ARGS` with each stdout line timestamped as it arrives (to tell a live view
    from output printed at the end)."""

    def __init__(self, args: Sequence[str], env: dict[str, str]) -> None:
        self.args = list(args)
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [SHOPFLOOR, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=lambda: self._stderr.append(self.proc.stderr.read()), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait(self, timeout_s: float) -> CliResult:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop_group(self.proc, signal.SIGKILL, 10)
            raise AssertionError(
                f"shopfloor {' '.join(self.args)} did not finish within {timeout_s:.0f} s:\n"
                + "\n".join(line for _, line in self.lines)
            ) from None
        finally:
            if self.proc.poll() is None:
                _stop_group(self.proc, signal.SIGKILL, 10)
            for t in self._readers:
                t.join(10)
        stdout = "".join(line + "\n" for _, line in self.lines)
        return CliResult(self.args, self.proc.returncode, stdout, "".join(self._stderr))

    def arrival(self, fragment: str) -> float:
        """When the first line containing `fragment` arrived."""
        for at, line in self.lines:
            if fragment in line:
                return at
        raise AssertionError(f"no line with {fragment!r} in:\n" + "\n".join(line for _, line in self.lines))


@asynccontextmanager
async def polling_worker(client: Any, env: dict[str, str], log: Path, queue: str) -> AsyncIterator[WorkerProcess]:
    """A `shopfloor worker` process with no workflow cache (every task replays), yielded once it
    polls `queue`, and stopped afterwards."""
    proc = WorkerProcess(env | {"SHOPFLOOR_MAX_CACHED_WORKFLOWS": "0"}, log)
    try:

        async def polling() -> bool:
            if proc.proc.poll() is not None:
                raise AssertionError(f"the worker exited: {proc.log.read_text()}")
            resp = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace="default",
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
            return bool(resp.pollers)

        await wait_until(polling, 60, "the worker to poll its task queue")
        yield proc
    finally:
        proc.stop()
