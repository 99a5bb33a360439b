"""Limits with salvage, approvals, operator controls and continue-as-new, through real runs on the
dev server with every workflow task replayed (no cache); the approval timeout at its real default
(an hour) runs on the time-skipping test server instead.

The model is FakeModelServer over real HTTP (its request log is what the model saw), except for
the continue-as-new run, which uses a scripted cassette. The `code` agent works on a portable
workspace (a real git repository in tmp_path); a salvaged ref is checked by rebuilding the
checkout from it, as a fresh worker would.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta

import pytest
from agent_runs import call, record_history, sample_repo, start_agent, write_cassette
from harness_runs import (
    activity_types,
    checkout,
    code_input,
    explore_input,
    git_repo,
    last_tool_message,
    status_of,
    user_texts,
    wait_for,
    wire,
    with_fake,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from workflow_clock import timer_waits

import shopfloor.activities.providers.openai_chat  # noqa: F401  (its seconds of import stay out of timings)
from shopfloor.models.agent_run import ApprovalDecision, Limits, LimitsRaise
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow


def writer_turns(n: int, usage: Usage | None = None) -> list[ScriptTurn]:
    """n steps that each write notes/step<k>.txt, then a final answer."""
    turns = [
        ScriptTurn(
            content=f"Writing step {k}.",
            tool_calls=[("write_file", {"path": f"notes/step{k}.txt", "content": f"step {k}\n"})],
            usage=usage,
        )
        for k in range(1, n + 1)
    ]
    return turns + [ScriptTurn(content="All written.", usage=usage)]


async def assert_salvaged(result, blobs, root, base_sha: str) -> None:
    """The result's workspace ref rebuilds to a checkout holding every write of every step run."""
    ref = result.workspace
    assert ref is not None and ref.path is None, "a portable run's result must name its last checkpoint"
    assert ref.base_sha == base_sha and ref.patch_digest is not None
    tree = await checkout(ref, blobs, root)
    written = sorted(p.name for p in (tree / "notes").iterdir())
    steps = result.steps
    assert written == sorted(f"step{k}.txt" for k in range(1, steps + 1))
    for k in range(1, steps + 1):
        assert (tree / "notes" / f"step{k}.txt").read_text() == f"step {k}\n"
    assert (tree / "README.md").read_text().startswith("# sample")


# -- limits, each ending limit_reached with the work salvaged --------------------------------

LIMITS = {
    "steps": dict(
        limits=Limits(max_steps=3),
        model="openai:fake",
        usage=None,
        latency=0.0,
        reason=r"step limit reached: 3 of 3 steps",
        steps=3,
    ),
    "tokens": dict(
        limits=Limits(max_tokens=2_500),
        model="openai:fake",
        usage=Usage(input_tokens=1_000, output_tokens=100),
        latency=0.0,
        reason=r"token limit reached: 3,300 of 2,500 tokens",
        steps=3,
    ),
    # gpt-4o-mini: $0.15 per million input tokens, so $0.15 a step.
    "cost": dict(
        limits=Limits(max_cost_usd=0.40),
        model="openai:gpt-4o-mini",
        usage=Usage(input_tokens=1_000_000, output_tokens=0),
        latency=0.0,
        reason=r"cost limit reached: \$0\.4500 of \$0\.40",
        steps=3,
    ),
    # A second a model call: the 2.5 s run out after a few steps (how many depends on the machine).
    "wall": dict(
        limits=Limits(max_wall_s=2.5),
        model="openai:fake",
        usage=None,
        latency=1.0,
        reason=r"wall-time limit reached: \d+s of 2s",
        steps=None,
    ),
}


