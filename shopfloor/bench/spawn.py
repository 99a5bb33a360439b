"""`shopfloor worker` as a child process of the bench, so the bench can SIGKILL it like a crash."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
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


def worker_env(**settings: str) -> dict[str, str]:
    """This process's environment without any shopfloor or provider setting, plus `settings`: the
    worker sees the bench's Temporal, task queue, data dir and fake model, never the user's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPFLOOR_", "OPENAI_", "ANTHROPIC_"))}
    env.update(settings)
    return env


class WorkerProcess:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = open(log, "ab")
        self.proc = subprocess.Popen(
            python_command("-c", _MAIN, "worker"),
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
