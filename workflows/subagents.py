"""An agent run's `delegate` calls (agents/subagents.py): each starts a read-only child
AgentWorkflow, `<run>/sub-<step>-<call>`, on the run's workspace as it is now, with a share of
what the run has left, and answers with the child's answer alone. The child's tokens and cost
count in the run's own spending (and so in its pipeline's). An operator's cancel of the run is
passed on to its children; a run cancelled through Temporal, or ended, takes them with it.

A reply's delegate calls run at once: the loop runs a reply's allowed read-risk calls together.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents import subagents
    from shopfloor.models.agent_run import AgentInput, AgentResult, CommandPolicy, ToolCallRef, ToolInput, ToolResult
    from shopfloor.workflows.activity_catalogue import failure_message
    from shopfloor.workflows.late_cancel import unless_cancelled

if TYPE_CHECKING:
    from shopfloor.workflows.agent import AgentWorkflow

# A run recorded before subagents answered a `delegate` call as an unknown tool, and replays so.
SUBAGENTS_PATCH = "subagents"


class SubagentRunner:
    def __init__(self, host: AgentWorkflow) -> None:
        self.host = host  # the run: its input (with its sandbox's facts), carry, controls

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        """Run `call`'s subagent to its end; its answer, or why there is none, as the call's result."""
        if not workflow.patched(SUBAGENTS_PATCH):
            return subagents.refused(call, f"unknown tool {call.name!r}")
        inp, carry = self.host.inp, self.host.carry
        if inp.depth >= subagents.MAX_DEPTH:
            return subagents.refused(call, "a subagent cannot delegate: answer from what you can read yourself")
        if call.delegation is None:
            return subagents.refused(call, "delegate needs a `question` (a string) and may have `max_steps`")
        limits = subagents.child_limits(carry.limits, carry.spent, workflow.now().timestamp(), call.delegation)
        if isinstance(limits, str):
            return subagents.refused(call, limits)
        run_id = subagents.child_id(workflow.info().workflow_id, self.host.live.step, call)
        child = AgentInput(
            agent=subagents.SUBAGENT,
            model=carry.model or inp.model,
            goal=subagents.child_goal(inp.agent, call.delegation.prompt),
            workspace=request.workspace,  # the run's latest checkpoint: the child sees its edits
            limits=limits,
            timeouts=inp.timeouts,
            stage=inp.stage,
            issue=inp.issue,
            commands=CommandPolicy(),  # the explore agent runs no commands
            permissions=inp.permissions,
            text_actions=inp.text_actions,
            approval_timeout_s=inp.approval_timeout_s,
            instructions=inp.instructions,
            environment=inp.environment,  # the run's sandbox, already inspected
            depth=inp.depth + 1,
        )
        try:
            handle = await workflow.start_child_workflow(
                "AgentWorkflow",
                child,
                id=run_id,
                result_type=AgentResult,
                # An ended parent asks its children to end (with their checkpoint), not a hard stop.
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"subagent ({subagents.SUBAGENT}) of {workflow.info().workflow_id}, step {self.host.live.step}",
                static_details=f"**Question from `{inp.agent}`**\n\n{call.delegation.prompt[:1500]}",
            )
        except WorkflowAlreadyStartedError:  # the model reused a call id within a step
            return subagents.refused(call, f"a subagent {run_id} was started already: give each call its own id")
        try:
            await workflow.wait_condition(lambda: handle.done() or self.host.cancel_reason is not None)
        except asyncio.CancelledError:  # this run is cancelled through Temporal: the child goes too
            handle.cancel()
            raise
        if not handle.done():  # an operator cancelled this run: its child stops now, not at its next step
            handle.cancel()
        try:
            result: AgentResult = await unless_cancelled(handle)
        except ChildWorkflowError as exc:
            return subagents.refused(call, f"the subagent {run_id} failed: {failure_message(exc)}")
        except asyncio.CancelledError:
            if self.host.cancel_reason is None:
                raise
            return subagents.refused(call, f"the subagent {run_id} was cancelled with this run")
        carry.spent = carry.spent.after_subagent(result.usage, result.cost_usd)
        return subagents.answer(call, run_id, result)
