"""An agent run read back from its Temporal history, across continue-as-new: its input, each model
step's request (the conversation as the model saw it) and answer, the workspace when each step was
asked, and where the run ended — what `shopfloor agent continue` and `fork` start from.

History holds references only (manifest digests, workspace refs with patch digests), so this reads
no blob: the new run's first model step loads the conversation by its digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus

from shopfloor.agents.registry import get_agent
from shopfloor.agents.run_state import AgentCarry
from shopfloor.models.agent_run import (
    AgentInput,
    CompactOutput,
    ModelStepInput,
    ModelStepOutput,
    StartFrom,
    ToolCallRef,
    ToolResult,
    WorkspaceRef,
)

MODEL_STEP = "model_step"
COMPACT = "compact_transcript"
LOCAL_ACTIVITY_MARKER = "core_local_activity"  # the Temporal SDK's marker of a local activity's result
SUBMITTED = "submitted: the result was accepted and the run ended"
NOT_RUN = "error: not run: the run ended before this call"


@dataclass
class StepRecord:
    """One model step: the request of its last attempt (a step tried again after a compaction
    asks with the compacted conversation), the workspace then, and what came of it."""

    request: ModelStepInput
    workspace: WorkspaceRef
    output: ModelStepOutput | None = None
    results: dict[str, ToolResult] = field(default_factory=dict)  # its calls' results, by call id


@dataclass
class RunRecord:
    workflow_id: str
    input: AgentInput  # the chain's first input, without a carry
    running: bool
    steps: dict[int, StepRecord] = field(default_factory=dict)  # by step number
    transcript: str | None = None  # the newest manifest digest (a model step's or a compaction's)
    workspace: WorkspaceRef | None = None  # the newest checkpoint

    @property
    def last(self) -> StepRecord | None:
        return self.steps[max(self.steps)] if self.steps else None

    def continued(self, message: str) -> Start | None:
        """Where a run continuing this one starts (None: no model step was asked): the conversation
        after its last answered step, the results answering that reply's calls, then `message`.
        A last step that got no answer (the run failed or was cancelled during it) is asked again,
        with `message` after what it was asked with."""
        last = self.last
        if last is None:
            return None
        if last.output is None:
            return self._start("continued", last, [*last.request.inject, message])
        # A call that did not run (the run ended first, or it was refused without an activity)
        # gets a result saying so: every call must be answered before the conversation goes on.
        calls = last.output.tool_calls
        start = StartFrom(
            run_id=self.workflow_id,
            how="continued",
            steps=last.request.step,
            transcript=self.transcript,
            append=[last.results.get(call.id) or _unanswered(call, last.output) for call in calls],
            inject=[message],
            readable=self.readable(),
        )
        return Start(start, self.workspace or self.input.workspace, last.request.model)

    def forked(self, step: int, message: str | None) -> Start | None:
        """Where a run forked at `step` starts: the conversation and workspace that step was asked
        with, and `message` after them (None: this run has no such step)."""
        taken = self.steps.get(step)
        if taken is None:
            return None
        return self._start("forked", taken, [*taken.request.inject, *([message] if message else [])])

    def _start(self, how: Literal["continued", "forked"], taken: StepRecord, inject: list[str]) -> Start:
        """A start that asks step `taken` again, as it was asked, with `inject` as its messages."""
        request = taken.request
        start = StartFrom(
            run_id=self.workflow_id,
            how=how,
            steps=request.step - 1,
            transcript=request.transcript,
            append=request.append,
            inject=inject,
            readable=self.readable(before=request.step),
        )
        return Start(start, taken.workspace, request.model)

    def readable(self, before: int | None = None) -> list[str]:
        """The outputs cut for the model (before step `before`), which read_output may page."""
        cap = get_agent(self.input.agent).tool_output_cap_chars
        return [
            r.output_digest
            for n, step in sorted(self.steps.items())
            if before is None or n < before
            for r in step.results.values()
            if r.output_digest and r.output_bytes > cap
        ]


@dataclass(frozen=True)
class Start:
    """A new run's start: where its conversation begins, its workspace, and the model the step it
    takes first was asked with (the default for the new run)."""

    start_from: StartFrom
    workspace: WorkspaceRef
    model: str


def _unanswered(call: ToolCallRef, output: ModelStepOutput) -> ToolResult:
    if output.output is not None:  # an accepted submit ended the run
        return ToolResult(call_id=call.id, name=call.name, ok=True, preview=SUBMITTED)
    return ToolResult(call_id=call.id, name=call.name, ok=False, preview=NOT_RUN)


async def _histories(client: Client, workflow_id: str) -> list[list[HistoryEvent]]:
    """The events of every run of `workflow_id`'s continue-as-new chain, oldest run first."""
    runs: list[list[HistoryEvent]] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events = list(history.events)
        runs.append(events)
        started = events[0].workflow_execution_started_event_attributes if events else None
        if started is None or not started.continued_execution_run_id:
            return runs[::-1]
        run_id = started.continued_execution_run_id


