"""Provider failures follow Temporal's retry semantics through a real run: 429 waits out
Retry-After, 5xx retries, 401 fails the run at once with a clear reason."""

from __future__ import annotations

import pytest
from agent_runs import agent_input, sample_repo, start_agent
from temporalio.client import WorkflowFailureError

from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow


def _with_fake(settings, fake: FakeModelServer):
    return settings.model_copy(update={"openai_base_url": fake.openai_base_url, "openai_api_key": None})


async def test_rate_limit_is_retried_after_retry_after(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer([ScriptTurn(content="fine")]) as fake:
        fake.fail_next(429, times=1, retry_after=3)
        fake.fail_next(503, times=1)
        async with running_worker(_with_fake(settings, fake)):
            handle = await start_agent(temporal_client, agent_input(repo, "openai:m"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.final_answer == "fine"
    assert [r.status for r in requests] == [429, 503, 200]
    # Temporal waited the provider's Retry-After (3 s), not its own 1 s initial backoff.
    assert requests[1].started - requests[0].started >= 2.9


async def test_unauthorized_fails_the_run_without_retrying(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer([ScriptTurn(content="never")]) as fake:
        fake.fail_next(401, times=5)
        async with running_worker(_with_fake(settings, fake)):
            handle = await start_agent(temporal_client, agent_input(repo, "openai:m"), settings.task_queue)
            with pytest.raises(WorkflowFailureError):
                await handle.result()
            status = await handle.query(AgentWorkflow.status)
        requests = fake.requests

    assert len(requests) == 1  # non-retryable: one attempt only
    assert status.state == "failed"
    assert "401" in (status.reason or "") and "OPENAI_API_KEY" in (status.reason or "")


async def test_truncated_response_is_retried_and_the_run_completes(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer([ScriptTurn(content="whole answer")]) as fake:
        fake.truncate_next(times=1)
        async with running_worker(_with_fake(settings, fake)):
            handle = await start_agent(temporal_client, agent_input(repo, "openai:m"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests
    assert result.final_answer == "whole answer"
    assert len(requests) == 2 and not requests[0].completed and requests[1].completed


async def test_malformed_tool_arguments_are_an_error_the_model_corrects(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    script = [
        ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments='{"path": "README.md"')]),  # cut JSON
        ScriptTurn.tool("read_file", path="README.md"),
        ScriptTurn(content="read it"),
    ]
    with FakeModelServer(script) as fake:
        async with running_worker(_with_fake(settings, fake)):
            handle = await start_agent(temporal_client, agent_input(repo, "openai:m"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.final_answer == "read it"
    # The model was told, in the tool result of its malformed call, what was wrong...
    first_result = next(m for m in requests[1].body["messages"] if m["role"] == "tool")
    assert "error" in first_result["content"].lower() and "json" in first_result["content"].lower()
    # ...and its corrected call ran.
    second_result = [m for m in requests[2].body["messages"] if m["role"] == "tool"][-1]
    assert "A tiny package that greets people." in second_result["content"]
