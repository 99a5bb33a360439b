"""A real `shopfloor worker` process, for tests that kill workers with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

SHOPFLOOR = str(Path(sys.executable).parent / "shopfloor")


def worker_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPFLOOR_", "OPENAI_", "ANTHROPIC_"))}
    env["SHOPFLOOR_LOG_JSON"] = "true"
    env.update(overrides)
    return env


class WorkerProcess:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = open(log, "ab")
        self.proc = subprocess.Popen(
            [SHOPFLOOR, "worker"], env=env, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to the server — as a crashed machine would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
