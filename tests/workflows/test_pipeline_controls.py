"""An issue's run takes the agent run's controls as Temporal handlers: its `status` query, the
pause/resume/cancel signals, and the approve/reject/raise_limits/switch_model updates, whose
validators refuse what cannot apply in words and leave nothing in the run's history. Approve and
reject are forwarded to the agent run that waits (ANSWER_CALL_SIGNAL, as approve-call is).

The IssueWorkflow runs as an inbox only (no pipeline, so no agent of its own runs) on the dev
server, every task replayed; the waiting agent run is a real `code` AgentWorkflow named as the
run's fix agent would be, its waits signalled to the issue's run as a child's would be. GitHub is
the simulator.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agent_runs import call, write_cassette
from cli_runs import cli_env, invoke_cli
from harness_runs import code_input, git_repo
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from waiting import query_until

from shopfloor.models.agent_run import AgentStatus, ApprovalDecision, LimitsRaise, ModelSwitch
from shopfloor.models.alert_issue import AlertRunInput
from shopfloor.models.call_waits import CALL_WAIT_SIGNAL, CallWait, CallWaitNotice
from shopfloor.models.inbox import (
    ALERT_SIGNAL,
    ALERT_WORKFLOW,
    GITHUB_EVENT_SIGNAL,
    ISSUE_WORKFLOW,
    Alert,
    RepoEvent,
    alert_workflow_id,
    issue_workflow_id,
)
from shopfloor.models.inbox_state import IssueInboxInput, IssueOutcome
from shopfloor.models.pipeline_status import PipelineStatus
from shopfloor.settings import Settings
from shopfloor.workflows.agent import AgentWorkflow

INSTALLS = ["pip install requests", "pip install httpx"]


@pytest.fixture
def gh_settings(settings: Settings, simulator: SimulatorHandle) -> Settings:
    return settings.model_copy(
        update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN), "factory_pipeline": False}
    )


async def refusal(handle: WorkflowHandle, name: str, arg: object) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(name, arg)
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError)
    return cause.message


async def tell_parent(issue: WorkflowHandle, agent: WorkflowHandle, status: AgentStatus) -> CallWait:
    """Signal the issue's run the agent's wait, as a child run does when a wait starts."""
    (p,) = status.pending
    assert p.since is not None and p.until is not None
    wait = CallWait(
        workflow_id=agent.id,
        agent="code",
        call_id=p.call_id,
        step=p.step,
        summary=p.summary[:300],
        reason=p.reason[:300],
        since=p.since,
        until=p.until,
    )
    await issue.signal(CALL_WAIT_SIGNAL, CallWaitNotice(wait=wait))
    await query_until(issue, "status", PipelineStatus, lambda s: [w.key for w in s.pending] == [wait.key], "the wait")
    return wait


async def test_an_issue_runs_controls(temporal_client, gh_settings, running_worker, simulator, tmp_path):
    name = f"app-{uuid.uuid4().hex[:8]}"
    repo = f"acme/{name}"
    simulator.create_repo("acme", name)
    with simulator.api("alice") as c:
        number = c.post(f"/repos/{repo}/issues", json={"title": "It breaks", "body": "Steps..."}).json()["number"]
    wid = issue_workflow_id(repo, number)
    opened = RepoEvent(
        delivery_id="d-open", repo=repo, number=number, sender="alice", event="issues", action="opened", title="x"
    )
    local, sha = git_repo(tmp_path / "proj")
    turns = [{"tool_calls": [call("run_command", command=c)]} for c in INSTALLS] + [{"content": "done"}]
    model = write_cassette(tmp_path / "installs.json", turns)
    async with running_worker(gh_settings):
        issue = await temporal_client.start_workflow(
            ISSUE_WORKFLOW,
            IssueInboxInput(repo=repo, number=number),
            id=wid,
            task_queue=gh_settings.task_queue,
            start_signal=GITHUB_EVENT_SIGNAL,
            start_signal_args=[opened],
        )
        st = await query_until(issue, "status", PipelineStatus, lambda s: s.repo == repo, "the status query")
        assert (st.kind, st.number, st.started, st.running_agent, st.agent_runs) == ("issue", number, False, None, [])

        # What cannot apply is refused in words, before anything is recorded.
        refused = [
            await refusal(issue, "approve", ApprovalDecision()),
            await refusal(issue, "reject", ApprovalDecision(call_id="call_9")),
            await refusal(issue, "raise_limits", LimitsRaise(max_steps=80)),
            await refusal(issue, "raise_limits", LimitsRaise()),
            await refusal(issue, "switch_model", ModelSwitch(model="nope-no-colon")),
            await refusal(issue, "switch_model", ModelSwitch(model="openai:gpt-4o")),
        ]
        events = [EventType.Name(e.event_type) async for e in issue.fetch_history_events()]
        assert not [e for e in events if "UPDATE" in e], events

        # Approve and reject reach the agent run that waits.
        agent = await temporal_client.start_workflow(
            AgentWorkflow.run, code_input(local, sha, model), id=f"{wid}/fix-1", task_queue=gh_settings.task_queue
        )
        first = await query_until(agent, "status", AgentStatus, lambda s: len(s.pending) == 1, "the first wait")
        wait = await tell_parent(issue, agent, first)
        assert await issue.execute_update("approve", ApprovalDecision(note="fine"), result_type=str) == wait.call_id
        second = await query_until(
            agent, "status", AgentStatus, lambda s: [p.step for p in s.pending] == [2], "the second wait"
        )
        wait = await tell_parent(issue, agent, second)
        answered = await issue.execute_update(
            "reject", ApprovalDecision(call_id=wait.call_id, note="no new dependencies"), result_type=str
        )
        assert answered == wait.call_id
        await agent.result()
        final = await agent.query(AgentWorkflow.status)
        after = await issue.query("status", result_type=PipelineStatus)

        # Pause and resume hold the run; cancel ends it as /shopfloor stop does.
        await issue.signal("pause")
        await query_until(issue, "status", PipelineStatus, lambda s: s.paused, "the pause")
        await issue.signal("resume")
        await query_until(issue, "status", PipelineStatus, lambda s: not s.paused, "the resume")
        await issue.signal("cancel", "enough")
        outcome = IssueOutcome.model_validate(await issue.result())

    assert refused == [
        "no call is waiting for approval in this run",
        "no call 'call_9' is waiting for approval in this run",
        "no agent is running in this run: there are no limits to raise",
        "name at least one limit to raise",
        "model 'nope-no-colon' is not of the form provider:model (for example openai:gpt-4o-mini, "
        "anthropic:claude-sonnet-4-5, scripted:path/to/cassette.json)",
        "no agent is running in this run: the next agent run starts with the configured model",
    ]
    decided = [e.summary.split(":")[0] for e in final.events if e.summary.startswith(("approved", "rejected"))]
    assert decided == ["approved", "rejected"]
    refused_call = [
        e.preview
        for e in final.events
        if e.kind == "tool" and e.summary.startswith("run_command") and INSTALLS[1] in e.summary
    ]
    assert refused_call == ["rejected: no new dependencies (the call was not run)"]  # what the model read
    assert after.pending == []  # each answered wait left the run's list
    assert outcome.state == "stopped" and outcome.stopped_by == "operator (command line)"


async def test_an_alert_runs_status(temporal_client, settings, running_worker):
    """An alert run answers `status` (the one control that applies to it): here its alert has no
    routed repository, so it ends `unrouted` having started no agent run."""
    fingerprint = uuid.uuid4().hex[:10]
    alert = Alert(source="generic", fingerprint=fingerprint, status="firing", summary="disk full", delivery_id="a-1")
    async with running_worker():
        handle = await temporal_client.start_workflow(
            ALERT_WORKFLOW,
            AlertRunInput(source="generic", fingerprint=fingerprint),
            id=alert_workflow_id("generic", fingerprint),
            task_queue=settings.task_queue,
            start_signal=ALERT_SIGNAL,
            start_signal_args=[alert],
        )
        await handle.result()
        st = await handle.query("status", result_type=PipelineStatus)
        env = cli_env(
            SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
            SHOPFLOOR_TASK_QUEUE=settings.task_queue,
            SHOPFLOOR_DATA_DIR=str(settings.data_dir),
        )
        shown = await asyncio.to_thread(invoke_cli, ["status", handle.id], env)
        transcript = await asyncio.to_thread(invoke_cli, ["transcript", handle.id], env)
    assert (st.kind, st.stage, st.agent_runs, st.running_agent, st.number) == ("alert", "unrouted", [], None, None)
    assert st.workflow_id == handle.id and st.reason and "unrouted" in st.reason
    assert shown.returncode == 0 and "run       alert\n" in shown.stdout and "phase     unrouted" in shown.stdout, shown
    assert transcript.returncode == 1, transcript
    assert (
        transcript.stderr.strip() == f"shopfloor: {handle.id} has started no agent run yet, so there is no transcript"
    )
