"""Child processes shopfloor starts on its own Python import the installed shopfloor, whatever their
working directory: started inside a checkout of the source, or inside a repository that holds a
`shopfloor/` folder (or a `socket.py`), they never import those.

Each test starts the child in a folder holding decoys that raise when imported, and shows the
child did its work: the bench's and the crash tests' `shopfloor worker` process runs an agent to
its answer; the sandbox's first process (`sandbox_init`) runs a command; the sandbox's network
forwarder hands a command its proxy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_runs import agent_input, sample_repo, start_agent
from worker_process import WorkerProcess, worker_env_for

from shopfloor.activities.sandbox import resolve_mode, run_command
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.models.agent_run import CommandPolicy
from shopfloor.testing import FakeModelServer, ScriptTurn

DECOY = "raise ImportError('DECOY {name} imported from the working directory')\n"


def with_decoys(folder: Path) -> Path:
    """`folder` with a `shopfloor` package and a `socket` module that fail when imported."""
    (folder / "shopfloor").mkdir(parents=True)
    (folder / "shopfloor" / "__init__.py").write_text(DECOY.format(name="shopfloor"))
    (folder / "socket.py").write_text(DECOY.format(name="socket"))
    return folder


async def test_a_worker_process_started_beside_a_decoy_shopfloor_runs_the_installed_one(
    temporal_client, temporal_server, settings, tmp_path, monkeypatch
):
    # The working directory the bench or a crash test was started from: a source checkout whose
    # `shopfloor/` folder is not the package (its `agents` live elsewhere).
    monkeypatch.chdir(with_decoys(tmp_path / "checkout"))
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer([ScriptTurn(content="It greets people.")]) as fake:
        worker = WorkerProcess(worker_env_for(temporal_server, settings, fake), tmp_path / "worker.log")
        try:
            await worker.wait_polling(temporal_client, settings.task_queue)  # raises with its log if it exits
            handle = await start_agent(temporal_client, agent_input(repo, "openai:fake-model"), settings.task_queue)
            result = await asyncio.wait_for(handle.result(), timeout=120)
        finally:
            worker.stop()
    log = worker.log_tail(-1)
    assert "DECOY" not in log, log
    assert result.state == "completed" and result.final_answer == "It greets people.", log
    assert len(fake.requests) == 1


@pytest.fixture
def decoy_workspace(tmp_path: Path) -> Path:
    return with_decoys(tmp_path / "ws")


async def test_the_sandboxs_first_process_started_in_a_workspace_with_decoys_runs_the_installed_one(
    decoy_workspace,
):
    # Without bubblewrap the first process starts in the workspace itself.
    out = await run_command(decoy_workspace, "echo ran", mode="none", policy=CommandPolicy(timeout_s=60))
    assert "DECOY" not in out.output, out.output
    assert out.exit_code == 0 and out.output.strip().splitlines()[-1] == "ran", out.output


async def test_the_network_forwarder_started_in_a_workspace_with_decoys_serves_the_command(decoy_workspace):
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")
    policy = CommandPolicy(timeout_s=60, network=True)
    out = await run_command(
        decoy_workspace, 'echo "proxy=$HTTP_PROXY"', mode="bwrap", policy=policy, network=SandboxNetwork()
    )
    assert "DECOY" not in out.output, out.output
    assert out.exit_code == 0 and out.output.strip().splitlines()[-1].startswith("proxy=http://127.0.0.1:"), out.output
