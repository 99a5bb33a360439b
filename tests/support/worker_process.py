"""A real `shopfloor worker` process, for tests that kill workers with SIGKILL: the bench's own
spawner (shopfloor/bench/spawn.py), with JSON logs the tests can read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from shopfloor.bench.spawn import WorkerProcess
from shopfloor.bench.spawn import worker_env as _bench_worker_env
from shopfloor.settings import Settings
from shopfloor.testing import FakeModelServer

__all__ = ["SHOPFLOOR", "WorkerProcess", "worker_env", "worker_env_for"]

SHOPFLOOR = str(Path(sys.executable).parent / "shopfloor")  # the console script, for CLI runs


def worker_env(**overrides: str) -> dict[str, str]:
    return _bench_worker_env(**{"SHOPFLOOR_LOG_JSON": "true", **overrides})


def worker_env_for(temporal_server: Any, settings: Settings, fake: FakeModelServer, **overrides: str) -> dict[str, str]:
    """A test's worker process: its Temporal server, task queue and data dir, every workflow task
    replayed (no cache), and `fake` as the OpenAI-wire model; `overrides` add or replace."""
    return worker_env(
        **{
            "SHOPFLOOR_TEMPORAL_ADDRESS": temporal_server.address,
            "SHOPFLOOR_TASK_QUEUE": settings.task_queue,
            "SHOPFLOOR_DATA_DIR": str(settings.data_dir),
            "SHOPFLOOR_MAX_CACHED_WORKFLOWS": "0",
            "OPENAI_BASE_URL": fake.openai_base_url,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            **overrides,
        }
    )
