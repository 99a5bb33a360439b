"""`shopfloor agent code` on a git checkout, and the operator controls from the command line:
the run edits a portable copy (never the user's files) and pauses for approval of an install."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest_asyncio
from agent_runs import call, write_cassette
from cli_runs import arun_cli, cli_env, invoke_cli, one_line, wait_until
from worker_process import WorkerProcess

from shopfloor.workflows.agent import AgentWorkflow


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest_asyncio.fixture
async def setup(tmp_path, temporal_server):
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "init")
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=f"test-code-{uuid.uuid4().hex[:10]}",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
        SHOPFLOOR_MAX_CACHED_WORKFLOWS="0",
    )
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        yield repo, env
    finally:
        worker.stop()


async def test_code_agent_edits_a_copy_and_hands_back_a_patch(setup, tmp_path):
    repo, env = setup
    model = write_cassette(
        tmp_path / "fix.json",
        [
            {"tool_calls": [call("edit_file", path="calc.py", old="a - b", new="a + b")]},
            {"content": "add() now adds."},
        ],
    )
    run = await arun_cli(
        ["agent", "code", "--repo", str(repo), "--goal", "fix add", "--model", model], env, timeout_s=120
    )
    assert run.returncode == 0, str(run)
    assert "add() now adds." in run.stdout
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("changes: git -C"))
    patch = line.split()[-1]
    assert "a - b" in (repo / "calc.py").read_text()  # the user's checkout is untouched
    git(repo, "apply", patch)
    assert "a + b" in (repo / "calc.py").read_text()


async def test_code_agent_needs_a_git_repository(temporal_server, tmp_path):
    # In this process and with no worker: the refusal comes before anything is started.
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=f"test-code-{uuid.uuid4().hex[:10]}",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    run = await asyncio.to_thread(invoke_cli, ["agent", "code", "--repo", str(plain), "--goal", "x"], env)
    assert run.returncode == 2
    assert "git repository" in one_line(run.stderr)


async def test_operator_approves_a_paused_install_from_the_command_line(setup, tmp_path, temporal_client):
    repo, env = setup
    model = write_cassette(
        tmp_path / "install.json",
        [
            {"tool_calls": [call("run_command", command="pip install requests")]},
            {"content": "tried to install"},
        ],
    )
    started = await arun_cli(
        ["agent", "code", "--repo", str(repo), "--goal", "install", "--model", model, "--detach"], env
    )
    assert started.returncode == 0, str(started)
    workflow_id = started.stdout.strip()
    handle = temporal_client.get_workflow_handle_for(AgentWorkflow.run, workflow_id)

    async def waiting() -> bool:
        try:
            return bool((await handle.query(AgentWorkflow.status)).pending)
        except Exception:
            return False

    await wait_until(waiting, 60, "the run to wait for approval")
    status = await arun_cli(["status", workflow_id], env)
    assert status.returncode == 0
    nothing = await arun_cli(["approve", workflow_id, "--call", "no-such-call"], env)
    assert nothing.returncode == 1 and "no call 'no-such-call' is waiting" in one_line(nothing.stderr)

    approved = await arun_cli(["approve", workflow_id, "--note", "ok"], env)
    assert approved.returncode == 0, str(approved)
    assert approved.stdout.startswith("approved call_1_0")
    result = await handle.result()
    assert result.state == "completed"
    final = await handle.query(AgentWorkflow.status)
    ran = [e for e in final.events if e.kind == "tool" and "pip install" in e.summary]
    # The approved command ran (and, with no network in the sandbox, failed to download).
    assert any(e.summary.startswith("approved") for e in ran)
    assert any(e.summary.startswith("run_command") for e in ran)
