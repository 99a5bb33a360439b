"""An agent run tells its parent run when a tool call starts and stops waiting for an operator,
after the agent run continued as new too, and takes an answer its parent forwards only for the
call that waits (a stale step's answer does nothing).

The parent here is a small recording workflow on a task queue of its own, with an id shaped like
an issue's run; the agent run is the real AgentWorkflow on shopfloor's worker (dev server, no
workflow cache), its model a scripted cassette, its workspace a real git repository.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from agent_runs import call, write_cassette
from harness_runs import code_input, git_repo, wait_for
from pydantic import BaseModel
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from shopfloor.models.agent_run import AgentInput, AgentResult, ApprovalDecision
from shopfloor.models.call_waits import ANSWER_CALL_SIGNAL, CALL_WAIT_SIGNAL, CallAnswer, CallWaitNotice
from shopfloor.workflows.agent import AgentWorkflow

READS = 12  # enough steps for the agent run to continue as new (max_history_events below) before it asks


class RecorderInput(BaseModel):
    agent: AgentInput
    task_queue: str


@workflow.defn(name="CallWaitRecorder")
class CallWaitRecorder:
    def __init__(self) -> None:
        self.notices: list[CallWaitNotice] = []

    @workflow.run
    async def run(self, inp: RecorderInput) -> AgentResult:
        return await workflow.execute_child_workflow(
            "AgentWorkflow",
            inp.agent,
            id=f"{workflow.info().workflow_id}/code-1",
            task_queue=inp.task_queue,
            result_type=AgentResult,
        )

    @workflow.signal(name=CALL_WAIT_SIGNAL)
    def call_wait(self, notice: CallWaitNotice) -> None:
        self.notices.append(notice)

    @workflow.query(name="notices")
    def recorded(self) -> list[CallWaitNotice]:
        return self.notices


async def test_waits_reach_the_parent_after_continue_as_new_and_answers_name_their_step(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    reads = [{"tool_calls": [call("read_file", path="README.md", limit=10 + k)]} for k in range(READS)]
    asks = [
        {"tool_calls": [call("run_command", command="curl -s https://example.invalid")]},
        {"tool_calls": [call("run_command", command="curl -s https://example.invalid/two")]},
        {"content": "Done."},
    ]
    model = write_cassette(tmp_path / "c.json", reads + asks)
    inp = code_input(repo, sha, model, max_history_events=40)
    parent_id = f"issue/test/recorder-{uuid.uuid4().hex[:8]}/1"
    queue = f"recorder-{uuid.uuid4().hex[:8]}"
    recorder = Worker(
        temporal_client,
        task_queue=queue,
        workflows=[CallWaitRecorder],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=0,
    )
    async with running_worker(), recorder:
        parent = await temporal_client.start_workflow(
            CallWaitRecorder.run,
            RecorderInput(agent=inp, task_queue=settings.task_queue),
            id=parent_id,
            task_queue=queue,
        )
        child = temporal_client.get_workflow_handle(f"{parent_id}/code-1")

        async def notices(n: int):
            got = await parent.query(CallWaitRecorder.recorded, result_type=list[CallWaitNotice])
            return got if len(got) >= n else None

        (first,) = await wait_for(lambda: notices(1), timeout_s=60, what="the first wait's notice")
        assert first.ended is None and first.wait.workflow_id == child.id and first.wait.agent == "code"
        assert first.wait.step == READS + 1 and "example.invalid" in first.wait.summary
        assert first.wait.until - first.wait.since == timedelta(hours=1)
        await child.execute_update(AgentWorkflow.approve, ApprovalDecision(call_id=first.wait.call_id))

        second = (await wait_for(lambda: notices(3), timeout_s=60, what="the second wait's notice"))[2]
        assert second.ended is None and second.wait.step == READS + 2
        # A stale answer (the first call's step) does nothing; the one naming this step does.
        await child.signal(ANSWER_CALL_SIGNAL, CallAnswer(call_id=second.wait.call_id, step=READS + 1, approved=True))
        status = await child.query(AgentWorkflow.status)
        assert [p.call_id for p in status.pending] == [second.wait.call_id]
        await child.signal(
            ANSWER_CALL_SIGNAL,
            CallAnswer(call_id=second.wait.call_id, step=second.wait.step, approved=False, note="not twice"),
        )
        result = await parent.result()
        recorded = await parent.query(CallWaitRecorder.recorded, result_type=list[CallWaitNotice])
        last_run = (await child.fetch_history()).events[0].workflow_execution_started_event_attributes
        started = next(
            e.child_workflow_execution_started_event_attributes.workflow_execution.run_id
            for e in (await parent.fetch_history()).events
            if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
        )
        first_run = (await temporal_client.get_workflow_handle(child.id, run_id=started).fetch_history()).events

    assert result.state == "completed" and result.steps == READS + 3, result
    # The agent run had continued as new before it asked: its parent still heard of both waits.
    assert first_run[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    signalled = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    assert not any(e.event_type == signalled for e in first_run)
    assert last_run.continued_execution_run_id and last_run.parent_workflow_execution.workflow_id == parent_id
    assert [(n.wait.step, n.ended) for n in recorded] == [
        (READS + 1, None),
        (READS + 1, "approved"),
        (READS + 2, None),
        (READS + 2, "rejected"),
    ]
