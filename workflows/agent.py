"""AgentWorkflow: one agent run, every model call and tool call a durable activity (DESIGN §3).

The workflow holds references only: the transcript is a manifest digest in the blob store, tool
outputs are digests with short previews. A crashed worker's run resumes elsewhere from history
without repeating a completed model call.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.registry import get_agent
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentResult,
        AgentStatus,
        ModelStepInput,
        ModelStepOutput,
        RunState,
        StepEvent,
        ToolCallRef,
        ToolInput,
        ToolResult,
    )
    from shopfloor.models.transcript import Usage
    from shopfloor.search_attributes import SHOPFLOOR_AGENT, SHOPFLOOR_ISSUE, SHOPFLOOR_REPO, SHOPFLOOR_STAGE

MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["ModelCallRejected"],
)
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
EVENTS_KEPT = 30


def _cause(exc: BaseException) -> str:
    """The activity's own account of the failure: the first ApplicationError in the chain."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.message
        current = current.__cause__
    return str(exc) or type(exc).__name__


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self._status = AgentStatus(
            agent=inp.agent,
            model=inp.model,
            repo=inp.workspace.repo,
            stage=inp.stage,
            max_steps=inp.limits.max_steps,
        )
        self._seq = 0

    @workflow.query(name="status")
    def status(self) -> AgentStatus:
        return self._status

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

        transcript: str | None = None
        append: list[ToolResult] = []
        try:
            for step in range(1, inp.limits.max_steps + 1):
                self._status.step = step
                out = await workflow.execute_activity(
                    "model_step",
                    ModelStepInput(
                        agent=inp.agent,
                        model=inp.model,
                        step=step,
                        transcript=transcript,
                        goal=inp.goal if transcript is None else None,
                        append=append,
                    ),
                    result_type=ModelStepOutput,
                    start_to_close_timeout=timedelta(seconds=inp.timeouts.model_call_s),
                    heartbeat_timeout=timedelta(seconds=inp.timeouts.model_heartbeat_s),
                    retry_policy=MODEL_RETRY,
                    summary=f"{inp.model} step {step}",
                )
                transcript = out.transcript
                self._status.usage = self._status.usage + out.usage
                asked = ", ".join(c.summary for c in out.tool_calls)
                self._event(step, "model", f"{inp.model}: " + (asked or "final answer"), preview=out.text_preview)
                if not out.tool_calls:
                    return self._finish("completed", transcript, final=out.final_text, final_digest=out.reply_digest)
                append = await self._run_tools(inp, agent.tools, out)
        except ActivityError as exc:
            reason = _cause(exc)
            self._finish("failed", transcript, reason=reason)
            raise ApplicationError(f"{inp.agent} run failed: {reason}", type="AgentRunFailed", non_retryable=True) from exc
        return self._finish(
            "limit_reached", transcript, reason=f"step limit reached ({inp.limits.max_steps} steps)"
        )

    async def _run_tools(self, inp: AgentInput, allowed: list[str], out: ModelStepOutput) -> list[ToolResult]:
        # Read-only tools only so far, so one reply's calls run concurrently; results keep call order.
        return list(await asyncio.gather(*(self._run_tool(inp, allowed, out, c) for c in out.tool_calls)))

    async def _run_tool(
        self, inp: AgentInput, allowed: list[str], out: ModelStepOutput, call: ToolCallRef
    ) -> ToolResult:
        if call.name not in allowed:
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                ok=False,
                preview=f"error: unknown tool {call.name!r}; this agent's tools are: {', '.join(allowed)}",
            )
        else:
            result = await workflow.execute_activity(
                call.name,
                ToolInput(workspace=inp.workspace, reply_digest=out.reply_digest, call_id=call.id, name=call.name),
                result_type=ToolResult,
                start_to_close_timeout=timedelta(seconds=inp.timeouts.tool_s),
                retry_policy=TOOL_RETRY,
                summary=call.summary,
            )
        self._event(self._status.step, "tool", call.summary, ok=result.ok, preview=result.preview)
        return result

    def _event(self, step: int, kind: str, summary: str, *, ok: bool = True, preview: str = "") -> None:
        self._seq += 1
        event = StepEvent(seq=self._seq, step=step, kind=kind, summary=summary, ok=ok, preview=preview[:160])  # type: ignore[arg-type]
        self._status.events = [*self._status.events[-(EVENTS_KEPT - 1) :], event]
        self._publish()

    def _publish(self) -> None:
        s = self._status
        lines = [
            f"**{s.agent}** on `{s.repo}` · {s.model}",
            f"state: **{s.state}** · step {s.step}/{s.max_steps} · "
            f"tokens in {s.usage.input_tokens} / out {s.usage.output_tokens}",
        ]
        if s.reason:
            lines.append(f"reason: {s.reason}")
        lines += [f"- {'✓' if e.ok else '✗'} step {e.step}: {e.summary}" for e in s.events[-8:]]
        workflow.set_current_details("\n".join(lines))

    def _finish(
        self,
        state: RunState,
        transcript: str | None,
        *,
        final: str | None = None,
        final_digest: str | None = None,
        reason: str | None = None,
    ) -> AgentResult:
        self._status.state = state
        self._status.final_answer = final
        self._status.reason = reason
        self._publish()
        return AgentResult(
            state=state,
            steps=self._status.step,
            usage=self._status.usage,
            final_answer=final,
            final_digest=final_digest,
            transcript=transcript,
            reason=reason,
        )
