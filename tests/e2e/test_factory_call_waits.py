"""A tool call waiting for an operator, seen and answered the way maintainers work: the issue's
progress comment and `shopfloor status` say what waits, for which agent, since and until when and
how to answer; `/shopfloor reject-call <id>` from a writer answers it (the fix agent reads the
refusal and goes on to a merge); a wrong id, a second answer and a redelivered comment each do
nothing but (at most) one reply. A person's pull request shows its review agent's wait on its own
progress comment and takes the answer there. End to end: simulator, webhook edge, worker, Temporal.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta

from agent_runs import call, record_history
from approval_runs import redeliver
from cli_runs import cli_env, invoke_cli
from factory_runs import APPROVE, POLICY, TEST_CMD, TRIAGE_TURNS, approve_and_finish, assert_merged, factory, fix_turns
from temporalio.api.enums.v1 import EventType
from waiting import DEADLINE_S, query_until

from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.models.inbox import pr_workflow_id
from shopfloor.models.inbox_state import InboxSummary

INSTALL = "pip install requests"
FIXED_OPS = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def open_person_pr(f, author: str, branch: str) -> tuple[int, str]:
    """`author` pushes `branch` with calc/ops.py fixed and opens a pull request; (number, head sha)."""
    gh = f.gh(author)
    main = f.get("/branches/main")["commit"]["sha"]
    assert gh.post(f"/repos/{f.repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main}).status_code == 201
    old = f.get("/contents/calc/ops.py", ref=branch)["sha"]
    content = base64.b64encode(FIXED_OPS.encode()).decode()
    put = {"message": "fix add", "content": content, "sha": old, "branch": branch}
    assert gh.put(f"/repos/{f.repo}/contents/calc/ops.py", json=put).status_code in (200, 201)
    pr = {"title": "Make add() add", "head": branch, "base": "main", "body": "add(2, 3) returned -1."}
    resp = gh.post(f"/repos/{f.repo}/pulls", json=pr)
    assert resp.status_code == 201, resp.text
    return resp.json()["number"], resp.json()["head"]["sha"]


def install_then_fix() -> list[dict]:
    read, edit, test, submit = fix_turns()
    return [read, edit, {"tool_calls": [call("run_command", command=INSTALL)]}, test, submit]


def replies(f, number: int) -> list[str]:
    return [c["body"] for c in f.get(f"/issues/{number}/comments") if "did nothing" in c["body"]]


async def progress_saying(f, number: int, text: str, timeout_s: float = DEADLINE_S) -> str:
    """The progress comment once it exists and holds `text`."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        bodies = [c["body"] for c in f.progress_comments(number)]
        assert len(bodies) <= 1, bodies
        if bodies and text in bodies[0]:
            return bodies[0]
        assert asyncio.get_running_loop().time() < deadline, f"the progress comment never said {text!r}: {bodies}"
        await asyncio.sleep(0.3)


async def waits_shown_beside_a_live_view(handle) -> list[int]:
    """Event ids of the run's own comment upserts that ask for an answer, scheduled while a live
    view (the comment's other writer) had not stopped: an edit it rendered before the wait came
    could land over them, and the comment would never ask."""
    live: set[int] = set()
    found = []
    for e in (await handle.fetch_history()).events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            if a.activity_type.name == "live_progress":
                live.add(e.event_id)
            elif a.activity_type.name == "github_upsert_comment" and live:
                if "approve-call" in json.loads(a.input.payloads[0].data)["body"]:
                    found.append(e.event_id)
        for how in ("completed", "failed", "timed_out", "canceled"):
            if e.HasField(field := f"activity_task_{how}_event_attributes"):
                live.discard(getattr(e, field).scheduled_event_id)
    return found


async def waits_of(f) -> list[CallWait]:
    return await f.handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])


