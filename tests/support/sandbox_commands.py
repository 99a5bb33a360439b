"""Running commands in the real sandbox for the security tests (bubblewrap, cgroups or the
watchdog), and finding what they left running on the host."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from shopfloor.activities.sandbox import CommandOutcome, SandboxConfig, resolve_mode, run_command
from shopfloor.activities.sandbox_cgroups import CgroupHost, find_cgroups
from shopfloor.models.agent_run import CommandPolicy

# A root-only probe planted in /etc stays until the session ends (see tests/conftest.py).
ETC_PROBE_PREFIX = "shopfloor-probe-etc-"


def require_bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


def config_for(backend: str, scratch: Path, mode: str = "bwrap") -> SandboxConfig:
    """`backend` "cgroup": the worker's cgroups (skips where this machine has none the worker may
    create); "watchdog": cgroups off, the process-tree watchdog alone."""
    if backend == "cgroup":
        found = find_cgroups("auto")
        if not isinstance(found, CgroupHost):
            pytest.skip(f"this machine gives the worker no cgroups ({found}); the watchdog variant runs")
        return SandboxConfig(mode=mode, scratch_dir=scratch, cgroup="auto")
    return SandboxConfig(mode=mode, scratch_dir=scratch, cgroup="off")


async def sh(ws: Path, command: str, config: SandboxConfig, **policy: object) -> CommandOutcome:
    return await run_command(ws, command, mode=config, policy=CommandPolicy(**{"timeout_s": 60, **policy}))


def new_marker(kind: str) -> str:
    return f"sf-{kind}-{uuid.uuid4().hex[:10]}"


def alive(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


async def none_alive(marker: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
