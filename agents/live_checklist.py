"""The running agent's steps as a live checklist on the progress comment: what it did (each model
step and tool call, ✓ or ✗), what runs now, and a model call that is failing and being retried
(its error in one line, the attempt, when the next one starts). Pure: no I/O.

`activities/live_progress.py` gathers the facts (the agent run's `status` query and its pending
activities) into a `LiveChecklist`; `checklist_lines` renders it. Everything an agent run reports
quotes the model or the repository (tool call summaries, error messages, the model's name from the
policy), so each piece goes through `untrusted` like the rest of the comment: inert, one line,
capped. Items are plain list entries with ✓/✗ marks, not GitHub task-list boxes, which anyone
with write access could tick and so edit the comment under the run.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.agents.progress import untrusted
from shopfloor.models.agent_run import AgentStatus, StepEvent

MAX_DONE = 12  # finished entries shown; older ones are counted
MAX_RUNNING = 5  # calls shown as running at once (a reply's read-only calls run together)
SUMMARY_CHARS = 120
ERROR_CHARS = 160
TAIL_CHARS = 160
HOOKS_PREFIX = "before-submit hooks for "


class RunningCall(BaseModel):
    """One of the agent run's activities in flight, as Temporal describes it."""

    kind: Literal["model", "tool", "hooks"]
    summary: str = ""  # a tool call's summary (untrusted); empty for a model call
    attempt: int = Field(default=1, ge=1)
    max_attempts: int = Field(default=0, ge=0)  # 0: unbounded
    last_error: str | None = None  # the previous attempt's failure (untrusted)
    next_attempt_at: datetime | None = None  # set while it waits to be retried
    since: datetime | None = None  # when this attempt started
    text_tail: str | None = None  # a streaming model call's latest text (untrusted)

    @property
    def retrying(self) -> bool:
        return self.attempt > 1 or self.next_attempt_at is not None


class LiveChecklist(BaseModel):
    agent: str
    model: str
    step: int = 0
    max_steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    paused: bool = False
    done: list[StepEvent] = Field(default_factory=list, max_length=MAX_DONE)
    earlier: int = 0  # finished entries before `done`, not shown
    running: list[RunningCall] = Field(default_factory=list, max_length=MAX_RUNNING)


def live_checklist(status: AgentStatus, running: list[RunningCall]) -> LiveChecklist:
    """The checklist of an agent run as its status and its activities in flight show it."""
    done = status.events[-MAX_DONE:]
    # Event numbers count every event of the run, so the first one shown says how many came before.
    earlier = max(done[0].seq - 1, len(status.events) - len(done)) if done else 0
    return LiveChecklist(
        agent=status.agent,
        model=status.model,
        step=status.step,
        max_steps=status.max_steps,
        tokens=status.usage.input_tokens + status.usage.output_tokens,
        cost_usd=status.cost_usd,
        paused=status.paused,
        done=done,
        earlier=earlier,
        running=running[:MAX_RUNNING],
    )


def _name(agent: str) -> str:
    return re.sub(r"[^\w-]", "", agent)[:40] or "agent"


def _clock(at: datetime) -> str:
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    return at.strftime("%H:%M:%S UTC")


def _done_line(e: StepEvent, model: str) -> str:
    mark = "✓" if e.ok else "✗"
    if e.kind == "model":
        # A model step's summary is "<model>: <the calls it asked for, or its answer>".
        text = e.summary.removeprefix(f"{model}: ")
        return f"- {mark} step {e.step} · model: {untrusted(text, SUMMARY_CHARS)}"
    line = f"- {mark} {untrusted(e.summary, SUMMARY_CHARS)}"
    if not e.ok and e.preview:
        line += f" — {untrusted(e.preview, SUMMARY_CHARS)}"
    return line


def _attempts(call: RunningCall) -> str:
    return f"attempt {call.attempt}" + (f" of {call.max_attempts}" if call.max_attempts else "")


def _running_line(call: RunningCall, step: int) -> str:
    since = f" since {_clock(call.since)}" if call.since and call.next_attempt_at is None else ""
    if call.kind == "model":
        what = f"step {step} · model call"
    elif call.kind == "hooks":
        # Its activity's summary already says "before-submit hooks for <the submit>".
        what = f"before-submit hooks for {untrusted(call.summary.removeprefix(HOOKS_PREFIX), SUMMARY_CHARS)}"
    else:
        what = untrusted(call.summary, SUMMARY_CHARS)
    if not call.retrying:
        line = f"- ⏳ {what} running{since}"
    elif call.next_attempt_at is not None:
        line = f"- ⟳ {what} failing, retrying at {_clock(call.next_attempt_at)} ({_attempts(call)})"
    else:
        line = f"- ⟳ {what} failing, retrying now ({_attempts(call)}){since}"
    if call.retrying and call.last_error:
        line += f" · last error: {untrusted(call.last_error, ERROR_CHARS)}"
    if call.kind == "model" and call.text_tail and not call.retrying:
        line += f" · writing: {untrusted('…' + call.text_tail[-TAIL_CHARS:], TAIL_CHARS + 1)}"
    return line


def checklist_lines(live: LiveChecklist) -> list[str]:
    """The checklist in markdown: a header line, then one list item per entry, oldest first."""
    budget = f"step {live.step}" + (f" of {live.max_steps}" if live.max_steps else "")
    head = (
        f"**Now: the {_name(live.agent)} agent** ({untrusted(live.model, 80)}) · {budget} · "
        f"{live.tokens:,} tokens · ${live.cost_usd:.2f}"
    )
    lines = [head, ""]
    if live.earlier:
        lines.append(f"- … {live.earlier} earlier entr{'y' if live.earlier == 1 else 'ies'} not shown")
    lines += [_done_line(e, live.model) for e in live.done]
    lines += [_running_line(c, live.step) for c in live.running]
    if live.paused:
        lines.append("- ⏸ paused by an operator: it goes on once resumed")
    if not live.done and not live.running and not live.paused:
        lines.append("- ⏳ starting")
    return lines