@pytest.mark.parametrize("kind", list(LIMITS))
async def test_each_limit_ends_the_run_as_limit_reached_with_its_edits_salvaged(
    kind, temporal_client, settings, blobs, running_worker, tmp_path
):
    case = LIMITS[kind]
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, case["model"], limits=case["limits"])
    with FakeModelServer(writer_turns(10, case["usage"]), latency_s=case["latency"]) as fake:
        async with running_worker(with_fake(settings, fake)):
            started = time.monotonic()
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result = await handle.result()
            elapsed = time.monotonic() - started
            status = await status_of(handle)
        requests = fake.requests
    if kind == "steps":
        await record_history(handle, "harness-limit-reached-salvage")

    assert result.state == "limit_reached", result
    assert re.fullmatch(case["reason"], result.reason or ""), result.reason
    assert status.state == "limit_reached" and status.reason == result.reason
    if case["steps"] is not None:
        assert result.steps == case["steps"]
    else:
        assert 1 <= result.steps <= 3 and elapsed >= 2.5
    assert len(requests) == result.steps  # no step started past the limit
    await assert_salvaged(result, blobs, tmp_path / "verify", sha)
    assert status.workspace == result.workspace
    if kind == "cost":
        assert result.cost_usd == pytest.approx(0.45)
    if kind == "tokens":
        assert (result.usage.input_tokens, result.usage.output_tokens) == (3_000, 300)


