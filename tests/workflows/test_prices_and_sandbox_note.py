"""The worker prices model calls with its own table (settings override it), and a command run
without a sandbox says so in the run's status, not only in the log."""

from __future__ import annotations

from agent_runs import start_agent
from harness_runs import code_input, git_repo, with_fake

from shopfloor.models.agent_run import Limits
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow

PRICEY = Usage(input_tokens=1000, output_tokens=0)


def _reads(turn: int, body: dict) -> ScriptTurn:
    return ScriptTurn(tool_calls=[("read_file", {"path": "README.md", "offset": 1 + turn})], usage=PRICEY)


async def test_settings_price_override_enforces_the_cost_limit(temporal_client, settings, running_worker, tmp_path):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer(_reads) as fake:
        # 1000 input tokens at $1000 per million: $1 a step.
        priced = with_fake(settings, fake).model_copy(update={"prices": {"house-model": (1000.0, 0.0)}})
        inp = code_input(repo, sha, "openai:house-model").model_copy(update={"limits": Limits(max_cost_usd=1.5)})
        async with running_worker(priced):
            result = await (await start_agent(temporal_client, inp, settings.task_queue)).result()
    assert result.state == "limit_reached"
    assert result.reason == "cost limit reached: $2.0000 of $1.50"
    assert result.cost_usd == 2.0


async def test_unknown_price_means_the_cost_limit_cannot_be_enforced(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer(_reads) as fake:
        inp = code_input(repo, sha, "openai:house-model").model_copy(update={"limits": Limits(max_cost_usd=1.5)})
        async with running_worker(with_fake(settings, fake)):
            result = await (await start_agent(temporal_client, inp, settings.task_queue)).result()
    assert result.state == "limit_reached"
    assert "cannot be enforced" in (result.reason or "") and result.steps == 1


async def test_unsandboxed_command_is_flagged_in_the_run_status(temporal_client, settings, running_worker, tmp_path):
    repo, sha = git_repo(tmp_path / "repo")
    script = [ScriptTurn(tool_calls=[("run_command", {"command": "echo hi"})]), ScriptTurn(content="done")]
    with FakeModelServer(script) as fake:
        unsandboxed = with_fake(settings, fake).model_copy(update={"sandbox": "none"})
        async with running_worker(unsandboxed):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:m"), settings.task_queue)
            result = await handle.result()
            status = await handle.query(AgentWorkflow.status)
    assert result.state == "completed"
    assert any("UNSANDBOXED" in w for w in status.warnings)
