"""No sandbox means no commands — unless the operator said so — and nothing a command starts
outlives it.

The attack: the command judge is advisory (`$(echo sudo)`, `python3 -c "open('/etc/x','w')"`
pass it); bubblewrap is what contains a command. A worker under SHOPFLOOR_SANDBOX=auto whose
bubblewrap is missing (here: a PATH without it, as a deployment might have) used to run every
command unsandboxed with only a warning. Now the exec tools refuse, and say how an operator opts
in. Under SHOPFLOOR_SANDBOX=none, a daemon a command started in a new session (`setsid`) used to
survive the command, since only its process group was killed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_commands import alive, config_for, new_marker, none_alive, sh
from worker_process import WorkerProcess, worker_env

from shopfloor.activities.sandbox import SandboxConfig

ROOT = Path(__file__).resolve().parents[2]


def exec_tool(tmp_path: Path, tool: str, workspace: Path, arguments: dict, **settings: str) -> dict:
    """One exec tool call in a worker process whose PATH holds no bubblewrap."""
    no_bwrap = tmp_path / "bin-without-bwrap"
    no_bwrap.mkdir(exist_ok=True)
    assert shutil.which("bwrap", path=str(no_bwrap)) is None
    env = {
        "PATH": str(no_bwrap),
        "HOME": str(tmp_path),
        "SHOPFLOOR_DATA_DIR": str(tmp_path / "data"),
        "SHOPFLOOR_SANDBOX": "auto",
        "SHOPFLOOR_LOG_JSON": "true",
        **settings,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.exec_tool_probe", tool, str(workspace), json.dumps(arguments)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "test_x.py").write_text("import pathlib\n\ndef test_x():\n    pathlib.Path('tests-ran').touch()\n")
    return path


@pytest.mark.parametrize(
    ("tool", "arguments", "evidence"),
    [
        (
            "run_command",
            {"command": "python3 -c \"open('written-unsandboxed', 'w')\"; echo $(echo sudo)"},
            "written-unsandboxed",
        ),
        ("run_tests", {"args": "-p no:cacheprovider"}, "tests-ran"),
    ],
)
def test_auto_without_bubblewrap_refuses_exec_tools(tmp_path, ws, tool, arguments, evidence):
    result = exec_tool(tmp_path, tool, ws, arguments)
    assert result["ok"] is False
    assert result["output"].startswith("error: the command was not run")
    assert "bubblewrap is not usable here" in result["output"]
    assert "SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS=true" in result["output"]  # how an operator opts in
    assert "Traceback" not in result["output"]
    assert not (ws / evidence).exists()  # nothing ran


def test_auto_without_bubblewrap_runs_unsandboxed_only_when_the_operator_opted_in(tmp_path, ws):
    result = exec_tool(
        tmp_path,
        "run_command",
        ws,
        {"command": "touch opted-in && echo ran"},
        SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS="true",
    )
    assert result["ok"] is True and result["output"].rstrip().endswith("ran")
    assert "UNSANDBOXED" in result["warning"] and "UNSANDBOXED" in result["output"]
    assert (ws / "opted-in").exists()


@pytest.fixture(params=["cgroup", "watchdog"])
def unsandboxed(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxConfig:
    return config_for(request.param, tmp_path / "scratch", mode="none")


async def test_none_kills_setsid_daemons_when_the_command_ends(unsandboxed, ws):
    marker = new_marker("daemon")
    command = (
        f"setsid bash -c 'exec -a {marker}-a sleep 300' < /dev/null > /dev/null 2>&1 & "
        f"(setsid bash -c '(exec -a {marker}-b sleep 300) &' < /dev/null > /dev/null 2>&1 &) ; "
        f"env -i setsid -f bash -c 'exec -a {marker}-c sleep 300' < /dev/null > /dev/null 2>&1; "
        f"sleep 0.5; pgrep -fc '^{marker}-'"
    )
    out = await sh(ws, command, unsandboxed)
    assert out.exit_code == 0 and out.output.strip() == "3", out  # all three were running
    assert not out.sandboxed and "UNSANDBOXED" in out.sandbox_note
    assert await none_alive(marker), alive(marker)


async def test_none_kills_setsid_daemons_at_the_timeout(unsandboxed, ws):
    marker = new_marker("daemon-timeout")
    command = f"setsid bash -c '(exec -a {marker} sleep 300) &' < /dev/null > /dev/null 2>&1; sleep 300"
    out = await sh(ws, command, unsandboxed, timeout_s=1.5)
    assert out.timed_out
    assert await none_alive(marker), alive(marker)


async def test_a_worker_without_bubblewrap_says_at_start_that_commands_are_refused(temporal_server, tmp_path):
    no_bwrap = tmp_path / "bin-without-bwrap"
    no_bwrap.mkdir()
    env = worker_env(
        PATH=str(no_bwrap),
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE="refusing",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
    )
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 60
        while "worker started" not in worker.log_tail(100_000) and worker.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        lines = [json.loads(line) for line in worker.log.read_text().splitlines() if line.startswith("{")]
    finally:
        worker.stop()
    refused = [line for line in lines if line.get("event") == "commands will be REFUSED"]
    assert refused and "SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS=true" in refused[0]["reason"], lines
    assert next(line for line in lines if line.get("event") == "command limits")["sandbox"] == "refuse"