async def test_a_waiting_call_is_shown_and_a_maintainer_rejects_it_by_comment(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {
        "triage": TRIAGE_TURNS,
        "fix": install_then_fix(),
        "review": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        fix_run = f"{f.handle.id}/fix-1"
        body = await progress_saying(f, number, "approve-call")

        (wait,) = await waits_of(f)
        assert (wait.workflow_id, wait.agent, wait.step) == (fix_run, "fix", 3)
        assert INSTALL in wait.summary and wait.until - wait.since == timedelta(minutes=60)  # the policy's default
        child = await temporal_client.get_workflow_handle(fix_run).query("status", result_type=AgentStatus)
        assert [p.call_id for p in child.pending] == [wait.call_id]
        cid = wait.call_id
        assert "· waiting" in body.splitlines()[0]
        assert "**Waiting** for an operator to approve or reject a tool call" in body
        assert "**fix** waits for approval of" in body and INSTALL in body
        assert f"since {wait.since:%Y-%m-%d %H:%M} UTC; refused at {wait.until:%Y-%m-%d %H:%M} UTC" in body
        assert f"`/shopfloor approve-call {cid}`" in body and f"`/shopfloor reject-call {cid} <why>`" in body
        assert f"`shopfloor approve {fix_run} --call {cid}`" in body

        env = cli_env(
            SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
            SHOPFLOOR_DATA_DIR=str(tmp_path / "cli"),
        )
        status = await asyncio.to_thread(invoke_cli, ["status", f.handle.id], env)
        assert status.returncode == 0, str(status)
        assert f"waiting   fix · call {cid} · step 3 · " in status.stdout and INSTALL in status.stdout
        assert f"since {wait.since:%Y-%m-%d %H:%M} UTC · refused at {wait.until:%Y-%m-%d %H:%M} UTC" in status.stdout
        assert f"shopfloor approve {fix_run} --call {cid}" in status.stdout
        child_status = await asyncio.to_thread(invoke_cli, ["status", fix_run], env)
        assert f"waiting   fix · call {cid} · step 3 · " in child_status.stdout, str(child_status)

        # A wrong id: one reply, the call still waits.
        f.comment(number, "/shopfloor approve-call call_9_9", "maria")
        await query_until(f.handle, "inbox", InboxSummary, lambda s: len(s.commands_accepted) == 1, "the wrong id")
        assert [w.call_id for w in await waits_of(f)] == [cid]

        f.comment(number, f"/shopfloor reject-call {cid} no new dependencies", "maria")
        await progress_saying(f, number, "**Running**")
        assert await waits_of(f) == []
        rejection = next(
            d
            for d in f.sim.deliveries()
            if d["event"] == "issue_comment" and "reject-call" in (d["payload"].get("comment") or {}).get("body", "")
        )
        redeliver(f, rejection["id"])  # GitHub's "Redeliver": acts once
        f.comment(number, f"/shopfloor approve-call {cid}", "maria")  # too late: answered already
        await query_until(f.handle, "inbox", InboxSummary, lambda s: len(s.commands_accepted) == 3, "the late answer")
        outcome = await approve_and_finish(f, number)
        await record_history(f.handle, "issue-call-rejected-by-comment")
        await record_history(temporal_client.get_workflow_handle(fix_run), "agent-call-wait-told-to-parent")
        fix = await temporal_client.get_workflow_handle(fix_run).query("status", result_type=AgentStatus)
        inbox = await f.handle.query("inbox", result_type=InboxSummary)

    assert_merged(f, number, outcome)
    assert [e.summary for e in fix.events if e.summary.startswith(("rejected", "approved"))] == [
        f"rejected: {wait.summary}"
    ]
    # The fix agent was told the maintainer's reason, and the install never ran.
    assert [(e.ok, e.preview) for e in fix.events if e.summary == wait.summary] == [
        (False, "rejected: no new dependencies (the call was not run)")
    ]
    assert any(TEST_CMD in e.summary and e.ok for e in fix.events)  # it went on to its tests
    got = replies(f, number)
    assert len(got) == 2, got
    assert "@maria `/shopfloor approve-call` did nothing: no tool call `call_9_9` waits" in got[0]
    assert (
        f"@maria `/shopfloor approve-call` did nothing: call `{cid}` no longer waits: it was rejected already" in got[1]
    )
    assert [r.name for r in inbox.commands_accepted] == ["approve-call", "reject-call", "approve-call", "approve"]
    assert "approve-call" not in f.progress(number)


async def test_a_pull_requests_review_waits_on_its_own_comment_and_a_maintainer_approves_there(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    review = [
        {"tool_calls": [call("run_command", command=INSTALL)]},
        {"tool_calls": [call("submit", **APPROVE)]},
    ]
    policy = POLICY + "pull_requests:\n  review: members\n"
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {"review": review}, policy) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/fix-add")
        f.handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        body = await progress_saying(f, number, "approve-call")
        (wait,) = await waits_of(f)
        assert wait.workflow_id == f"{f.handle.id}/review-1" and wait.agent == "review"
        assert f"`/shopfloor approve-call {wait.call_id}`" in body and "**review** waits for approval of" in body
        f.comment(number, f"/shopfloor approve-call {wait.call_id}", "maria")
        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while not [r for r in f.get(f"/pulls/{number}/reviews") if r["commit_id"] == head]:
            assert asyncio.get_running_loop().time() < deadline, "the review was never posted"
            await asyncio.sleep(0.3)
        status = await temporal_client.get_workflow_handle(wait.workflow_id).query("status", result_type=AgentStatus)
        body = await progress_saying(f, number, "Waiting")
        assert await waits_of(f) == []

    assert [e.summary for e in status.events if e.summary.startswith(("approved", "rejected"))] == [
        f"approved: {wait.summary}"
    ]
    assert "approve-call" not in body
    assert replies(f, number) == []
    assert await waits_shown_beside_a_live_view(f.handle) == []
