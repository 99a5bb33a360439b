"""`shopfloor worker` as a child process of the bench, so the bench can SIGKILL it like a crash."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from shopfloor.child_python import python_command
from shopfloor.errors import ShopfloorError

# The console script's entry point, run by this very Python (no dependence on PATH) on the
# installed shopfloor, whatever the working directory (python_command).
_MAIN = "import sys; from shopfloor.cli.main import main; sys.argv[0] = 'shopfloor'; main()"
# The same under cProfile, its statistics written to the path after the code when it exits:
# the app itself, as main() leaves with os._exit before a profiler could write anything.
_PROFILED = (
    "import cProfile, os, sys; out = sys.argv.pop(1); from shopfloor.cli.main import app; "
    "sys.argv[0] = 'shopfloor'; cProfile.run('app()', out); os._exit(0)"
)


@dataclass
class ProcessUsage:
    cpu_s: float  # user + system CPU seconds so far
    peak_rss_bytes: int  # the most resident memory it has had (VmHWM)
    rss_bytes: int  # resident memory now (VmRSS)


def process_usage(pid: int) -> ProcessUsage | None:
    """What process `pid` has used so far, from /proc (Linux); None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is fields[0]
    ticks = os.sysconf("SC_CLK_TCK")
    kb = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("Vm")}
    return ProcessUsage(
        cpu_s=(int(fields[11]) + int(fields[12])) / ticks,
        peak_rss_bytes=kb.get("VmHWM", 0),
        rss_bytes=kb.get("VmRSS", 0),
    )


def worker_env(**settings: str) -> dict[str, str]:
    """This process's environment without any shopfloor or provider setting, plus `settings`: the
    worker sees the bench's Temporal, task queue, data dir and fake model, never the user's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPFLOOR_", "OPENAI_", "ANTHROPIC_"))}
    env.update(settings)
    return env


class WorkerProcess:
    def __init__(self, env: dict[str, str], log: Path, *, profile: Path | None = None) -> None:
        """`profile`: run under cProfile, its statistics written there when the worker stops (SIGTERM)."""
        self.log = log
        self._out = open(log, "ab")
        code = ("-c", _MAIN) if profile is None else ("-c", _PROFILED, str(profile))
        self.proc = subprocess.Popen(
            python_command(*code, "worker"),
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def identity_prefix(self) -> str:
        return f"{self.proc.pid}@"  # the Temporal SDK's default worker identity is "<pid>@<host>"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def usage(self) -> ProcessUsage | None:
        """Its CPU time and memory so far (None once it has exited, or without /proc)."""
        return process_usage(self.proc.pid) if self.alive() else None

    def kill(self) -> float:
        """SIGKILL: no shutdown, no goodbye to the server, as a crashed machine would. Returns the
        wall-clock time (time.time()) of the kill."""
        at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._out.close()
        return at

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._out.closed:
            self._out.close()

    def log_tail(self, chars: int = 3000) -> str:
        """The last `chars` characters of the log; all of it when `chars` is negative."""
        if not self.log.exists():
            return ""
        text = self.log.read_text(errors="replace")
        return text if chars < 0 else text[-chars:]

    async def wait_polling(
        self,
        client: Client,
        task_queue: str,
        kind: TaskQueueType.ValueType = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        timeout_s: float = 120,
    ) -> None:
        """Until it polls `task_queue`; ShopfloorError with its log if it exits or takes longer."""
        deadline = time.monotonic() + timeout_s
        while not await self.polling(client, task_queue, kind):
            if not self.alive():
                raise ShopfloorError(f"the bench's worker exited ({self.proc.returncode}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ShopfloorError(f"the bench's worker did not poll within {timeout_s:.0f} s:\n{self.log_tail()}")
            await asyncio.sleep(0.02)

    async def polling(self, client: Client, task_queue: str, kind: TaskQueueType.ValueType) -> bool:
        """Whether this process polls `task_queue` for tasks of `kind` (workflow or activity)."""
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind
            )
        )
        return any(p.identity.startswith(self.identity_prefix) for p in resp.pollers)
