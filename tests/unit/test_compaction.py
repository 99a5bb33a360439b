"""Compaction planning: what is summarized, what stays verbatim, and tool groups kept whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopfloor.agents.compaction import (
    COMPACTION_MARKER,
    CompactionPlan,
    MessageMeta,
    compaction_message,
    compaction_prompt,
    estimate_tokens,
    is_compaction_message,
    message_meta,
    plan_compaction,
)
from shopfloor.models.transcript import Message, ToolCall

pytestmark = pytest.mark.fast


def user(tokens: int, *, compaction: bool = False) -> MessageMeta:
    return MessageMeta(role="user", tokens=tokens, is_compaction=compaction)


def text(tokens: int) -> MessageMeta:
    return MessageMeta(role="assistant", tokens=tokens)


def calls(tokens: int, *ids: str) -> MessageMeta:
    return MessageMeta(role="assistant", tokens=tokens, tool_call_ids=list(ids))


def result(tokens: int, call_id: str) -> MessageMeta:
    return MessageMeta(role="tool", tokens=tokens, tool_call_id=call_id)


@pytest.mark.parametrize(
    ("text_in", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100), ("é" * 8, 2)],
)
def test_estimate_tokens(text_in: str, tokens: int) -> None:
    assert estimate_tokens(text_in) == tokens


def test_within_budget_is_none() -> None:
    msgs = [user(10), calls(10, "c1"), result(10, "c1"), text(10)]
    assert plan_compaction(msgs, budget_tokens=40) is None
    assert plan_compaction(msgs, budget_tokens=1000) is None


def test_simple_plan_keeps_the_newest_share() -> None:
    # budget 100, share 60: the tail from index 4 on holds 50 tokens; from index 2 on, 90.
    msgs = [user(10), text(20), calls(20, "a"), result(20, "a"), calls(25, "b"), result(25, "b")]
    plan = plan_compaction(msgs, budget_tokens=100)
    assert plan == CompactionPlan(summarize=[1, 2, 3], keep=[0, 4, 5])


def test_split_moves_later_rather_than_parting_a_group() -> None:
    # One assistant message with two calls; the share would fit only the last result.
    msgs = [user(5), text(50), calls(10, "a", "b"), result(30, "a"), result(30, "b"), text(10)]
    plan = plan_compaction(msgs, budget_tokens=100, keep_fraction=0.5)
    assert plan is not None
    assert plan.keep == [0, 5]
    assert plan.summarize == [1, 2, 3, 4]


def test_the_last_group_is_kept_even_when_over_its_share() -> None:
    msgs = [user(5), text(50), calls(10, "a"), result(500, "a")]
    plan = plan_compaction(msgs, budget_tokens=100)
    assert plan == CompactionPlan(summarize=[1], keep=[0, 2, 3])


def test_nothing_to_summarize_is_none() -> None:
    # Everything after the goal is one group: there is no split point.
    msgs = [user(5), calls(10, "a", "b"), result(500, "a"), result(500, "b")]
    assert plan_compaction(msgs, budget_tokens=100) is None
    assert plan_compaction([user(500)], budget_tokens=100) is None
    assert plan_compaction([user(500), text(500)], budget_tokens=100) is None


def test_the_goal_is_never_summarized_even_when_huge() -> None:
    msgs = [user(1000), text(10), text(10), text(10)]
    plan = plan_compaction(msgs, budget_tokens=100)
    assert plan is not None and 0 in plan.keep and 0 not in plan.summarize


def test_an_earlier_compaction_is_summarized_again_with_the_rest() -> None:
    msgs = [user(10), user(40, compaction=True), text(40), calls(10, "a"), result(10, "a")]
    plan = plan_compaction(msgs, budget_tokens=100)
    assert plan == CompactionPlan(summarize=[1, 2], keep=[0, 3, 4])


def test_only_a_compaction_to_summarize_is_none() -> None:
    msgs = [user(10), user(80, compaction=True), calls(10, "a"), result(100, "a")]
    assert plan_compaction(msgs, budget_tokens=100) is None


def test_interleaved_groups_are_not_parted() -> None:
    # The call "a" is answered only after a later message: no split inside (1, 4].
    msgs = [user(5), calls(30, "a"), user(30), calls(30, "b"), result(30, "a"), result(30, "b"), text(30)]
    plan = plan_compaction(msgs, budget_tokens=100, keep_fraction=0.9)
    assert plan is not None
    assert plan.keep == [0, 6]


def test_pending_calls_at_the_end_are_fine() -> None:
    msgs = [user(5), text(100), text(100), calls(10, "a")]
    plan = plan_compaction(msgs, budget_tokens=100)
    assert plan == CompactionPlan(summarize=[1, 2], keep=[0, 3])


@pytest.mark.parametrize(("budget", "fraction"), [(0, 0.6), (100, 0.0), (100, 1.0), (100, 1.5)])
def test_bad_arguments(budget: int, fraction: float) -> None:
    with pytest.raises(ValueError):
        plan_compaction([user(1)], budget_tokens=budget, keep_fraction=fraction)


def test_message_meta_and_compaction_message() -> None:
    m = Message(
        role="assistant",
        content="let me look",
        tool_calls=[ToolCall(id="c1", name="grep", arguments={"pattern": "x" * 40})],
    )
    meta = message_meta(m)
    assert meta.role == "assistant" and meta.tool_call_ids == ["c1"] and not meta.is_compaction
    assert meta.tokens > estimate_tokens("let me look") + 10
    t = message_meta(Message(role="tool", content="out", tool_call_id="c1", name="grep"))
    assert t.tool_call_id == "c1"
    c = compaction_message("## Goal and constraints\nfix it", folded=7)
    assert c.role == "user" and c.content.startswith(COMPACTION_MARKER) and "7 earlier messages" in c.content
    assert is_compaction_message(c) and message_meta(c).is_compaction
    assert not is_compaction_message(Message(role="user", content="fix the bug"))


def test_compaction_prompt() -> None:
    prompt = compaction_prompt(goal="Fix the login bug", target_tokens=800)
    for needed in [
        "Fix the login bug",
        "## Goal and constraints",
        "## Decisions",
        "## Files touched",
        "## Errors",
        "## Remaining work",
        COMPACTION_MARKER,
        "read_output",
        "600 words",
    ]:
        assert needed in prompt
    assert "goal, for reference" not in compaction_prompt()
    assert compaction_prompt() == compaction_prompt()


# --- properties --------------------------------------------------------------------------------


@st.composite
def transcripts(draw: st.DrawFn) -> list[MessageMeta]:
    """A goal, then turns: text replies, steering messages, compactions and tool-call groups
    (an assistant message with 1-3 calls followed by their results, possibly the last unanswered)."""
    msgs = [user(draw(st.integers(1, 300)))]
    n = 0
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["text", "user", "compaction", "group", "group", "group"]))
        size = st.integers(0, 400)
        if kind == "text":
            msgs.append(text(draw(size)))
        elif kind == "user":
            msgs.append(user(draw(size)))
        elif kind == "compaction":
            msgs.append(user(draw(size), compaction=True))
        else:
            ids = [f"c{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            msgs.append(calls(draw(size), *ids))
            msgs.extend(result(draw(size), cid) for cid in ids)
    if draw(st.booleans()):
        msgs.append(calls(draw(st.integers(0, 100)), f"c{n}"))  # pending: not answered yet
    return msgs


@given(transcripts(), st.integers(1, 3000), st.sampled_from([0.3, 0.5, 0.6, 0.8]))
def test_plan_properties(msgs: list[MessageMeta], budget: int, fraction: float) -> None:
    plan = plan_compaction(msgs, budget_tokens=budget, keep_fraction=fraction)
    total = sum(m.tokens for m in msgs)
    if total <= budget:
        assert plan is None
    if plan is None:
        return
    # a partition of all indices, in order, none lost; the goal kept
    assert sorted(plan.summarize + plan.keep) == list(range(len(msgs)))
    assert plan.summarize and plan.keep[0] == 0 and 0 not in plan.summarize
    assert plan.summarize == sorted(plan.summarize) and plan.keep == sorted(plan.keep)
    # the summarized part is contiguous, right after the goal; the kept tail is contiguous
    assert plan.summarize == list(range(1, plan.summarize[-1] + 1))
    tail = plan.keep[1:]
    assert tail and tail == list(range(tail[0], len(msgs)))
    # the tail never starts with a tool message, and never holds a result without its call
    assert msgs[tail[0]].role != "tool"
    kept_calls = {cid for i in tail for cid in msgs[i].tool_call_ids}
    for i in tail:
        if msgs[i].role == "tool":
            assert msgs[i].tool_call_id in kept_calls
    # no call is summarized while its result is kept (checked above), nor the reverse
    summarized_results = {msgs[i].tool_call_id for i in plan.summarize if msgs[i].role == "tool"}
    assert not (summarized_results & kept_calls)
    # something other than an old summary is summarized
    assert not all(msgs[i].is_compaction for i in plan.summarize)
    # the tail fits its share whenever the last group alone does; then goal + tail <= budget
    # as long as the goal fits the rest
    share = fraction * budget
    tail_tokens = sum(msgs[i].tokens for i in tail)
    last_group_start = max(s for s in range(1, len(msgs)) if msgs[s].role != "tool" and _no_open_call(msgs, s))
    if sum(m.tokens for m in msgs[last_group_start:]) <= share:
        assert tail_tokens <= share
        if msgs[0].tokens <= budget - share:
            assert msgs[0].tokens + tail_tokens <= budget


def _no_open_call(msgs: list[MessageMeta], s: int) -> bool:
    before = {cid for m in msgs[:s] for cid in m.tool_call_ids}
    return not any(m.role == "tool" and m.tool_call_id in before for m in msgs[s:])


@given(transcripts(), st.integers(1, 3000))
def test_plan_is_deterministic(msgs: list[MessageMeta], budget: int) -> None:
    assert plan_compaction(msgs, budget_tokens=budget) == plan_compaction(list(msgs), budget_tokens=budget)
