"""Compaction planning: which messages to fold into one summary, which to keep.

Pure and deterministic. The workflow describes the transcript as a list of `MessageMeta` (role,
estimated tokens, tool-call links), asks `plan_compaction` for a plan, and has a model call (an
activity) summarize the planned messages with `compaction_prompt`. The new transcript is then
`[goal, compaction message, *kept]`; the full messages stay in the blob store.

Rules:
- Nothing is planned while the total is within `budget_tokens`.
- Message 0 is the goal (the first user message) and is always kept verbatim.
- The kept tail holds at most `keep_fraction * budget_tokens` tokens (the goal aside), as many as
  fit: the newest ~60 % of the budget stays verbatim, which leaves room for the goal, the summary
  and the next steps. (The fraction is taken of the budget, not of the total, so one compaction
  brings an oversized transcript back under the budget.)
- The split never separates an assistant message with tool calls from the tool messages that
  answer it: when the split would fall inside such a group, it moves *later*, so the whole group
  is summarized (that keeps the tail within its share). The kept tail never starts with a tool
  message. The last group is always kept, even when it alone is over its share.
- A forced plan (the provider refused the conversation as too long although the estimate said it
  fits: the estimate was wrong) plans against half the estimated total, or the budget if that is
  smaller, so something is folded whenever anything can be.
- An earlier compaction message may be summarized again with the rest, but a plan that would
  only re-summarize compaction messages is pointless: the split then moves later until
  something else is summarized too, and when nothing else can be, no plan is returned.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field

from shopfloor.models.transcript import Message

COMPACTION_MARKER = "[compaction]"  # the first line of every compaction message
_MESSAGE_OVERHEAD_TOKENS = 4  # role and framing, per message


class MessageMeta(BaseModel):
    role: str
    tokens: int = Field(ge=0)
    tool_call_ids: list[str] = Field(default_factory=list)  # assistant: the calls it makes
    tool_call_id: str | None = None  # tool: the call it answers
    is_compaction: bool = False


class CompactionPlan(BaseModel):
    summarize: list[int]  # indices of the messages folded into one summary, in order
    keep: list[int]  # indices kept verbatim, in order: always 0 (the goal) and the newest tail


# What an image costs a model that takes it, about (Anthropic: up to ~1,600 for a large one; OpenAI:
# 85 plus 170 per 512-pixel tile); a text-only model's note costs less, so the estimate errs high.
IMAGE_TOKENS = 1600


def estimate_tokens(text: str) -> int:
    """About four characters a token: deterministic, provider-neutral, good enough for budgets."""
    return (len(text) + 3) // 4


def is_compaction_message(message: Message) -> bool:
    return message.role == "user" and message.content.startswith(COMPACTION_MARKER)


def message_meta(message: Message) -> MessageMeta:
    """The planning view of one message: its estimated size and its tool-call links."""
    tokens = estimate_tokens(message.content) + _MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS * len(message.images)
    for call in message.tool_calls:
        args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
        tokens += estimate_tokens(call.name) + estimate_tokens(args) + _MESSAGE_OVERHEAD_TOKENS
    return MessageMeta(
        role=message.role,
        tokens=tokens,
        tool_call_ids=[c.id for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
        is_compaction=is_compaction_message(message),
    )


def _split_points(messages: list[MessageMeta]) -> list[int]:
    """Indices s (1 <= s < n) where the kept tail may start: messages[s:] are kept."""
    n = len(messages)
    blocked = [False] * (n + 1)
    last_call_at: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.role == "tool":
            blocked[i] = True  # the tail never starts with a tool message
            a = last_call_at.get(m.tool_call_id) if m.tool_call_id is not None else None
            if a is not None:
                for s in range(a + 1, i + 1):  # a split in (a, i] would part the call from its result
                    blocked[s] = True
        if m.role == "assistant":
            for cid in m.tool_call_ids:
                last_call_at[cid] = i
    return [s for s in range(1, n) if not blocked[s]]


def plan_compaction(
    messages: list[MessageMeta], *, budget_tokens: int, keep_fraction: float = 0.6, force: bool = False
) -> CompactionPlan | None:
    """Which messages to summarize so that the transcript fits `budget_tokens` again; None when
    it already fits or when nothing can usefully be summarized. `force`: the provider found it too
    long whatever the estimate says; plan against half the estimated total (or the budget)."""
    if budget_tokens < 1:
        raise ValueError(f"budget_tokens must be positive, not {budget_tokens}")
    if not 0.0 < keep_fraction < 1.0:
        raise ValueError(f"keep_fraction must be between 0 and 1, not {keep_fraction}")
    total = sum(m.tokens for m in messages)
    if force:
        budget_tokens = max(1, min(budget_tokens, total // 2))
    if total <= budget_tokens or len(messages) < 3:
        return None
    share = keep_fraction * budget_tokens
    # tail[s] = tokens of messages[s:]
    tail = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        tail[i] = tail[i + 1] + messages[i].tokens
    # Split points with something besides old summaries to summarize before them (message 0 is
    # never summarized). The earliest one whose tail fits the share keeps the most; when none
    # fits, the latest one keeps only the last group.
    first_new = next((i for i in range(1, len(messages)) if not messages[i].is_compaction), None)
    if first_new is None:
        return None
    points = [s for s in _split_points(messages) if s > first_new]
    if not points:
        return None
    split = next((s for s in points if tail[s] <= share), points[-1])
    return CompactionPlan(summarize=list(range(1, split)), keep=[0, *range(split, len(messages))])


def compaction_prompt(*, goal: str | None = None, target_tokens: int = 1500) -> str:
    """The instruction for the summarizing model call; the messages to fold follow it.

    The summary replaces those messages for the agent, so it must carry everything the agent
    needs to go on without them.
    """
    words = max(100, int(target_tokens * 0.75))
    goal_part = (
        f"\nThe agent's goal, for reference (it stays in the transcript verbatim):\n{goal.strip()}\n" if goal else ""
    )
    return f"""You are compacting the working transcript of a software agent. The messages below are
