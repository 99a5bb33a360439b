"""A real `shopfloor worker` process, for tests that kill workers with SIGKILL: the bench's own
spawner (shopfloor/bench/spawn.py), with JSON logs the tests can read."""

from __future__ import annotations

import sys
from pathlib import Path

from shopfloor.bench.spawn import WorkerProcess
from shopfloor.bench.spawn import worker_env as _bench_worker_env

__all__ = ["SHOPFLOOR", "WorkerProcess", "worker_env"]

SHOPFLOOR = str(Path(sys.executable).parent / "shopfloor")  # the console script, for CLI runs


def worker_env(**overrides: str) -> dict[str, str]:
    return _bench_worker_env(**{"SHOPFLOOR_LOG_JSON": "true", **overrides})
