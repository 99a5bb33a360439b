"""AgentWorkflow: one agent run, every model call and tool call a durable activity.

The loop itself is agents/loop.py; this module supplies its Temporal side: the model step,
compaction and tool calls as activities (with their timeouts and retries; the read-only calls as
local activities, run within the workflow task the model's answer woke, their results markers),
the time from workflow.now(), continue-as-new, and the operator's controls (AgentControls: the status query,
pause/resume/cancel/steer signals, approve/reject/raise_limits updates).

The workflow holds references only: the transcript is a manifest digest in the blob store, tool
outputs are digests with short previews, the workspace is a (base commit, patch digest) ref. A
crashed worker's run resumes elsewhere from history without repeating a completed model call or
losing an edit.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.budget import Spent
    from shopfloor.agents.context_limits import REACTIVE_COMPACTION, ContextTooLong
    from shopfloor.agents.loop import AgentLoop, Cancelled, EventKind, Failed, Outcome, result_of
    from shopfloor.agents.registry import get_agent
    from shopfloor.agents.run_environment import EnvironmentProbe, SandboxFacts
    from shopfloor.agents.run_environment import render as render_environment
    from shopfloor.agents.run_state import AgentCarry
    from shopfloor.agents.tools import DELEGATE, READ_ONLY_TOOLS, RUN_PYTHON
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentResult,
        CompactInput,
        CompactOutput,
        ModelStepInput,
        ModelStepOutput,
        StartFrom,
        ToolCallRef,
        ToolInput,
        ToolResult,
    )
    from shopfloor.models.mcp import McpCatalog, McpListInput, split_name
    from shopfloor.search_attributes import SHOPFLOOR_AGENT, SHOPFLOOR_ISSUE, SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import (
        BEFORE_SUBMIT_HOOKS,
        COMPACT_TRANSCRIPT,
        MCP_CALL_TOOL,
        MCP_LIST_TOOLS,
        MODEL_STEP,
        SANDBOX_FACTS,
        ActivityEntry,
        In,
        Out,
        call_local,
        failure_message,
        failure_type,
        tool_activity,
    )
    from shopfloor.workflows.activity_catalogue import call as call_activity
    from shopfloor.workflows.controls import AgentControls
    from shopfloor.workflows.subagents import SubagentRunner


class ActivityModelStep:
    """The loop's ModelStep: the model_step and compact_transcript activities, with the run's own
    timeouts (a slow provider may need longer than the catalogue's defaults)."""

    def __init__(self, inp: AgentInput) -> None:
        self.timeout = timedelta(seconds=inp.timeouts.model_call_s)
        self.heartbeat = timedelta(seconds=inp.timeouts.model_heartbeat_s)
        self.repo = inp.workspace.repo
        # The sandbox's facts for the environment section (None: no section, a run recorded before it).
        self.facts: SandboxFacts | None = None

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        update: dict[str, Any] = {"append": [by_reference(r) for r in request.append], "repo": self.repo}
        if self.facts is not None:  # today's date (workflow time) and the model this step asks
            now = workflow.now().timestamp()
            update["environment"] = render_environment(self.facts, now=now, repo=self.repo, model=request.model)
        request = request.model_copy(update=update)
        return await self._call(MODEL_STEP, request, f"{request.model} step {request.step}")

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        return await self._call(COMPACT_TRANSCRIPT, request.model_copy(update={"repo": self.repo}), summary)

    async def _call(self, entry: ActivityEntry[In, Out], request: In, summary: str) -> Out:
        try:
            return await call_activity(entry, request, summary=summary, timeout=self.timeout, heartbeat=self.heartbeat)
        except ActivityError as exc:
            too_long = _too_long(exc)
            if too_long is None:
                raise
            raise too_long from exc


def by_reference(result: ToolResult) -> ToolResult:
    """A tool result as the next model step is given it: model_step reads a stored output by its
    digest, so its preview, checkpoint and warning (in history already, with the call's own
    result) are left out. A result without a stored output (a refusal) goes whole."""
    if result.output_digest is None:
        return result
    return ToolResult(
        call_id=result.call_id,
        name=result.name,
        ok=result.ok,
        output_digest=result.output_digest,
        output_bytes=result.output_bytes,
    )


def _too_long(exc: ActivityError) -> ContextTooLong | None:
    """The provider's "too long for the context window", for the loop to compact and try again
    (decided from the failure type in history); a run recorded before that fails as it did."""
    if failure_type(exc) == failure_types.MODEL_CONTEXT_TOO_LONG and workflow.patched(REACTIVE_COMPACTION):
        return ContextTooLong(failure_message(exc))
    return None


# The environment section of the system prompt (agents/run_environment.py): the sandbox is inspected
# once, before the first step; runs recorded before go without it, and replay that way.
AGENT_ENVIRONMENT = "agent-environment"


# A run recorded before run_python answered such a call as an unknown tool, with no activity.
CODE_MODE = "code-mode"
# A run recorded before MCP tools listed none when it started.
MCP_TOOLS = "mcp-tools"


# Read-only tool calls (READ_ONLY_TOOLS) run as local activities; runs recorded before ran them as
# activities of their own, and replay that way.
LOCAL_READS = "read-only-tools-as-local-activities"


class ActivityToolRunner:
    """The loop's ToolRunner and HookRunner: the activity named after the tool, and the
    before_submit_hooks activity."""

    def __init__(self, inp: AgentInput, subagents: SubagentRunner | None = None) -> None:
        self.subagents = subagents  # runs `delegate` calls (None: a runner without subagents)
        # A command may run for its policy's timeout: the activity gets a minute beyond it.
        self.timeout = timedelta(seconds=max(inp.timeouts.tool_s, inp.commands.timeout_s + 60))
        # An edit runs its after-edit hooks, a submit its before-submit ones, one after another.
        commands = inp.commands
        after_edit = sum(min(h.timeout_s, commands.timeout_s) for h in commands.after_edit)
        before_submit = sum(min(h.timeout_s, commands.timeout_s) for h in commands.before_submit)
        self.edit_timeout = self.timeout + timedelta(seconds=after_edit)
        self.hooks_timeout = timedelta(seconds=max(inp.timeouts.tool_s, before_submit + 60))

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        if call.name == DELEGATE and self.subagents is not None:
            return await self.subagents.run(call, request)
        if split_name(call.name) is not None:  # allowed by the run's MCP rules (the loop's refusal ladder)
            return await call_activity(MCP_CALL_TOOL, request, summary=call.summary, timeout=self.timeout)
        if call.name == RUN_PYTHON and not workflow.patched(CODE_MODE):
            return ToolResult(call_id=call.id, name=call.name, ok=False, preview=f"error: unknown tool {call.name!r}")
        if call.name in READ_ONLY_TOOLS and workflow.patched(LOCAL_READS):
            # In this workflow task, its result a marker: no activity task and no workflow task of
            # its own. Read-only, so running again after a crash (before the marker) is harmless.
            return await call_local(tool_activity(call.name), request, summary=call.summary, timeout=self.timeout)
        timeout = self.edit_timeout if call.name in ("edit_file", "write_file") else self.timeout
        return await call_activity(tool_activity(call.name), request, summary=call.summary, timeout=timeout)

    async def before_submit(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        summary = f"before-submit hooks for {call.summary}"
        return await call_activity(BEFORE_SUBMIT_HOOKS, request, summary=summary, timeout=self.hooks_timeout)


def _carry_from(inp: AgentInput, start: StartFrom) -> AgentCarry:
    """A run that goes on from another: its conversation and workspace, the steps already taken
    (so step numbers go on), and the step limit counted from there (the limits are this run's)."""
    return AgentCarry(
        transcript=start.transcript,
        pending_tool_results=start.append,
        queued_notes=list(start.inject),
        readable_outputs=list(start.readable),
        workspace=inp.workspace,
        limits=inp.limits.model_copy(update={"max_steps": inp.limits.max_steps + start.steps}),
        spent=Spent(steps=start.steps),
    )


# Outside Temporal's workflow sandbox on a deployed worker: this is the workflow every agent step
# wakes, and the sandbox's per-task work (re-entering its import guard, rebuilding serialization
# contexts inside it) was a third of a worker's CPU per step (docs/scaling.md). Tests and
# `shopfloor replay` still run it inside the strict sandbox (`build_worker(strict_sandbox=True)`),
# so a non-deterministic call here fails there.
@workflow.defn(name="AgentWorkflow", sandboxed=False)
class AgentWorkflow(AgentControls):
    """The loop's RunHost, with the operator's controls."""

    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        if inp.carry:
            carry = AgentCarry.model_validate(inp.carry)
        elif inp.start_from is not None:
            carry = _carry_from(inp, inp.start_from)
        else:
            carry = AgentCarry(workspace=inp.workspace, limits=inp.limits)
        super().__init__(inp, carry)
        self.inp = inp

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        try:
            agent = get_agent(inp.agent)
        except KeyError as exc:
            raise ApplicationError(str(exc.args[0]), type=failure_types.UNKNOWN_AGENT, non_retryable=True) from None
        attributes: list[SearchAttributeUpdate[Any]] = [
            SHOPFLOOR_REPO.value_set(inp.workspace.repo),
            SHOPFLOOR_AGENT.value_set(inp.agent),
            SHOPFLOOR_STAGE.value_set(inp.stage),
        ]
        if inp.issue is not None:
            attributes.append(SHOPFLOOR_ISSUE.value_set(inp.issue))
        workflow.upsert_search_attributes(attributes)
        if inp.start_from is not None and not inp.carry:  # once, not again after continue-as-new
            self.event(inp.start_from.steps, "model", inp.start_from.describe())
        tools = ActivityToolRunner(inp, SubagentRunner(self))
        model = ActivityModelStep(inp)
        try:
            model.facts = await self._sandbox_facts(inp)
            await self._list_mcp_tools()
            loop = AgentLoop(
                self.inp,  # with what was found before the first step (the sandbox, the MCP tools)
                agent,
                self.carry,
                model=model,
                tools=tools,
                host=self,
                run_id=workflow.info().workflow_id,
                hooks=tools,
            )
            return self._finish(await loop.run())
        except asyncio.CancelledError:
            # Cancelled through Temporal: end with the last checkpoint rather than lose it.
            return self._finish(Cancelled("the run was cancelled"))
        except ActivityError as exc:
            if is_cancelled_exception(exc):  # cancelled while an activity ran: it comes back as its error
                return self._finish(Cancelled("the run was cancelled"))
            reason = failure_message(exc)
            self._finish(Failed(reason))
            raise ApplicationError(
                f"{inp.agent} run failed: {reason}", type=failure_types.AGENT_RUN_FAILED, non_retryable=True
            ) from exc

    async def _sandbox_facts(self, inp: AgentInput) -> SandboxFacts | None:
        """What the sandbox of the run's commands looks like, inspected once (kept in the input
        across continue-as-new); None: a run recorded before the environment section existed. A
        failed inspection is not the run's end: the section then says what is known."""
        if inp.environment is not None:
            return SandboxFacts.model_validate(inp.environment)
        if not workflow.patched(AGENT_ENVIRONMENT):
            return None
        probe = EnvironmentProbe(workspace=self.carry.workspace, run_id=workflow.info().workflow_id)
        try:
            facts = await call_activity(SANDBOX_FACTS, probe, summary="inspect the sandbox")
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            facts = SandboxFacts(note="the sandbox could not be inspected")
        self.inp = self.inp.model_copy(update={"environment": facts.model_dump(mode="json")})
        return facts

    async def _list_mcp_tools(self) -> None:
        """The MCP tools the repository's servers offer, listed once (kept in the input across
        continue-as-new). A server that offers none is said in a warning, not the run's end."""
        use = self.inp.mcp
        if use is None or not use.servers or self.inp.mcp_tools is not None or not workflow.patched(MCP_TOOLS):
            return
        listing = McpListInput(servers=use.servers, run_id=workflow.info().workflow_id)
        try:
            catalog = await call_activity(
                MCP_LIST_TOOLS, listing, summary=f"list MCP tools of {', '.join(use.servers)}"
            )
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            catalog = McpCatalog(notes=[f"MCP tools could not be listed: {failure_message(exc)}"])
        for note in catalog.notes:
            self.warn(f"MCP: {note}"[:300])
        self.inp = self.inp.model_copy(update={"mcp_tools": catalog})

    # -- RunHost: what the loop asks of the workflow --------------------------------------------

    def now(self) -> float:
        return workflow.now().timestamp()

    async def continue_as_new_if_due(self, carry: AgentCarry) -> None:
        info = workflow.info()
        if self.inp.max_history_events is not None:
            due = info.get_current_history_length() > self.inp.max_history_events
        else:
            due = info.is_continue_as_new_suggested()
        if due:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(self.inp.model_copy(update={"carry": carry.model_dump(mode="json")}))

    def step_started(self, step: int) -> None:
        self.live.step = step

    def has_change(self, name: str) -> bool:
        return workflow.patched(name)

    def record_event(self, kind: EventKind, summary: str, *, ok: bool = True, preview: str = "") -> None:
        self.event(self.live.step, kind, summary, ok=ok, preview=preview)

    def show_tool_warning(self, text: str) -> None:
        if text not in self.live.warnings:
            self.warn(text)

    def _finish(self, outcome: Outcome) -> AgentResult:
        result = result_of(outcome, self.carry)
        self.live.state, self.live.final_answer, self.live.reason = result.state, result.final_answer, result.reason
        self.publish()
        return result