the older part of its work; they will be replaced by your summary, and the agent will continue
from the summary and the newer messages alone. It cannot see these messages again, except by
reading a tool output through `read_output` with the digest you keep.
{goal_part}
Write a faithful summary, at most about {words} words. Keep:
- the goal and any instructions or constraints given by the user or operator along the way;
- what was done and found, with exact file paths, function and class names, commands, line
  numbers and output digests where they matter;
- the decisions taken and why, and the approaches that were tried and abandoned;
- the files created or changed, and how;
- the errors met, quoted exactly where short, and whether they were resolved;
- what is left to do, and the next step the agent was about to take.
If the messages include an earlier summary (it starts with "{COMPACTION_MARKER}"), merge it into
yours: nothing it records may be lost. Do not invent anything; leave out what is unknown. Do not
call tools and do not continue the work: write only the summary.

Use exactly this format (markdown; write "none" under a heading with nothing to report):
## Goal and constraints
## Done and found
## Decisions
## Files touched
## Errors
## Remaining work
"""


def compaction_message(summary: str, folded: int, model_turns: int = 0) -> Message:
    """The message that stands in for the `folded` summarized messages, `model_turns` of which
    were the model's own replies (recorded so a turn count survives compaction)."""
    return Message(
        role="user",
        content=(
            f"{COMPACTION_MARKER} Summary of {folded} earlier messages of this run, which were "
            f"compacted to save space ({model_turns} model turns):\n\n{summary.strip()}"
        ),
    )


_TURNS = re.compile(r"\((\d+) model turns\):")


def folded_model_turns(message: Message) -> int:
    """How many of the model's replies a compaction message stands for (0 for other messages)."""
    if not is_compaction_message(message):
        return 0
    match = _TURNS.search(message.content.split("\n", 1)[0])
    return int(match.group(1)) if match else 0
