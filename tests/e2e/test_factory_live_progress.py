"""The progress comment, live, end to end on the simulator: while the fix agent runs, the issue's
progress comment shows its steps as a checklist (✓ per finished call, what runs now), a model call
the provider answers 503 is shown being retried with its attempt and error while it happens, a
secondary rate limit on an edit does not fail the run, and the edits over a run are bounded by
the edit interval (counted on the simulator, not timed); the final comment has no checklist. While
a call waits for an operator no live view runs (the run's own comment shows the wait); once it is
answered a new one shows the agent going on.

The fix agent talks to a FakeModelServer whose script holds chosen turns until the test has seen
what it looks for, so each mid-run state is observed for certain; triage and review replay
cassettes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_runs import record_history
from factory_runs import Factory, approve_and_finish, assert_merged, factory
from live_progress_runs import EDIT, FIX_SCRIPT, READ, HeldScript, body_when, fix_on_fake, models_for
from temporalio.api.enums.v1 import EventType

from shopfloor.agents.call_waits import answer_id
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.testing import ScriptTurn


def comment_edits(f: Factory, comment_id: int) -> list[dict[str, Any]]:
    return [
        r
        for r in f.sim.requests()
        if r["method"] == "PATCH" and r["path"].endswith(f"/repos/{f.repo}/issues/comments/{comment_id}")
    ]


async def activity_calls(f: Factory) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """The issue run's activities in the order scheduled: (type, input, result), as JSON."""
    assert f.handle is not None
    history = await f.handle.fetch_history()
    calls: dict[int, tuple[str, dict[str, Any], dict[str, Any] | None]] = {}
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            calls[e.event_id] = (
                a.activity_type.name,
                json.loads(a.input.payloads[0].data) if a.input.payloads else {},
                None,
            )
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            c = e.activity_task_completed_event_attributes
            name, inp, _ = calls[c.scheduled_event_id]
            calls[c.scheduled_event_id] = (
                name,
                inp,
                json.loads(c.result.payloads[0].data) if c.result.payloads else {},
            )
    return list(calls.values())


async def test_the_comment_shows_the_fix_agents_steps_live_and_a_model_call_being_retried(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    script = HeldScript(1, 2)
    with fix_on_fake(script) as fake:
        extra = models_for(tmp_path, settings, fake, progress_edit_seconds=0.2)
        async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {}, **extra) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")

            # Held at its second model call: the first step and its read are done, the call runs.
            held = await body_when(f, number, "**Now: the fix agent**", f"- ✓ ` {READ} `", "model call running")
            assert "- ✓ step 1 · model: ` read_file calc/ops.py `" in held
            assert "**Running** — stage fix" in held  # the run's own view stays whole around it
            assert held.index("| fix |") < held.index("**Now: the fix agent**") < held.index("Spent:")

            # The edit's next model call: GitHub refuses one edit (secondary rate limit), the
            # provider answers 503 twice, the third attempt is held: the comment says so.
            simulator.inject_fault("PATCH", r"/issues/comments/\d+$", 429, retry_after=1)
            fake.fail_next(503, times=2)
            script.release(1)
            retrying = await body_when(f, number, "failing, retrying", "(attempt 3 of ", "503")
            assert f"- ✓ ` {EDIT} `" in retrying
            line = next(x for x in retrying.splitlines() if "failing, retrying" in x)
            assert line.startswith("- ⟳ step 3 · model call failing, retrying"), line
            while len(turn_2 := [r.status for r in fake.requests if r.turn == 2]) < 3:
                await asyncio.sleep(0.1)  # shown while it backed off: the third attempt is on its way
            assert turn_2 == [503, 503, 200]

            script.release(2)
            outcome = await approve_and_finish(f, number)
            await record_history(f.handle, "issue-live-progress")

        assert_merged(f, number, outcome)
        final = f.progress(number)
        assert "**Now:" not in final and "retrying" not in final
        refused = [r for r in f.sim.requests() if r["method"] == "PATCH" and r["status"] == 429]
        assert len(refused) == 1, refused  # the rate limit was hit, and the run went on


