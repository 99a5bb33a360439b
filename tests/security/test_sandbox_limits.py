"""A command's limits hold for everything it starts, not per process.

The attacks: several children that each stay under a per-process memory limit but together go far
past it; a large write to /tmp or /dev/shm (tmpfs in memory before, with no size limit); hundreds
of background processes; a fork bomb. Each runs in the real bubblewrap sandbox, once with the
worker's cgroups and once with the process-tree watchdog alone (the fallback where a worker may
create no cgroups), and must end with the whole command killed, the reason given, and nothing of
it left running or on disk.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from sandbox_commands import alive, config_for, new_marker, none_alive, require_bwrap, sh
from worker_process import WorkerProcess, worker_env

from shopfloor.activities.sandbox import SandboxConfig
from shopfloor.activities.sandbox_cgroups import CgroupHost, find_cgroups

PY = "python3"
# One child: 150 MB allocated and touched, held for a while, then a line saying it finished. (Its
# words are printed from pieces: bash quotes a killed job's source in its report.)
CHILD = (
    f"{PY} -c \"import time; b = b'x' * (150 * 2 ** 20); print('he' + 'ld', flush=True); time.sleep(4); "
    "print('child' + ' done')\""
)


@pytest.fixture(params=["cgroup", "watchdog"])
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxConfig:
    require_bwrap()
    return config_for(request.param, tmp_path / "scratch")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def scratch_left(config: SandboxConfig) -> list[Path]:
    return list(config.scratch_dir.iterdir()) if config.scratch_dir.exists() else []


async def test_children_share_one_memory_limit(sandbox, ws):
    # Three children of 150 MB each: every one is under the 200 MB limit, together they are not.
    out = await sh(ws, f"for i in 1 2 3; do {CHILD} & done; wait; echo all-''finished", sandbox, memory_mb=200)
    assert "all-finished" not in out.output and "child done" not in out.output, out.output
    if sandbox.cgroup != "off":
        # The kernel counts every page, so the third child cannot fill its 150 MB. The watchdog
        # polls, and all three may reach "held" between two of its looks: there, the test is
        # that none of them lives to finish.
        assert out.output.count("held") < 3, out.output
    assert out.exit_code != 0 and not out.timed_out
    assert "memory limit (200 MB)" in (out.killed_reason or ""), out
    assert not scratch_left(sandbox)


@pytest.mark.parametrize("target", ["/tmp/big", "/dev/shm/big"])
async def test_one_large_file_stops_at_the_scratch_limit(sandbox, ws, target):
    # 300 MB into one file under a 64 MB scratch limit: the write stops at the limit exactly.
    out = await sh(ws, f"head -c 300M /dev/zero > {target}; stat -c 'size=%s' {target}", sandbox, scratch_mb=64)
    assert f"size={64 * 2**20}" in out.output, out.output
    assert out.exit_code == 0 and out.killed_reason is None, out  # at the limit is within it
    assert not scratch_left(sandbox)


async def test_many_files_past_the_scratch_limit_end_the_command(sandbox, ws):
    # 300 MB in files of 8 MB under a 64 MB limit, then a long pause: the total is watched.
    command = "for i in $(seq 1 38); do head -c 8M /dev/zero > /tmp/f$i; done; echo all-written; sleep 30; echo slept"
    out = await sh(ws, command, sandbox, scratch_mb=64)
    assert "slept" not in out.output and not out.timed_out
    assert "scratch disk limit (64 MB)" in (out.killed_reason or ""), out
    assert not scratch_left(sandbox)  # and nothing of it stays on the worker's disk


async def test_hundreds_of_background_processes_end_the_command(sandbox, ws):
    marker = new_marker("many")
    command = f"for i in $(seq 1 400); do (exec -a {marker} sleep 30) & done; echo all-started; wait; echo waited"
    out = await sh(ws, command, sandbox, max_processes=64, timeout_s=25)
    assert not out.timed_out and "waited" not in out.output, out
    assert "more than 64 processes" in (out.killed_reason or ""), out
    assert await none_alive(marker), alive(marker)


async def test_a_fork_bomb_is_contained_and_the_command_returns(sandbox, ws):
    marker = new_marker("bomb")
    # Under cgroups the kernel holds the bomb at the limit, so it may fork forever. The watchdog
    # only looks every so often, and a crowded /proc slows its looks: on a loaded machine an
    # unbounded bomb outgrew it to the host's process limit, and the test's own worker could no
    # longer start a thread and died. There the bomb doubles ten times (1,024 processes): far past
    # the limit of 64 in a burst, and still bounded if the watchdog is slow.
    bomb = "fork while 1" if sandbox.cgroup != "off" else "fork for 1 .. 10; sleep 60"
    out = await sh(ws, f"exec -a {marker} perl -e '{bomb}'", sandbox, max_processes=64, timeout_s=30)
    assert not out.timed_out, out
    assert "more than 64 processes" in (out.killed_reason or ""), out
    assert await none_alive(marker), alive(marker)


async def test_a_command_within_its_limits_is_left_alone(sandbox, ws):
    command = (
        f"for i in 1 2 3 4; do (sleep 0.3) & done; wait; head -c 20M /dev/zero > /tmp/x; "
        f"{PY} -c \"b = b'x' * (50 * 2 ** 20); print('ok')\""
    )
    out = await sh(ws, command, sandbox, memory_mb=256, max_processes=64, scratch_mb=64)
    assert out.exit_code == 0 and out.killed_reason is None, out
    assert out.output.strip() == "ok"


async def startup_limits(temporal_server, tmp_path: Path, **settings: str) -> dict:
    """The `command limits` line a real `shopfloor worker` logs as it starts."""
    env = worker_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=f"limits-{uuid.uuid4().hex[:8]}",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
        **settings,
    )
    worker = WorkerProcess(env, tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and worker.alive():
            for line in worker.log.read_text(errors="replace").splitlines():
                if '"command limits"' in line:
                    return json.loads(line)
            await asyncio.sleep(0.1)
        raise AssertionError(f"no 'command limits' line in the worker's log:\n{worker.log_tail()}")
    finally:
        worker.stop()


async def test_the_worker_says_at_start_how_each_limit_is_enforced(temporal_server, tmp_path):
    require_bwrap()
    found = find_cgroups("auto")
    logged = await startup_limits(temporal_server, tmp_path)
    assert logged["sandbox"] == "bwrap"
    expected = f"cgroup v{found.version}" if isinstance(found, CgroupHost) else "watchdog"
    assert expected in logged["memory"] and expected in logged["processes"], logged
    assert str(tmp_path / "data" / "scratch") in logged["scratch"] and "RLIMIT_FSIZE" in logged["scratch"]
    watchdog = await startup_limits(temporal_server, tmp_path, SHOPFLOOR_SANDBOX_CGROUP="off")
    assert "watchdog" in watchdog["memory"] and "watchdog" in watchdog["processes"], watchdog


async def test_a_worker_refuses_to_start_on_a_named_cgroup_it_cannot_use(temporal_server, tmp_path):
    # An operator who named a cgroup meant its limits: no quiet fall back to the watchdog.
    env = worker_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE="no-cgroup",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
        SHOPFLOOR_SANDBOX_CGROUP=str(tmp_path / "not-a-cgroup"),
    )
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        code = await asyncio.to_thread(worker.proc.wait, 60)
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert code != 0 and "worker started" not in log
    assert f"SHOPFLOOR_SANDBOX_CGROUP={tmp_path / 'not-a-cgroup'} cannot hold commands" in log, log
    assert "Traceback" not in log