async def _decode(client: Client, payloads: Any, as_type: type[Any] | None) -> Any:
    [value] = await client.data_converter.decode(payloads, [as_type] if as_type else None)
    return value


async def read_run(client: Client, workflow_id: str) -> RunRecord:
    """The run's record, from the history of each run of its chain (RPCError: no such workflow)."""
    described = await client.get_workflow_handle(workflow_id).describe()
    running = described.status == WorkflowExecutionStatus.RUNNING
    record: RunRecord | None = None
    for events in await _histories(client, workflow_id):
        scheduled: dict[int, tuple[str, int | None]] = {}  # event id -> (activity type, model step)
        for event in events:
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                inp: AgentInput = await _decode(client, payloads, AgentInput)
                if record is None:
                    record = RunRecord(workflow_id, inp.model_copy(update={"carry": None}), running)
                    record.workspace = inp.workspace
                if inp.carry:  # a continued-as-new run: the checkpoint it carried
                    record.workspace = AgentCarry.model_validate(inp.carry).workspace
            elif record is None:
                continue
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                name, step = attrs.activity_type.name, None
                if name == MODEL_STEP:
                    request: ModelStepInput = await _decode(client, attrs.input.payloads, ModelStepInput)
                    step = request.step
                    record.steps[step] = StepRecord(
                        request=request, workspace=record.workspace or record.input.workspace
                    )
                scheduled[event.event_id] = (name, step)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                attrs_done = event.activity_task_completed_event_attributes
                name, step = scheduled.get(attrs_done.scheduled_event_id, ("", None))
                if not attrs_done.result.payloads:
                    continue
                if name == MODEL_STEP and step is not None:
                    output: ModelStepOutput = await _decode(client, attrs_done.result.payloads, ModelStepOutput)
                    record.steps[step].output = output
                    record.transcript = output.transcript
                elif name == COMPACT:
                    compacted: CompactOutput = await _decode(client, attrs_done.result.payloads, CompactOutput)
                    record.transcript = compacted.transcript
                elif name:
                    _record_tool_result(record, await _decode(client, attrs_done.result.payloads, None))
            elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:  # a read-only call run as a local activity
                marker = event.marker_recorded_event_attributes
                if marker.marker_name == LOCAL_ACTIVITY_MARKER and "result" in marker.details:
                    _record_tool_result(record, await _decode(client, marker.details["result"].payloads, None))
    if record is None:
        raise ValueError(f"{workflow_id} has no history to read")
    return record


def _record_tool_result(record: RunRecord, raw: Any) -> None:
    """A tool call's (or the before-submit hooks') result: answers its call, moves the checkpoint."""
    try:
        result = ToolResult.model_validate(raw)
    except ValidationError:
        return  # not a tool's result
    last = record.last
    if last is not None:
        last.results[result.call_id] = result
    if result.workspace is not None:
        record.workspace = result.workspace
