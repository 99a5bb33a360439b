"""A maintainer talks to a running pipeline from GitHub: `/shopfloor steer <text>`, `steer --model`
(a model the operator allows), `raise-limits`, `pause`, `resume` and `cancel` on the issue reach
its running fix agent (and its pipeline), each with one short reply; a `raise-limits` past the
bound a comment may ask for, and a steer with no agent running, are refused with a reply saying
why. End to end: simulator, webhook edge, worker, Temporal.
"""

from __future__ import annotations

import asyncio

from agent_runs import call, write_cassette
from approval_runs import comments_when
from factory_runs import APPROVE, POLICY, TRIAGE_TURNS, factory, fix_turns
from waiting import DEADLINE_S, query_until

from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.models.pipeline_status import PipelineStatus

INSTALL = "pip install requests"


def fix_waiting() -> list[dict]:
    read, edit, test, submit = fix_turns()
    return [read, edit, {"tool_calls": [call("run_command", command=INSTALL)]}, test, submit]


def replies(comments: list[dict]) -> list[str]:
    """shopfloor's replies to control comments, oldest first, without their markers."""
    return [
        c["body"].split("-->\n", 1)[-1]
        for c in comments
        if c["body"].startswith("<!-- shopfloor:") and ":control-" in c["body"].split("\n", 1)[0]
    ]


async def test_a_maintainer_steers_raises_switches_pauses_and_cancels_from_comments(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    allowed = write_cassette(tmp_path / "allowed.json", fix_waiting())
    models = {"triage": TRIAGE_TURNS, "fix": fix_waiting()}
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY, repo_models=[allowed]
    ) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        fix_run = temporal_client.get_workflow_handle(f"{f.handle.id}/fix-1")
        await query_until(fix_run, "status", AgentStatus, lambda s: bool(s.pending), "the install to wait")

        f.comment(number, "/shopfloor steer please also handle negative numbers", "maria")
        f.comment(number, f"/shopfloor steer --model {allowed}", "maria")
        f.comment(number, "/shopfloor raise-limits --steps 90 --cost 5", "maria")
        f.comment(number, "/shopfloor raise-limits --steps 5000", "maria")  # past a comment's bound
        f.comment(number, "/shopfloor pause", "maria")
        paused = await query_until(
            fix_run,
            "status",
            AgentStatus,
            lambda s: s.paused and s.model == allowed and s.max_steps == 90,
            "the fix agent to be steered, switched, raised and paused",
        )
        pipeline = await query_until(f.handle, "status", PipelineStatus, lambda s: s.paused, "the pipeline to pause")
        f.comment(number, "/shopfloor resume", "maria")
        await query_until(fix_run, "status", AgentStatus, lambda s: not s.paused, "the fix agent to resume")
        f.comment(number, "/shopfloor cancel", "maria")
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), DEADLINE_S))
        fix = await fix_run.query("status", result_type=AgentStatus)
        said = replies(await comments_when(f, number, lambda cs: len(replies(cs)) == 7, "seven replies"))

    assert any(e.summary == "operator: (from @maria) please also handle negative numbers" for e in paused.events)
    assert any(e.summary == f"model switched to {allowed} by @maria" for e in paused.events)
    assert paused.max_steps == 90 and pipeline.paused and pipeline.running_agent == fix_run.id
    assert outcome.state == "stopped" and outcome.stopped_by == "maria"
    assert outcome.factory is not None and outcome.factory.result == "cancelled"
    assert fix.state == "cancelled"  # the running agent ended with the run, at its checkpoint
    assert said == [
        "@maria `/shopfloor steer`: your message reaches the running agent before its next step",
        f"@maria `/shopfloor steer`: the running agent switches to `{allowed}` from its next step",
        "@maria `/shopfloor raise-limits`: the running agent's limits are now: 90 steps, $5",
        "@maria `/shopfloor raise-limits`: did nothing: `--steps` takes a whole number from 1 to 200",
        "@maria `/shopfloor pause`: paused: the run holds before its next step (its agent too)",
        "@maria `/shopfloor resume`: resumed",
        "@maria `/shopfloor cancel`: cancelled: the run ends; its running agent keeps its last checkpoint",
    ]


async def test_a_steer_with_no_agent_running_is_answered(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    # The run waits for a maintainer's approval before the merge: no agent runs.
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.waiting_for == "approval", "the run to wait for approval")
        f.comment(number, "/shopfloor steer please also handle negative numbers", "maria")
        f.comment(number, "/shopfloor raise-limits --steps 50", "maria")
        said = replies(await comments_when(f, number, lambda cs: len(replies(cs)) == 2, "the replies"))
        status = await f.handle.query("status", result_type=PipelineStatus)
        await f.handle.terminate("test over")

    assert said == [
        "@maria `/shopfloor steer`: did nothing: no agent is running; `/shopfloor fix <text>` starts a round",
        "@maria `/shopfloor raise-limits`: did nothing: no agent is running in this run: there are no limits to raise",
    ]
    assert status.running_agent is None and status.agent_runs == [
        f"{status.workflow_id}/triage",
        f"{status.workflow_id}/fix-1",
        f"{status.workflow_id}/review-1",
    ]
