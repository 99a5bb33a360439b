"""The repository's `approval_timeout_minutes` bounds how long a tool call waits for an operator:
the progress comment says when it will be refused, and it is refused then, in workflow time on
Temporal's time-skipping test server (the simulator, the webhook edge and the worker are real).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agent_runs import call
from factory_runs import APPROVE, POLICY, TRIAGE_TURNS, factory, fix_turns
from waiting import DEADLINE_S
from workflow_clock import timer_waits

from shopfloor.models.agent_run import AgentResult, AgentStatus
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait

INSTALL = "pip install requests"


async def test_an_unanswered_call_is_refused_after_the_policys_approval_timeout(
    simulator, time_skipping_env, time_skipping_settings, time_skipping_worker, tmp_path
):
    client = time_skipping_env.client
    read, edit, test, submit = fix_turns()
    fix = [read, edit, {"tool_calls": [call("run_command", command=INSTALL)]}, test, submit]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    policy = POLICY + "approval_timeout_minutes: 7\n"
    async with factory(simulator, time_skipping_settings, time_skipping_worker, client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while not (waits := await _waits(f)):
            assert asyncio.get_running_loop().time() < deadline, "the install never waited for an answer"
            await asyncio.sleep(0.3)
        (wait,) = waits
        assert wait.until - wait.since == timedelta(minutes=7)
        while f"refused at {wait.until:%Y-%m-%d %H:%M} UTC" not in (body := _progress(f, number)):
            assert asyncio.get_running_loop().time() < deadline, f"the comment never showed the wait: {body}"
            await asyncio.sleep(0.3)

        fix_run = client.get_workflow_handle(wait.workflow_id, result_type=AgentResult)
        # Nobody answers: skip to just past the refusal. Only that far: the server's clock stops
        # while any activity is pending, so skipping further would have this one call wait, in
        # real time, for the rest of the pipeline to run (a call the client gives up on at 30 s).
        past_refusal = wait.until + timedelta(seconds=1) - await time_skipping_env.get_current_time()
        await time_skipping_env.sleep(max(past_refusal, timedelta(seconds=1)))
        result = await fix_run.result()
        timers = await timer_waits(fix_run)
        status = await fix_run.query("status", result_type=AgentStatus)
        while "approve-call" in (body := _progress(f, number)):
            assert asyncio.get_running_loop().time() < deadline, f"the wait stayed on the comment: {body}"
            await asyncio.sleep(0.3)
        assert await _waits(f) == []
        f.gh("maria").patch(f"/repos/{f.repo}/issues/{number}", json={"state": "closed"})

    assert result.state == "completed", result
    assert [t.timeout for t in timers] == [timedelta(minutes=7)]
    (timer,) = timers
    assert timedelta(minutes=7) <= timer.fired - timer.started < timedelta(minutes=8)
    refused = [e for e in status.events if e.summary == wait.summary]
    assert [(e.ok, e.preview) for e in refused] == [
        (False, "rejected: no operator answered within 420 s (the call was not run)")
    ]


async def _waits(f) -> list[CallWait]:
    try:
        return await f.handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])
    except Exception:  # the run has not started yet
        return []


def _progress(f, number: int) -> str:
    bodies = [c["body"] for c in f.progress_comments(number)]
    assert len(bodies) <= 1, bodies
    return bodies[0] if bodies else ""
