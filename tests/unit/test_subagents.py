"""Subagents, the pure part (agents/subagents.py): what a child may spend, what the parent reads,
and the `delegate` call's judging in a model step."""

from __future__ import annotations

import pytest

from shopfloor.agents import subagents
from shopfloor.agents.budget import Spent
from shopfloor.agents.permissions import classify
from shopfloor.agents.registry import AGENTS
from shopfloor.agents.step import delegation
from shopfloor.models.agent_run import AgentResult, Delegation, Limits, ToolCallRef
from shopfloor.models.transcript import ToolCall, Usage

pytestmark = pytest.mark.fast

CALL = ToolCallRef(id="call 1/../x", name="delegate")


def test_children_of_one_reply_share_what_the_parent_has_left():
    limits = Limits(max_steps=40, max_cost_usd=1.0, max_tokens=10_000, max_wall_s=600)
    spent = Spent(steps=3, input_tokens=3_000, output_tokens=1_000, cost_usd=0.4, started_at=1000.0)
    child = subagents.child_limits(limits, spent, 1100.0, Delegation(prompt="q", max_steps=7, of=3))
    assert isinstance(child, Limits)
    assert child.max_steps == 7 and child.max_cost_usd == pytest.approx(0.2) and child.max_tokens == 2_000
    assert child.max_wall_s == pytest.approx(500)  # they run at once: each has the rest of the time
    alone = subagents.child_limits(Limits(), Spent(), 0.0, Delegation(prompt="q"))
    assert isinstance(alone, Limits) and alone.max_steps == subagents.DEFAULT_STEPS
    assert alone.max_cost_usd is None and alone.max_tokens is None and alone.max_wall_s is None


@pytest.mark.parametrize(
    ("limits", "spent", "words"),
    [
        (Limits(max_cost_usd=0.5), Spent(cost_usd=0.5), "cost budget"),
        (Limits(max_tokens=100), Spent(input_tokens=99), "token budget"),
        (Limits(max_wall_s=60), Spent(started_at=0.0), "wall-time"),
    ],
)
def test_a_parent_with_nothing_left_starts_no_child(limits, spent, words):
    reason = subagents.child_limits(limits, spent, 61.0, Delegation(prompt="q", of=2))
    assert isinstance(reason, str) and words in reason


def test_the_parent_reads_the_answer_or_why_there_is_none():
    done = AgentResult(state="completed", steps=2, final_answer="It is in a.py.", cost_usd=0.01)
    read = subagents.answer(CALL, "run/sub-1-x", done)
    assert read.ok and read.preview.startswith("It is in a.py.\n\n[subagent run/sub-1-x: 2 steps, $0.0100]")
    long = subagents.answer(CALL, "r", done.model_copy(update={"final_answer": "x" * 9000}))
    assert f"[answer cut at {subagents.ANSWER_CHARS} characters]" in long.preview
    stopped = subagents.answer(CALL, "r", AgentResult(state="limit_reached", steps=5, reason="step limit"))
    assert (
        not stopped.ok
        and stopped.preview == "error: the subagent r ended limit_reached: step limit, without an answer (5 steps)"
    )


def test_child_ids_are_safe_and_unique_per_step_and_call():
    assert subagents.child_id("agent/x", 4, CALL) == "agent/x/sub-4-call_1_.._x"


def test_a_childs_spending_counts_in_the_parents_tokens_and_cost_not_its_steps():
    spent = Spent(steps=2, input_tokens=10, output_tokens=5, cost_usd=0.1)
    after = spent.after_subagent(Usage(input_tokens=100, output_tokens=20), 0.05)
    assert (after.steps, after.tokens, after.cost_usd) == (2, 135, pytest.approx(0.15))


def test_delegate_is_judged_like_a_read_and_its_question_goes_to_the_workflow():
    assert classify("delegate", {"question": "Where?"}).decision == "allow"
    refused = classify("delegate", {"question": ""})
    assert refused.decision == "deny" and "question" in refused.reason
    assert classify("delegate", {"question": "q", "max_steps": 99}).decision == "deny"
    call = ToolCall(id="c", name="delegate", arguments={"question": "Where is x?", "max_steps": 3})
    assert delegation(call, 2) == Delegation(prompt="Where is x?", max_steps=3, of=2)
    assert delegation(ToolCall(id="c", name="grep", arguments={"pattern": "x"}), 1) is None
    assert delegation(ToolCall(id="c", name="delegate", arguments={"q": 1}), 1) is None


def test_run_python_is_judged_as_a_read_unless_the_repository_turns_it_off():
    from shopfloor.agents.permissions import PermissionPolicy

    assert classify("run_python", {"code": "print(1)"}).decision == "allow"
    off = classify("run_python", {"code": "print(1)"}, PermissionPolicy(code_mode=False))
    assert off.decision == "deny" and "code_mode: false" in off.reason
    assert classify("run_python", {"code": ""}).decision == "deny"


def test_the_subagent_cannot_delegate_and_the_factory_agents_can():
    assert "delegate" not in AGENTS[subagents.SUBAGENT].tools
    assert all("delegate" in AGENTS[a].tools for a in ("code", "triage", "fix", "review", "merge"))
    assert "delegate" not in AGENTS["assess_alert"].tools  # an alert's assessment stays cheap