async def test_raise_limits_lets_a_run_go_past_its_step_limit(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    turns = [ScriptTurn.tool("read_file", path="README.md", offset=1, limit=k) for k in range(1, 5)]
    turns.append(ScriptTurn(content="Read it four times over."))
    inp = explore_input(repo, "openai:fake", limits=Limits(max_steps=2))
    with FakeModelServer(turns, latency_s=0.5) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            await wait_for(lambda: fake.requests, what="the first model call")
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(AgentWorkflow.raise_limits, LimitsRaise())
            assert "name at least one limit to raise" in str(refused.value.cause)
            limits = await handle.execute_update(AgentWorkflow.raise_limits, LimitsRaise(max_steps=10))
            result = await handle.result()
            status = await status_of(handle)

    assert limits.max_steps == 10
    assert result.state == "completed" and result.steps == 5, result
    assert status.max_steps == 10


# -- approvals --------------------------------------------------------------------------------

INSTALL = ScriptTurn.tool("run_command", "I need requests.", command="pip install requests")


async def pending_approval(handle):
    status = await wait_for(
        lambda: _with_pending(handle), timeout_s=30, what="a call waiting for approval in the status"
    )
    assert len(status.pending) == 1
    return status.pending[0]


async def _with_pending(handle):
    status = await status_of(handle)
    return status if status.pending else None


async def test_approved_call_runs_and_the_model_reads_its_result(temporal_client, settings, running_worker, tmp_path):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer([INSTALL, ScriptTurn(content="Tried to install it.")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            pending = await pending_approval(handle)
            assert pending.tool == "run_command" and pending.step == 1
            assert pending.summary.startswith("run_command") and "pip install requests" in pending.summary
            assert "installs Python packages" in pending.reason
            assert len(fake.requests) == 1  # the run waits: no next model call meanwhile
            # A call id that is not waiting is refused by the validator; the right one is taken.
            with pytest.raises(WorkflowUpdateFailedError) as wrong:
                await handle.execute_update(AgentWorkflow.approve, ApprovalDecision(call_id="call_nope"))
            assert "no call 'call_nope' is waiting for approval" in str(wrong.value.cause)
            approved = await handle.execute_update(AgentWorkflow.approve, ApprovalDecision(note="go ahead"))
            assert approved == pending.call_id
            # Nothing is waiting any more: a second approval is refused, not silently taken.
            with pytest.raises(WorkflowUpdateFailedError) as twice:
                await handle.execute_update(AgentWorkflow.approve, ApprovalDecision())
            assert "no call is waiting for approval" in str(twice.value.cause)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests
    await record_history(handle, "harness-approval-granted")

    assert result.state == "completed" and result.steps == 2, result
    assert "run_command" in await activity_types(handle)  # it really ran, as an activity
    # The model reads the command's own outcome (in a sandbox without network pip cannot
    # download anything; whatever it did, it ran and reported an exit code).
    ran = last_tool_message(requests[1])
    assert ran["tool_call_id"] == pending.call_id
    assert re.search(r"exit code \d+", ran["content"]) and "rejected" not in ran["content"]
    assert "requests" in ran["content"]  # pip's own words about it
    assert not status.pending
    assert any(e.summary == f"approved: {pending.summary}" and e.ok for e in status.events)


async def test_rejected_call_is_not_run_and_the_model_reads_the_rejection(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer([INSTALL, ScriptTurn(content="Fine, no install.")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            pending = await pending_approval(handle)
            rejected = await handle.execute_update(
                AgentWorkflow.reject, ApprovalDecision(call_id=pending.call_id, note="no new dependencies")
            )
            assert rejected == pending.call_id
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests

    assert result.state == "completed" and result.final_answer == "Fine, no install.", result
    answer = last_tool_message(requests[1])
    assert answer["tool_call_id"] == pending.call_id
    assert answer["content"] == "rejected: no new dependencies (the call was not run)"
    assert "run_command" not in await activity_types(handle)
    event = next(e for e in status.events if e.summary.startswith("rejected:"))
    assert event.summary == f"rejected: {pending.summary}" and not event.ok


async def test_unanswered_approval_times_out_as_a_rejection(temporal_client, settings, running_worker, tmp_path):
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, "openai:fake", approval_timeout_s=2)
    with FakeModelServer([INSTALL, ScriptTurn(content="Nobody answered.")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            pending = await pending_approval(handle)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests
    await record_history(handle, "harness-approval-timed-out")

    assert result.state == "completed" and result.steps == 2, result
    answer = last_tool_message(requests[1])
    assert answer["tool_call_id"] == pending.call_id
    assert answer["content"] == "rejected: no operator answered within 2 s (the call was not run)"
    assert requests[1].started - requests[0].started >= 2.0  # it did wait for an answer
    assert "run_command" not in await activity_types(handle)
    assert not status.pending


async def test_unanswered_approval_at_the_default_timeout_is_rejected_after_an_hour(
    time_skipping_env, time_skipping_settings, time_skipping_worker, tmp_path
):
    # The real default (an hour), on the time-skipping server: the wait is an hour of workflow
    # time, read from the run's own history, not of the test's.
    client = time_skipping_env.client
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, "openai:fake")
    assert inp.approval_timeout_s == 3600
    with FakeModelServer([INSTALL, ScriptTurn(content="Nobody answered.")]) as fake:
        async with time_skipping_worker(with_fake(time_skipping_settings, fake)):
            handle = await start_agent(client, inp, time_skipping_settings.task_queue)
            pending = await pending_approval(handle)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.steps == 2, result
    answer = last_tool_message(requests[1])
    assert answer["tool_call_id"] == pending.call_id
    assert answer["content"] == "rejected: no operator answered within 3600 s (the call was not run)"
    assert "run_command" not in await activity_types(handle)
    timers = await timer_waits(handle)
    assert [t.timeout for t in timers] == [timedelta(hours=1)]
    (wait,) = timers
    assert timedelta(hours=1) <= wait.fired - wait.started < timedelta(hours=1, minutes=1)


async def test_every_asking_call_is_asked_even_when_text_action_ids_repeat(
    temporal_client, settings, running_worker, tmp_path
):
    # Text actions are numbered text_0, text_1, ... in each reply, so two steps' calls share ids:
    # an answer given for one step's call must not answer the next one.
    repo, sha = git_repo(tmp_path / "repo")
    turns = [
        ScriptTurn(content='Action: run_command(command="pip install requests")'),
        ScriptTurn(content='Action: run_command(command="pip install httpx")'),
        ScriptTurn(content="No installs, then."),
    ]
    inp = code_input(repo, sha, "openai:text-only", text_actions=True)
    with FakeModelServer(turns) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            first = await pending_approval(handle)
            await handle.execute_update(AgentWorkflow.reject, ApprovalDecision(note="not requests"))
            second = await wait_for(
                lambda: _pending_at_step(handle, 2), timeout_s=20, what="the second install to be asked about"
            )
            assert (first.call_id, second.call_id) == ("text_0", "text_0")
            assert "pip install httpx" in second.summary
            await handle.execute_update(AgentWorkflow.reject, ApprovalDecision(note="not httpx either"))
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.steps == 3, result
    assert user_texts(requests[1])[-1].endswith("rejected: not requests (the call was not run)")
    assert user_texts(requests[2])[-1].endswith("rejected: not httpx either (the call was not run)")


async def _pending_at_step(handle, step: int):
    status = await status_of(handle)
    return next((p for p in status.pending if p.step == step), None)


# -- pause, resume, steer ---------------------------------------------------------------------


def reading_turns(n: int) -> list[ScriptTurn]:
    paths = ["README.md", "src/greet.py"]
    # Distinct calls (limit differs): the same call three times would trip the doom-loop rule.
    turns = [ScriptTurn.tool("read_file", path=paths[k % 2], limit=10 + k) for k in range(n)]
    return turns + [ScriptTurn(content="It greets people.")]


async def test_paused_run_makes_no_model_call_until_resumed(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer(reading_turns(5), latency_s=0.3) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            await wait_for(lambda: fake.requests, what="the first model call")
            await handle.signal(AgentWorkflow.pause)

            async def parked():
                # The step under way finishes (its call answered, its tools run), then the loop waits.
                s = await status_of(handle)
                done = all(r.completed for r in fake.requests)
                return s.paused and done and any(e.kind == "tool" and e.step == s.step for e in s.events)

            await wait_for(parked, what="the run to park after its current step")
            calls = len(fake.requests)
            await asyncio.sleep(1.5)  # the one fixed wait: show that nothing happens while paused
            assert len(fake.requests) == calls
            status = await status_of(handle)
            assert status.paused and status.state == "running"
            assert calls < 6
            await handle.signal(AgentWorkflow.resume)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.steps == 6, result
    assert len(requests) == 6


async def test_steer_reaches_the_model_as_a_user_message(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer(reading_turns(2), latency_s=1.0) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            # Steer while the first model call is in flight: the commonest moment to steer.
            await wait_for(lambda: fake.requests, what="the first model call")
            await handle.signal(AgentWorkflow.steer, "Focus on src/greet.py, please.")
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed", result
    steered = "Message from the operator: Focus on src/greet.py, please."
    assert steered not in user_texts(requests[0])
    # Given once, in the next request, after that step's tool result.
    ms = wire(requests[1])
    assert ms[-2]["role"] == "tool" and ms[-1] == {"role": "user", "content": steered}
    assert user_texts(requests[2]).count(steered) == 1


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_signal_ends_the_run_as_cancelled_with_its_last_checkpoint(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer(writer_turns(20), latency_s=0.3) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)

            async def two_writes():
                s = await status_of(handle)
                return s.workspace is not None and s.workspace.patch_digest and s.step >= 2

            await wait_for(two_writes, what="two steps of edits")
            await handle.signal(AgentWorkflow.cancel, "the operator stopped it")
            result = await handle.result()
            status = await status_of(handle)
    await record_history(handle, "harness-cancelled")

    assert result.state == "cancelled" and result.reason == "the operator stopped it", result
    assert 2 <= result.steps < 20
    assert status.state == "cancelled"
    await assert_salvaged(result, blobs, tmp_path / "verify", sha)


async def test_cancel_signal_while_waiting_for_approval_refuses_the_call_and_cancels(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer([INSTALL, ScriptTurn(content="never asked")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            pending = await pending_approval(handle)
            await handle.signal(AgentWorkflow.cancel)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests

    assert result.state == "cancelled" and result.reason == "cancelled by an operator", result
    assert len(requests) == 1 and result.steps == 1
    assert "run_command" not in await activity_types(handle)
    assert any(e.summary == f"rejected: {pending.summary}" for e in status.events)


async def test_cancel_signal_also_releases_a_later_asking_call_of_the_same_reply(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    both = ScriptTurn(
        content="Two installs.",
        tool_calls=[
            ("run_command", {"command": "pip install requests"}),
            ("run_command", {"command": "pip install httpx"}),
        ],
    )
    with FakeModelServer([both, ScriptTurn(content="never asked")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            # The default approval timeout is an hour: the second call must not wait for it.
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            await pending_approval(handle)
            await handle.signal(AgentWorkflow.cancel, "stop everything")
            result = await asyncio.wait_for(handle.result(), 20)
            status = await status_of(handle)

    assert result.state == "cancelled" and result.reason == "stop everything", result
    assert "run_command" not in await activity_types(handle)
    refused = sorted(e.summary for e in status.events if e.summary.startswith("rejected:"))
    assert len(refused) == 2 and "pip install httpx" in refused[0] and "pip install requests" in refused[1]
    assert not status.pending


async def test_temporal_cancellation_returns_a_cancelled_result_with_the_last_checkpoint(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer(writer_turns(20), latency_s=1.0) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)

            async def edited_and_calling_the_model():
                if not fake.requests:
                    return False
                s = await status_of(handle)
                last = fake.requests[-1]
                return (
                    s.workspace is not None
                    and s.workspace.patch_digest
                    and not last.completed
                    and time.time() - last.started > 0.2
                )

            # Cancel while a model call (an activity) is in flight, after a first edit.
            await wait_for(edited_and_calling_the_model, what="a first edit and a model call in flight")
            await handle.cancel()
            result = await handle.result()
            desc = await handle.describe()
        requests = fake.requests
    await record_history(handle, "harness-temporal-cancelled")

    assert result.state == "cancelled" and result.reason == "the run was cancelled", result
    assert 1 <= result.steps < 20
    assert result.steps == sum(r.completed for r in requests)  # the interrupted call is not counted
    # The workflow handled the cancellation itself and returned its result.
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    await assert_salvaged(result, blobs, tmp_path / "verify", sha)


async def test_temporal_cancellation_while_waiting_for_approval_returns_a_cancelled_result(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer([INSTALL, ScriptTurn(content="never asked")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            await pending_approval(handle)
            await handle.cancel()
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests

    assert result.state == "cancelled" and result.reason == "the run was cancelled", result
    assert len(requests) == 1 and "run_command" not in await activity_types(handle)
    assert not status.pending


# -- continue-as-new --------------------------------------------------------------------------

CAN_STEPS = 12


async def test_long_run_continues_as_new_and_carries_its_counters(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    paths = ["README.md", "src/greet.py"]
    usage = {"input_tokens": 10, "output_tokens": 1}
    turns = [
        {"tool_calls": [call("read_file", path=paths[k % 2], limit=10 + k)], "usage": usage} for k in range(CAN_STEPS)
    ]
    model = write_cassette(tmp_path / "c.json", turns + [{"content": "It greets people.", "usage": usage}])
    inp = explore_input(repo, model, max_history_events=40)
    async with running_worker():
        handle = await start_agent(temporal_client, inp, settings.task_queue)
        result = await handle.result()  # follows the chain of runs
        latest = temporal_client.get_workflow_handle(handle.id)
        status = await latest.query(AgentWorkflow.status)
        desc = await latest.describe()
    await record_history(latest, "harness-continued-as-new")

    assert result.state == "completed" and result.final_answer == "It greets people.", result
    # Steps and usage carried across the runs: every step counted once.
    assert result.steps == CAN_STEPS + 1
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10 * (CAN_STEPS + 1), CAN_STEPS + 1)

    # Walk the chain of runs from the first: each but the last ends in ContinuedAsNew.
    run_id, runs = handle.first_execution_run_id, []
    while run_id:
        history = await temporal_client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        runs.append(run_id)
        last = history.events[-1]
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        else:
            assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
            run_id = None
    assert len(runs) >= 2 and runs[-1] == desc.run_id != handle.first_execution_run_id

    # The live event sequence continues across runs: one model event a step, one tool event a call.
    assert status.step == CAN_STEPS + 1 and status.state == "completed"
    assert status.events[-1].seq == 2 * CAN_STEPS + 1
    assert status.events[0].seq > 1  # the last run's view starts where the previous one ended
    seqs = [e.seq for e in status.events]
    assert seqs == list(range(seqs[0], seqs[-1] + 1))
