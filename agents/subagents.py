"""Subagents: an agent hands a bounded question to a read-only child agent (`explore`) through the
`delegate` tool, and reads back only the child's answer, so its own context stays small.

This module is the pure part: the child's limits (a share of what the parent has left), its goal,
its workflow id and the tool result the parent reads. workflows/subagents.py starts the child as a
child AgentWorkflow (visible in the UI, cancelled with its parent) and adds its spending to the
parent's.
"""

from __future__ import annotations

import re

from shopfloor.agents.budget import Spent
from shopfloor.models.agent_run import AgentResult, Delegation, Limits, ToolCallRef, ToolResult

SUBAGENT = "explore"  # read-only, and without `delegate`: a subagent cannot start another
MAX_DEPTH = 1  # delegations below a run a person or a pipeline started
DEFAULT_STEPS = 15
ANSWER_CHARS = 8_000  # of the child's answer, as the parent reads it
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def child_limits(limits: Limits, spent: Spent, now: float, delegation: Delegation) -> Limits | str:
    """The child's limits: its own steps, and an equal share (among the reply's delegate calls,
    which run at once) of the cost and tokens the parent has left, and the parent's remaining wall
    time. A reason instead when the parent has nothing left to give."""
    share = max(delegation.of, 1)
    cost = tokens = wall = None
    if limits.max_cost_usd is not None:
        left = limits.max_cost_usd - spent.cost_usd
        if left <= 0:
            return f"the run's cost budget (${limits.max_cost_usd:g}) is spent: no subagent can start"
        cost = left / share
    if limits.max_tokens is not None:
        left_tokens = limits.max_tokens - spent.tokens
        if left_tokens < share:
            return f"the run's token budget ({limits.max_tokens:,}) is spent: no subagent can start"
        tokens = left_tokens // share
    if limits.max_wall_s is not None and spent.started_at is not None:
        wall = limits.max_wall_s - (now - spent.started_at)
        if wall <= 0:
            return "the run's wall-time limit is reached: no subagent can start"
    return Limits(
        max_steps=delegation.max_steps or DEFAULT_STEPS,
        max_cost_usd=cost,
        max_tokens=tokens,
        max_wall_s=wall,
        max_tool_errors=limits.max_tool_errors,
        max_steps_without_progress=limits.max_steps_without_progress,
    )


def child_goal(parent_agent: str, question: str) -> str:
    return (
        f"The `{parent_agent}` agent working on this repository asks you a question:\n\n{question}\n\n"
        "Answer it from the repository. Your final answer is all that agent will see of your work: make it "
        "complete and concise (the paths, line numbers and names it needs), in at most 400 words."
    )


def child_id(parent_id: str, step: int, call: ToolCallRef) -> str:
    """`<parent>/sub-<step>-<call id>`: unique per call (a reply's call ids differ, steps go on
    across continue-as-new), readable in the UI."""
    return f"{parent_id}/sub-{step}-{_UNSAFE_ID.sub('_', call.id)[:40]}"


def refused(call: ToolCallRef, reason: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, preview=f"error: {reason}")


def answer(call: ToolCallRef, run_id: str, result: AgentResult) -> ToolResult:
    """What the parent reads: the child's answer (cut at ANSWER_CHARS) and a line saying which run
    it was and what it spent; or why it ended without one."""
    spent = f"{result.steps} step{'' if result.steps == 1 else 's'}" + (
        f", ${result.cost_usd:.4f}" if result.cost_usd else ""
    )
    if result.state == "completed" and result.final_answer:
        text = result.final_answer
        if len(text) > ANSWER_CHARS:
            text = text[:ANSWER_CHARS] + f"\n[answer cut at {ANSWER_CHARS} characters]"
        return ToolResult(call_id=call.id, name=call.name, ok=True, preview=f"{text}\n\n[subagent {run_id}: {spent}]")
    why = f": {result.reason}" if result.reason else ""
    return ToolResult(
        call_id=call.id,
        name=call.name,
        ok=False,
        preview=f"error: the subagent {run_id} ended {result.state}{why}, without an answer ({spent})",
    )
