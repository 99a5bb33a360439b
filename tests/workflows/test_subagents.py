"""Subagents through real runs (real dev server, every workflow task replayed, the model a fake
OpenAI-wire server): a fix agent delegates two questions in one reply; each starts a read-only
child AgentWorkflow on the fix agent's workspace, the two run at once, and the fix agent's next
request holds their answers and nothing else of their work. Their tokens count in the parent's.
Cancelling the parent, through Temporal or with the operator's cancel, cancels a running child.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_runs import record_history, start_agent
from harness_runs import code_input, git_repo, tool_messages, wait_for, wire, with_fake
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from shopfloor.models.agent_run import AgentResult
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn

FILE_TEXT = "return f'Hello, {name}!'"  # in src/greet.py: a child reads it, the parent must not
ANSWERS = {
    "Where is greet defined?": "greet is defined in src/greet.py, line 1. ANSWER-ONE",
    "What does the README say?": "The README says it is a tiny package that greets people. ANSWER-TWO",
}
FIX = {"pr_title": "Nothing", "pr_body": "Fixes #1", "summary": "Asked around.", "tests_command": "true"}
PARENT_USAGE = Usage(input_tokens=100, output_tokens=10)
CHILD_USAGE = Usage(input_tokens=1000, output_tokens=50)


def role_of(body: dict) -> str:
    system = json.dumps(body["messages"][0])
    return "explore" if "You are `explore`" in system else "parent"


def question_of(body: dict) -> str:
    goal = json.dumps(body["messages"][1])
    (question,) = [q for q in ANSWERS if q in goal]
    return question


def answer(index: int, body: dict) -> ScriptTurn:
    done = sum(m["role"] == "assistant" for m in body["messages"])
    if role_of(body) == "explore":
        if done == 0:
            path = "src/greet.py" if "greet" in question_of(body) else "README.md"
            return ScriptTurn(tool_calls=[("read_file", {"path": path})], usage=CHILD_USAGE)
        return ScriptTurn(content=ANSWERS[question_of(body)], usage=CHILD_USAGE)
    if done == 0:
        calls = [("delegate", {"question": q, "max_steps": 5}) for q in ANSWERS]
        return ScriptTurn(content="Asking two questions at once.", tool_calls=calls, usage=PARENT_USAGE)
    return ScriptTurn(tool_calls=[("submit", FIX)], usage=PARENT_USAGE)


def parent_requests(fake: FakeModelServer) -> list[LoggedRequest]:
    return [r for r in fake.requests if role_of(r.body) == "parent"]


def tool_names(request: LoggedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools") or []]


async def test_a_fix_agent_delegates_and_reads_back_only_the_subagents_answers(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, "openai:fake", goal="Fix issue #1.").model_copy(update={"agent": "fix"})
    with FakeModelServer(answer) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result: AgentResult = await handle.result()
            history = await handle.fetch_history()
            children = [
                e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
            ]
            child_results = [
                await temporal_client.get_workflow_handle(c, result_type=AgentResult).result() for c in children
            ]
            child_inputs = [
                json.loads(
                    (await temporal_client.get_workflow_handle(c).fetch_history())
                    .events[0]
                    .workflow_execution_started_event_attributes.input.payloads[0]
                    .data
                )
                for c in children
            ]
        requests = fake.settled_requests()
    await record_history(handle, "subagents")

    assert result.state == "completed" and result.output is not None, result  # it submitted
    parents = parent_requests(fake)
    assert len(parents) == 2 and len(requests) == 2 + 2 * 2  # each child: a read, then its answer
    # The parent's next request: the two answers as the delegate calls' results, nothing else of the
    # children's work (not the file a child read, not a child's own tool call).
    results = tool_messages(parents[1])
    assert [m["content"].split("\n\n[subagent")[0] for m in results] == list(ANSWERS.values())
    second = json.dumps([m for m in wire(parents[1]) if m["role"] != "system"])  # the prompt names tools
    assert FILE_TEXT not in second and "read_file" not in second and "tiny package that greets people\\n" not in second
    # Two children, started together (both starts come before either ends), each a child AgentWorkflow.
    kinds = [e.event_type for e in history.events]
    started = [i for i, k in enumerate(kinds) if k == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]
    ended = [i for i, k in enumerate(kinds) if k == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED]
    assert len(started) == 2 and len(ended) == 2 and max(started) < min(ended)
    assert sorted(children) == sorted(f"{handle.id}/sub-1-{c['id']}" for c in _calls(parents[1]))
    assert all(r.state == "completed" and r.steps == 2 for r in child_results)
    # A child is the read-only explore agent, one level down, on the parent's workspace, with its own
    # step budget; it is not offered `delegate` (depth is bounded).
    assert {c["agent"] for c in child_inputs} == {"explore"} and {c["depth"] for c in child_inputs} == {1}
    assert all(c["limits"]["max_steps"] == 5 and c["workspace"]["base_sha"] == sha for c in child_inputs)
    assert "delegate" in tool_names(parents[0])
    assert all("delegate" not in tool_names(r) for r in requests if role_of(r.body) == "explore")
    # The children's tokens count in the parent's spending.
    child_tokens = sum(r.usage.input_tokens + r.usage.output_tokens for r in child_results)
    assert child_tokens == 4 * (CHILD_USAGE.input_tokens + CHILD_USAGE.output_tokens)
    parent_tokens = 2 * (PARENT_USAGE.input_tokens + PARENT_USAGE.output_tokens)
    assert result.usage.input_tokens + result.usage.output_tokens == parent_tokens + child_tokens


def _calls(request: LoggedRequest) -> list[dict]:
    return [c for m in wire(request) for c in m.get("tool_calls") or []]


def holding(fake_ref: list[FakeModelServer]):
    """The parent delegates once; the child's first answer is held mid-stream (it keeps working)."""

    def answer(index: int, body: dict) -> ScriptTurn:
        if role_of(body) == "explore":
            fake_ref[0].hold_streams(1)
            return ScriptTurn(content="Reading the repository carefully, one file after another.")
        return ScriptTurn(tool_calls=[("delegate", {"question": "Where is greet defined?"})])

    return answer


@pytest.mark.parametrize("how", ["temporal", "operator"])
async def test_cancelling_the_parent_cancels_its_running_subagent(
    temporal_client, settings, running_worker, tmp_path, how
):
    repo, sha = git_repo(tmp_path / "repo")
    ref: list[FakeModelServer] = []
    with FakeModelServer(holding(ref)) as fake:
        ref.append(fake)
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            child_id = f"{handle.id}/sub-1-"

            async def child_held() -> bool:
                return any(r.held and role_of(r.body) == "explore" for r in fake.requests)

            await wait_for(child_held, 60, "the subagent's model call to be held")
            history = await handle.fetch_history()
            (child,) = [
                e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
            ]
            if how == "temporal":
                await handle.cancel()
            else:
                await handle.signal("cancel", "the operator stopped it")
            result: AgentResult = await asyncio.wait_for(handle.result(), 60)
            child_handle = temporal_client.get_workflow_handle(child, result_type=AgentResult)
            child_result = await asyncio.wait_for(child_handle.result(), 60)
            described = await child_handle.describe()
            fake.release()
    assert child.startswith(child_id)
    assert result.state == "cancelled", result
    assert child_result.state == "cancelled", child_result
    assert described.status == WorkflowExecutionStatus.COMPLETED  # ended by itself, with its checkpoint