async def test_edits_are_bounded_by_the_interval_one_live_view_per_agent_run(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    script = HeldScript(1)
    with fix_on_fake(script) as fake:
        # An interval no run reaches: each agent run's live view edits the comment once at most.
        extra = models_for(tmp_path, settings, fake, progress_edit_seconds=3600)
        async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {}, **extra) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            await body_when(f, number, "**Now: the fix agent**")
            script.release(1)
            outcome = await approve_and_finish(f, number)
            activities = await activity_calls(f)

        assert_merged(f, number, outcome)
        (comment,) = f.progress_comments(number)
        edits = comment_edits(f, comment["id"])
        own = [
            (inp, out)
            for name, inp, out in activities
            if name == "github_upsert_comment" and inp.get("kind") == "progress"
        ]
        live = [inp for name, inp, _ in activities if name == "live_progress"]
        # One live view per agent run (triage, fix, review): history grows per run, not per step.
        assert [x["agent_run_id"].rsplit("/", 1)[1] for x in live] == ["triage", "fix-1", "review-1"]
        # Every edit of the comment is the run's own (an upsert that changed it) or a live view's:
        # with an interval no run reaches, at most one per live view, and the fix agent's was seen.
        own_edits = sum(1 for _, out in own if out and out.get("action") == "updated")
        assert 1 <= len(edits) - own_edits <= len(live), (len(edits), own_edits)
        assert "**Now:" not in comment["body"]


async def test_the_live_view_stops_while_a_call_waits_for_an_operator_and_comes_back_once_answered(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    install = "pip install requests"
    read, edit, test, submit = FIX_SCRIPT
    script = HeldScript(2, script=[read, ScriptTurn.tool("run_command", command=install), edit, test, submit])
    with fix_on_fake(script) as fake:
        extra = models_for(tmp_path, settings, fake, progress_edit_seconds=0.2)
        async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {}, **extra) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            await body_when(f, number, "approve-call")  # the run's own comment shows the wait
            (wait,) = await f.handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])
            f.comment(number, f"/shopfloor approve-call {answer_id(wait.call_id)}", "maria")

            # Answered: a new live view shows the approval and the agent going on.
            body = await body_when(f, number, "**Now: the fix agent**", "approved: run_command", "model call running")
            assert "approve-call" not in body
            script.release(2)
            outcome = await approve_and_finish(f, number)
            activities = await activity_calls(f)

        assert_merged(f, number, outcome)
        fix_views = [
            out for name, inp, out in activities if name == "live_progress" and inp["agent_run_id"] == wait.workflow_id
        ]
        # One live view until the wait (it stopped on its own, or was stopped), one after the answer.
        assert len(fix_views) == 2, fix_views
        assert fix_views[0] is None or fix_views[0]["ended"] == "waiting"  # None: cancelled, no result


async def test_a_tool_call_under_way_is_shown_by_its_summary(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    gate = tmp_path / "gate"
    gate.mkdir()
    wait = f"until [ -e {gate}/open ]; do sleep 0.1; done"  # runs until the test opens the gate
    read, edit, test, submit = FIX_SCRIPT
    script = HeldScript(script=[read, edit, ScriptTurn.tool("run_command", command=wait), test, submit])
    with fix_on_fake(script) as fake:
        # The gate's directory is one the sandbox lets commands read (read-only, as the host sees it).
        extra = models_for(tmp_path, settings, fake, progress_edit_seconds=0.2, sandbox_readonly_paths=[str(gate)])
        async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {}, **extra) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            body = await body_when(f, number, "- ⏳ ` run_command until [", "` running since ")
            line = next(x for x in body.splitlines() if x.startswith("- ⏳"))
            assert "until [ -e" in line, line  # the call's own summary, not just the tool's name
            assert f"- ✓ ` {EDIT} `" in body
            (gate / "open").touch()
            outcome = await approve_and_finish(f, number)

        assert_merged(f, number, outcome)
