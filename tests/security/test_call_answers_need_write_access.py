"""Only a person with write access answers a tool call that waits for an operator.

The attack: the fix agent wants to run `pip install requests` (the judge asks an operator), and the
progress comment says how to answer. Anyone able to comment on the issue (here bob, who can only
read) writes `/shopfloor approve-call <id>` to let the install run. The command is refused with
one reply, the call keeps waiting and nothing runs; a maintainer's `approve-call` then lets it
run. End to end: simulator, webhook edge, worker, Temporal.
"""

from __future__ import annotations

import asyncio

from agent_runs import call
from factory_runs import APPROVE, POLICY, TRIAGE_TURNS, approve_and_finish, assert_merged, factory, fix_turns
from waiting import DEADLINE_S, query_until

from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.models.inbox_state import InboxSummary

INSTALL = "pip install requests"


async def waits_of(f) -> list[CallWait]:
    return await f.handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])


async def test_a_reader_cannot_approve_a_waiting_call(simulator, settings, running_worker, temporal_client, tmp_path):
    read, edit, test, submit = fix_turns()
    fix = [read, edit, {"tool_calls": [call("run_command", command=INSTALL)]}, test, submit]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while not (waits := await waits_of_started(f)):
            assert asyncio.get_running_loop().time() < deadline, "the install never waited for an answer"
            await asyncio.sleep(0.3)
        (wait,) = waits
        fix_run = temporal_client.get_workflow_handle(wait.workflow_id)

        f.comment(number, f"/shopfloor approve-call {wait.call_id}", "bob")
        inbox = await query_until(f.handle, "inbox", InboxSummary, lambda s: s.commands_refused, "bob's command")
        assert [(r.name, r.sender, r.reason) for r in inbox.commands_refused] == [
            ("approve-call", "bob", "needs write access")
        ]
        assert await waits_of(f) == [wait]
        child = await fix_run.query("status", result_type=AgentStatus)
        assert [p.call_id for p in child.pending] == [wait.call_id]
        assert not any(e.summary.startswith(("approved", "rejected")) for e in child.events)

        f.comment(number, f"/shopfloor approve-call {wait.call_id}", "maria")
        outcome = await approve_and_finish(f, number)
        child = await fix_run.query("status", result_type=AgentStatus)

    assert_merged(f, number, outcome)
    replies = [c["body"] for c in f.get(f"/issues/{number}/comments") if "approve-call" in c["body"]]
    refusals = [b for b in replies if "needs write access" in b]
    assert len(refusals) == 1 and "\n@bob `/shopfloor approve-call` needs write access" in refusals[0]
    assert not any("did nothing" in b for b in replies)
    approved = [e.summary for e in child.events if e.summary.startswith(("approved", "rejected"))]
    assert approved == [f"approved: {wait.summary}"]  # by maria, after bob's attempt did nothing
    assert [e.summary for e in child.events].count(wait.summary) == 1  # then it ran, once


async def waits_of_started(f) -> list[CallWait]:
    try:
        return await waits_of(f)
    except Exception:  # the run has not started yet
        return []
