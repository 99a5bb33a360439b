"""AgentWorkflow on a real Temporal dev server, every workflow task replayed (no cache)."""

from __future__ import annotations

import pytest
from agent_runs import activities_in, agent_input, call, record_history, sample_repo, start_agent, write_cassette
from portable_repos import manifest_digests
from temporalio.client import WorkflowFailureError
from temporalio.converter import DataConverter

from shopfloor.blobs import get_json
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.transcript import Manifest, Message
from shopfloor.search_attributes import SHOPFLOOR_AGENT, SHOPFLOOR_REPO, SHOPFLOOR_STAGE
from shopfloor.workflows.agent import AgentWorkflow


async def test_explore_run_answers_and_records_everything(temporal_client, settings, blobs, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    model = write_cassette(
        tmp_path / "c.json",
        [
            {"content": "Looking around.", "tool_calls": [call("list_dir", path="."), call("glob", pattern="**/*.py")]},
            {"content": "", "tool_calls": [call("read_file", path="src/greet.py"), call("grep", pattern="Hello")]},
            {"content": "It greets people: src/greet.py defines greet()."},
        ],
    )
    async with running_worker():
        handle = await start_agent(temporal_client, agent_input(repo, model), settings.task_queue)
        result = await handle.result()
        status = await handle.query(AgentWorkflow.status)
    await record_history(handle, "agent-explore-completed")

    assert result.state == "completed"
    assert result.steps == 3
    assert result.final_answer == "It greets people: src/greet.py defines greet()."
    assert status.state == "completed" and status.final_answer == result.final_answer
    # Calls of one reply run concurrently, so events within a step come in completion order.
    assert sorted((e.step, e.summary) for e in status.events if e.kind == "tool") == [
        (1, "glob '**/*.py'"),
        (1, "list_dir ."),
        (2, "grep 'Hello' in ."),
        (2, "read_file src/greet.py"),
    ]
    assert all(e.ok for e in status.events)

    # The transcript lives in the blob store: goal, 3 replies, 4 tool results.
    manifest = Manifest(messages=await manifest_digests(blobs, result.transcript))
    messages = [Message.model_validate(await get_json(blobs, d)) for d in manifest.messages]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant"]
    assert "return f'Hello, {name}!'" in messages[5].content

    desc = await handle.describe()
    attrs = desc.typed_search_attributes
    assert attrs.get(SHOPFLOOR_AGENT) == "explore"
    assert attrs.get(SHOPFLOOR_REPO) == "local/repo"
    assert attrs.get(SHOPFLOOR_STAGE) == "agent"

    # Every activity carries a human summary in its metadata.
    history = await handle.fetch_history()
    summaries = []
    for _, payload in activities_in(history.events):  # the read-only calls ran as local activities
        summaries.append(DataConverter.default.payload_converter.from_payload(payload, str))
    assert summaries[:2] == ["inspect the sandbox", f"{model} step 1"]  # the environment, once
    assert "read_file src/greet.py" in summaries
    assert len(summaries) == 1 + 3 + 4


async def test_tool_errors_are_results_the_model_reads(temporal_client, settings, blobs, running_worker, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP-SECRET")
    repo = sample_repo(tmp_path / "repo")
    (repo / "link").symlink_to(outside)
    model = write_cassette(
        tmp_path / "c.json",
        [
            {
                "tool_calls": [
                    call("read_file", path="../secret.txt"),
                    call("read_file", path="link"),
                    call("read_file", path="missing.py"),
                    call("read_file"),  # no path: invalid arguments
                    call("write_file", path="x", content="y"),  # not an explore tool
                ]
            },
            {"content": "I could not read those."},
        ],
    )
    async with running_worker():
        handle = await start_agent(temporal_client, agent_input(repo, model), settings.task_queue)
        result = await handle.result()
        status = await handle.query(AgentWorkflow.status)
    await record_history(handle, "agent-tool-errors")

    assert result.state == "completed"
    # Events come in completion order (the calls ran concurrently): look them up by summary.
    tool_events = {e.summary: e for e in status.events if e.kind == "tool"}
    assert len(tool_events) == 5 and not any(e.ok for e in tool_events.values())
    assert "outside the workspace" in tool_events["read_file ../secret.txt"].preview
    assert "outside the workspace" in tool_events["read_file link"].preview
    assert "does not exist" in tool_events["read_file missing.py"].preview
    assert "path" in tool_events["read_file {}"].preview  # says which argument is wrong
    assert "unknown tool 'write_file'" in tool_events["write_file x (1 line)"].preview
    manifest = Manifest(messages=await manifest_digests(blobs, result.transcript))
    for digest in manifest.messages:
        assert b"TOP-SECRET" not in await blobs.get(digest)


async def test_step_limit_ends_the_run_as_limit_reached(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    model = write_cassette(tmp_path / "c.json", [{"tool_calls": [call("list_dir", path=".")]}] * 10)
    async with running_worker():
        handle = await start_agent(temporal_client, agent_input(repo, model, max_steps=3), settings.task_queue)
        result = await handle.result()
    await record_history(handle, "agent-step-limit")
    assert result.state == "limit_reached"
    assert result.steps == 3
    assert "step limit" in (result.reason or "")


async def test_rejected_model_call_fails_the_run_with_a_clear_reason(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    async with running_worker():
        handle = await start_agent(
            temporal_client, agent_input(repo, f"scripted:{tmp_path / 'no-such-cassette.json'}"), settings.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        status = await handle.query(AgentWorkflow.status)
    await record_history(handle, "agent-model-rejected")
    assert status.state == "failed"
    assert "no-such-cassette.json" in (status.reason or "")
    assert "no-such-cassette.json" in str(failure.value.cause)


@pytest.mark.fast
def test_agent_result_defaults_keep_old_histories_readable():
    # New fields must default: a result recorded before a field existed still loads.
    assert AgentResult.model_validate({"state": "completed", "steps": 1}).usage.input_tokens == 0
