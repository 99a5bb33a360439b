"""Circuit breakers: a run that keeps failing stops, even when each call is different.

The doom-loop watch (agents/doom_loop.py) catches the *same* call or the *same* error again and
again; these catch a model that flails with *different* calls that all fail. Two breakers, both
pure and deterministic (the workflow feeds them every call and every reply in order and carries
the small `BreakerState` in `AgentCarry`, so it survives replay and continue-as-new):

- **Per-tool errors**: a tool's consecutive failed calls (`ToolResult.ok` false: a command that
  exited non-zero, a refused or denied call, a bad argument ...), counted per tool name whatever
  the arguments. A success of that tool resets its count; a successful call that changed the
  workspace resets every tool's count (after an edit, failing tests or a failing build are the
  normal way to the fix, not a loop). At `warn_at(stop)` errors the model is warned once (a note
  on its next step naming the tool); at `stop` errors, after that warning, the run ends stuck.
- **No progress**: model replies in a row that made no progress, where *progress* is simply at
  least one successful tool call in the reply (a reply whose calls all failed, were refused or
  denied makes none). Replies that ask for no tool are not counted here: they end the run or are
  bounded elsewhere (the submit nudge, the cut-off continuations). Warned at `warn_at(stop)`
  replies, stopped at `stop`.

The thresholds are the run's `Limits.max_tool_errors` and `Limits.max_steps_without_progress`
(None: that breaker is off); the warning comes `WARN_MARGIN` before the stop.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import Limits

BreakerSignal = Literal["ok", "warn", "stuck"]

# Name for workflow.patched: a run recorded before the breakers existed replays without them.
CIRCUIT_BREAKERS = "circuit-breakers"

# The defaults (Limits'): consecutive failed calls of one tool that stop the run (6, warned at 4);
# replies in a row without a successful tool call that stop it (8, warned at 6).
TOOL_ERRORS_STOP: int = Limits.model_fields["max_tool_errors"].default
NO_PROGRESS_STOP: int = Limits.model_fields["max_steps_without_progress"].default
WARN_MARGIN = 2  # the warning comes this many failures before the stop


def warn_at(stop: int) -> int:
    """The count at which a breaker that stops at `stop` warns (always below the stop)."""
    return max(1, stop - WARN_MARGIN)


class BreakerState(BaseModel):
    """The breakers' counters: carried with the run (small; it travels through history)."""

    tool_errors: dict[str, int] = Field(default_factory=dict)  # tool name -> consecutive failed calls
    warned_tools: list[str] = Field(default_factory=list)  # warned about, not yet recovered
    idle_replies: int = 0  # replies in a row without a successful tool call
    idle_warned: bool = False
    warnings: int = 0  # warnings given in this run (for status and tests)


def tool_warning(tool: str, *, count: int, stop: int) -> str:
    return (
        f"The {tool} tool has failed {count} times in a row (with different arguments too). Stop and "
        "change your approach: read the errors, check your assumptions (paths, commands, what is "
        f"installed), use another tool, or finish and say what blocks you. If {tool} fails "
        f"{stop - count} more times in a row, the run stops."
    )


def tool_stop_reason(tool: str, *, count: int, warned_at: int) -> str:
    return f"stuck: {tool} failed {count} times in a row (circuit breaker), after a warning at {warned_at}"


def idle_warning(*, count: int, stop: int) -> str:
    return (
        f"Your last {count} steps made no progress: none of their tool calls succeeded. Change your "
        "approach, or finish and say what blocks you. After "
        f"{stop - count} more steps without a successful tool call, the run stops."
    )


def idle_stop_reason(*, count: int, warned_at: int) -> str:
    return (
        f"stuck: {count} steps in a row without a successful tool call (circuit breaker), "
        f"after a warning at {warned_at}"
    )


def after_call(
    state: BreakerState, *, tool: str, ok: bool, workspace_changed: bool, stop: int | None = TOOL_ERRORS_STOP
) -> tuple[BreakerState, BreakerSignal, str]:
    """Record one tool call's outcome; the new state, the signal and its text (the warning for the
    model on "warn", the reason on "stuck", "" on "ok"). The given state is not modified."""
    errors, warned = dict(state.tool_errors), list(state.warned_tools)
    signal: BreakerSignal = "ok"
    text = ""
    if ok and workspace_changed:
        errors, warned = {}, []
    elif ok:
        errors.pop(tool, None)
        warned = [t for t in warned if t != tool]
    else:
        count = errors.get(tool, 0) + 1
        errors[tool] = count
        if stop is not None:
            if count >= stop and tool in warned:
                signal, text = "stuck", tool_stop_reason(tool, count=count, warned_at=warn_at(stop))
            elif count >= warn_at(stop) and tool not in warned:
                warned.append(tool)
                signal, text = "warn", tool_warning(tool, count=count, stop=stop)
    new = state.model_copy(
        update={
            "tool_errors": errors,
            "warned_tools": warned,
            "warnings": state.warnings + (signal == "warn"),
        }
    )
    return new, signal, text


def after_reply(
    state: BreakerState, *, progressed: bool, stop: int | None = NO_PROGRESS_STOP
) -> tuple[BreakerState, BreakerSignal, str]:
    """Record one reply's calls as a whole: `progressed` if at least one of them succeeded."""
    if progressed:
        return state.model_copy(update={"idle_replies": 0, "idle_warned": False}), "ok", ""
    count = state.idle_replies + 1
    signal: BreakerSignal = "ok"
    text = ""
    warned = state.idle_warned
    if stop is not None:
        if count >= stop and warned:
            signal, text = "stuck", idle_stop_reason(count=count, warned_at=warn_at(stop))
        elif count >= warn_at(stop) and not warned:
            warned = True
            signal, text = "warn", idle_warning(count=count, stop=stop)
    new = state.model_copy(
        update={"idle_replies": count, "idle_warned": warned, "warnings": state.warnings + (signal == "warn")}
    )
    return new, signal, text
