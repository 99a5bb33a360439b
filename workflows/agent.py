"""AgentWorkflow: one agent run, every model call and tool call a durable activity.

The workflow holds references only: the transcript is a manifest digest in the blob store, tool
outputs are digests with short previews, the workspace is a (base commit, patch digest) ref. A
crashed worker's run resumes elsewhere from history without repeating a completed model call or
losing an edit. Operators steer it through the query, signals and updates of AgentControls.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents import submission
    from shopfloor.agents.budget import cost_usd, limit_reached
    from shopfloor.agents.definition import AgentDefinition
    from shopfloor.agents.doom_loop import observe
    from shopfloor.agents.registry import get_agent
    from shopfloor.agents.run_state import AgentCarry
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentResult,
        CompactInput,
        CompactOutput,
        ModelStepInput,
        ModelStepOutput,
        RunState,
        ToolCallRef,
        ToolInput,
        ToolResult,
    )
    from shopfloor.search_attributes import SHOPFLOOR_AGENT, SHOPFLOOR_ISSUE, SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.controls import AgentControls

MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["ModelCallRejected"],
)
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


def _cause(exc: BaseException) -> str:
    """The activity's own account of the failure: the first ApplicationError in the chain."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.message
        current = current.__cause__
    return str(exc) or type(exc).__name__


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow(AgentControls):
    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        carry = (
            AgentCarry.model_validate(inp.carry)
            if inp.carry
            else AgentCarry(workspace=inp.workspace, limits=inp.limits)
        )
        super().__init__(inp, carry)

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        try:
            agent = get_agent(inp.agent)
        except KeyError as exc:
            raise ApplicationError(str(exc.args[0]), type="UnknownAgent", non_retryable=True) from None
        attributes = [
            SHOPFLOOR_REPO.value_set(inp.workspace.repo),
            SHOPFLOOR_AGENT.value_set(inp.agent),
            SHOPFLOOR_STAGE.value_set(inp.stage),
        ]
        if inp.issue is not None:
            attributes.append(SHOPFLOOR_ISSUE.value_set(inp.issue))
        workflow.upsert_search_attributes(attributes)
        c = self.carry
        if c.spent.started_at is None:
            c.spent = c.spent.model_copy(update={"started_at": workflow.now().timestamp()})
        try:
            return await self._loop(inp, agent)
        except asyncio.CancelledError:
            # Cancelled through Temporal: end with the last checkpoint rather than lose it.
            return self._finish("cancelled", reason="the run was cancelled")
        except ActivityError as exc:
            if is_cancelled_exception(exc):  # cancelled while an activity ran: it comes back as its error
                return self._finish("cancelled", reason="the run was cancelled")
            reason = _cause(exc)
            self._finish("failed", reason=reason)
            raise ApplicationError(
                f"{inp.agent} run failed: {reason}", type="AgentRunFailed", non_retryable=True
            ) from exc

    async def _loop(self, inp: AgentInput, agent: AgentDefinition) -> AgentResult:
        c = self.carry
        while True:
            if self.cancel_reason is not None:
                return self._finish("cancelled", reason=self.cancel_reason)
            await self._wait_while_paused()
            if self.cancel_reason is not None:
                return self._finish("cancelled", reason=self.cancel_reason)
            reason = limit_reached(c.spent, c.limits, workflow.now().timestamp())
            if reason:
                return self._finish("limit_reached", reason=reason)
            if self._should_continue_as_new(inp):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(inp.model_copy(update={"carry": c.model_dump(mode="json")}))
            await self._compact_if_needed(inp, agent)
            out = await self._model_step(inp, agent, c.spent.steps + 1)
            if out.output is not None:  # an accepted submit (always alone in its reply)
                done = (out.output, out.output_digest)
                return self._finish("completed", final_digest=out.reply_digest, output=done)
            if not out.tool_calls and agent.output_model:
                # A plain answer does not finish an agent that owes a result: remind it once.
                if c.submit.nudged:
                    return self._finish("failed", reason=submission.no_submit_reason(agent.output_model))
                c.submit = c.submit.model_copy(update={"nudged": True})
                c.inject.append(submission.nudge_text(agent.output_model))
                continue
            if not out.tool_calls:
                return self._finish("completed", final=out.final_text, final_digest=out.reply_digest)
            stuck = await self._run_tools(inp, agent, out)
            if stuck:
                return self._finish("stuck", reason=stuck)

    def _should_continue_as_new(self, inp: AgentInput) -> bool:
        info = workflow.info()
        if inp.max_history_events is not None:
            return info.get_current_history_length() > inp.max_history_events
        return info.is_continue_as_new_suggested()

    async def _model_step(self, inp: AgentInput, agent: AgentDefinition, step: int) -> ModelStepOutput:
        c = self.carry
        self.live.step = step
        required = inp.required_command if agent.submit_requires_command else None
        sent = len(c.inject)  # a message steered in while the model is called goes with the next step
        out = await workflow.execute_activity(
            "model_step",
            ModelStepInput(
                agent=inp.agent,
                model=inp.model,
                step=step,
                transcript=c.transcript,
                goal=inp.goal if c.transcript is None else None,
                append=c.append,
                inject=c.inject[:sent],
                text_actions=inp.text_actions,
                permissions=inp.permissions,
                required_command=required,
                test_command=inp.commands.test_command if required else None,
                submit_refusal=submission.gate_refusal(c.submit, required),
                recorded=submission.recorded_fields(c.submit, required) if agent.output_model else {},
            ),
            result_type=ModelStepOutput,
            start_to_close_timeout=timedelta(seconds=inp.timeouts.model_call_s),
            heartbeat_timeout=timedelta(seconds=inp.timeouts.model_heartbeat_s),
            retry_policy=MODEL_RETRY,
            summary=f"{inp.model} step {step}",
        )
        c.transcript, c.append, c.inject, c.context_tokens = out.transcript, [], c.inject[sent:], out.context_tokens
        c.spent = c.spent.after_step(out.usage, out.cost_usd if out.priced else cost_usd(inp.model, out.usage))
        asked = ", ".join(c.summary for c in out.tool_calls)
        self.event(step, "model", f"{inp.model}: " + (asked or "final answer"), preview=out.text_preview)
        return out

    async def _compact_if_needed(self, inp: AgentInput, agent: AgentDefinition) -> None:
        c = self.carry
        budget = inp.compaction_budget_tokens or agent.compaction_budget_tokens
        if c.transcript is None or c.context_tokens <= budget:
            return
        out = await workflow.execute_activity(
            "compact_transcript",
            CompactInput(agent=inp.agent, model=inp.model, transcript=c.transcript, budget_tokens=budget),
            result_type=CompactOutput,
            start_to_close_timeout=timedelta(seconds=inp.timeouts.model_call_s),
            heartbeat_timeout=timedelta(seconds=inp.timeouts.model_heartbeat_s),
            retry_policy=MODEL_RETRY,
            summary=f"compact transcript ({c.context_tokens} tokens > {budget})",
        )
        c.transcript, c.context_tokens = out.transcript, out.context_tokens
        cost = out.cost_usd if out.priced else cost_usd(inp.model, out.usage)
        c.spent = c.spent.after_step(out.usage, cost).model_copy(
            update={"steps": c.spent.steps}  # a compaction costs tokens, not a step
        )
        if out.folded:
            self.event(self.live.step, "model", f"compacted {out.folded} messages into a summary")

    async def _run_tools(self, inp: AgentInput, agent: AgentDefinition, out: ModelStepOutput) -> str | None:
        """Run one reply's calls: consecutive read-only ones concurrently, the others one at a time
        in order. Returns a reason when the run is stuck in a loop."""
        results: list[ToolResult] = []
        batch: list[ToolCallRef] = []

        async def flush() -> None:
            results.extend(await asyncio.gather(*(self._run_tool(inp, agent, out, c) for c in batch)))
            batch.clear()

        for call in out.tool_calls:
            if call.risk == "read" and call.decision == "allow":
                batch.append(call)
                continue
            await flush()
            results.append(await self._run_tool(inp, agent, out, call))
        await flush()
        self.carry.append = results
        return self._watch_for_loops(out.tool_calls, results)

    def _watch_for_loops(self, calls: list[ToolCallRef], results: list[ToolResult]) -> str | None:
        c = self.carry
        for call, result in zip(calls, results, strict=True):
            edited = result.workspace is not None and result.workspace != c.workspace
            c.doom, signal, text = observe(
                c.doom,
                call_key=call.args_digest,
                error_key=None if result.ok else result.preview[:200],
                tool=call.name,
                error_text=None if result.ok else result.preview,
                workspace_changed=edited,
            )
            c.submit = submission.record_call(
                c.submit, edited=edited, ran_required=call.runs_required, ok=result.ok, preview=result.preview
            )
            if result.workspace is not None:
                c.workspace = result.workspace
            if signal == "warn":
                c.inject.append(text)
                self.warn(text)
            elif signal == "stuck":
                return text
        return None

    async def _run_tool(
        self, inp: AgentInput, agent: AgentDefinition, out: ModelStepOutput, call: ToolCallRef
    ) -> ToolResult:
        c = self.carry
        refusal: str | None = None
        if call.name == submission.SUBMIT and agent.output_model:  # model_step judged it: it saw the arguments
            refusal = call.submit_error or "error: submit was not accepted"
        elif call.name not in agent.tools:
            refusal = f"error: unknown tool {call.name!r}; this agent's tools are: {', '.join(agent.tools)}"
        elif call.decision == "deny":
            refusal = f"denied: {call.decision_reason}"
        elif call.decision == "ask":
            refusal = await self.ask_operator(call, inp.approval_timeout_s)
        if refusal is not None:
            result = ToolResult(call_id=call.id, name=call.name, ok=False, preview=refusal)
        else:
            result = await workflow.execute_activity(
                call.name,
                ToolInput(
                    workspace=c.workspace,
                    reply_digest=out.reply_digest,
                    call_id=call.id,
                    name=call.name,
                    run_id=workflow.info().workflow_id,
                    commands=inp.commands,
                    readable=c.readable if call.name == "read_output" else [],
                ),
                result_type=ToolResult,
                start_to_close_timeout=timedelta(seconds=max(inp.timeouts.tool_s, inp.commands.timeout_s + 60)),
                heartbeat_timeout=timedelta(seconds=60),
                retry_policy=TOOL_RETRY,
                summary=call.summary,
            )
        if result.warning and result.warning not in self.live.warnings:
            self.warn(result.warning)
        if result.output_digest and result.output_bytes > agent.tool_output_cap_chars:
            c.readable.append(result.output_digest)
        self.event(self.live.step, "tool", call.summary, ok=result.ok, preview=result.preview)
        return result

    def _finish(
        self,
        state: RunState,
        *,
        final: str | None = None,
        final_digest: str | None = None,
        reason: str | None = None,
        output: tuple[dict[str, Any], str | None] | None = None,
    ) -> AgentResult:
        c = self.carry
        self.live.state = state
        self.live.final_answer = final
        self.live.reason = reason
        self.publish()
        return AgentResult(
            state=state,
            steps=c.spent.steps,
            usage=self.live.usage,
            final_answer=final,
            final_digest=final_digest,
            transcript=c.transcript,
            reason=reason,
            workspace=c.workspace if c.workspace.path is None else None,
            cost_usd=c.spent.cost_usd,
            output=output[0] if output else None,
            output_digest=output[1] if output else None,
        )
