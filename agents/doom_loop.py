"""Doom-loop detection: the same call, or the same error, again and again.

Pure and deterministic: the workflow feeds every tool call it runs to `observe`, in call order,
and keeps the returned `DoomLoopState` (it is small and serializable, so it survives a
continue-as-new inside the workflow input).

Rules, with `threshold` = 3 and a window of the last `window` = 20 observed calls:

- **Same call**: when one `call_key` (the digest of tool name + canonical arguments,
  `ToolCallRef.args_digest`) occurs `threshold` times within the window, the signal is "warn"
  once, with a message for the model. The occurrences need not be consecutive, so an
  alternating loop (A, B, A, B, A) is caught too, on the third A, as is any cycle short enough to
  repeat `threshold` times within the window. A different call in between does *not* reset it.
- **Same error**: when one `error_key` (a normalized text or digest of a failed result; None for
  a success) occurs `threshold` times within the window, whatever the arguments, the same.
- **After a warning**: the warned call key, or the warned error key, occurring once more ->
  "stuck", with a reason. A warning is remembered until the workspace changes (below) or it falls
  out of a bounded list of the last `window` warnings.
- **Workspace changed** (`workspace_changed=True`, optional): the call changed the workspace
  (a new checkpoint). Reading the same file or running the same tests again after an edit may
  legitimately return something new, so the window and the warnings start afresh (the changing
  call itself is the first entry of the new window). A loop that keeps rewriting the workspace
  is left to the step limit.

The signal for one call is the strongest of the two rules: "stuck" over "warn" over "ok".
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

LoopSignal = Literal["ok", "warn", "stuck"]
LoopKind = Literal["call", "error"]

DEFAULT_WINDOW = 20
_MAX_KEY_CHARS = 80  # longer keys (error texts) are stored as their digest: the state stays small


class DoomLoopState(BaseModel):
    """The last `window` calls and errors, and the keys already warned about."""

    window: int = Field(default=DEFAULT_WINDOW, ge=1)
    calls: list[str] = Field(default_factory=list)  # call keys, oldest first
    errors: list[str] = Field(default_factory=list)  # parallel to `calls`: error key, "" on success
    warned_calls: list[str] = Field(default_factory=list)
    warned_errors: list[str] = Field(default_factory=list)
    warnings: int = 0  # how many warnings were given in this run (for status and tests)


def _key(text: str) -> str:
    if len(text) <= _MAX_KEY_CHARS:
        return text
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def warning_message(kind: LoopKind, *, count: int, tool: str | None = None, error: str | None = None) -> str:
    """What the model is told when a loop is first noticed."""
    if kind == "call":
        what = f"called {tool}" if tool else "made the same tool call"
        return (
            f"You have {what} with the same arguments {count} times; the result will not change. "
            "Try something different, or finish and say what blocks you."
        )
    shown = f" ({error.strip()[:200]})" if error and error.strip() else ""
    return (
        f"Your tool calls have failed with the same error {count} times{shown}; repeating them will "
        "not help. Read the error, change your approach, or finish and say what blocks you."
    )


def stuck_reason(kind: LoopKind, *, count: int, tool: str | None = None) -> str:
    """Why the run stopped as `stuck`: for the run's status and result."""
    if kind == "call":
        what = f"{tool} with the same arguments" if tool else "the same tool call"
        return f"stuck: called {what} {count} times in the last calls, and again after a warning"
    return f"stuck: the same tool error {count} times in the last calls, and again after a warning"


def observe(
    state: DoomLoopState,
    *,
    call_key: str,
    error_key: str | None,
    threshold: int = 3,
    tool: str | None = None,
    error_text: str | None = None,
    workspace_changed: bool = False,
) -> tuple[DoomLoopState, LoopSignal, str]:
    """Record one tool call and what it came to; return the new state, the signal and a text.

    The text is the warning for the model on "warn", the reason on "stuck", "" on "ok".
    `tool` and `error_text` only make the texts clearer; they are not part of the keys.
    The given state is not modified.
    """
    if threshold < 2:
        raise ValueError(f"threshold must be at least 2, not {threshold}")
    ck = _key(call_key)
    ek = _key(error_key) if error_key else ""

    if workspace_changed:
        calls, errors, warned_calls, warned_errors = [], [], [], []
    else:
        calls, errors = list(state.calls), list(state.errors)
        warned_calls, warned_errors = list(state.warned_calls), list(state.warned_errors)
    # Keep `errors` aligned with `calls` even for states built by hand or by older versions.
    errors = (errors + [""] * len(calls))[: len(calls)]
    calls.append(ck)
    errors.append(ek)
    calls, errors = calls[-state.window :], errors[-state.window :]

    call_count = calls.count(ck)
    error_count = errors.count(ek) if ek else 0

    signal: LoopSignal = "ok"
    text = ""
    if ck in warned_calls:
        signal, text = "stuck", stuck_reason("call", count=call_count, tool=tool)
    elif ek and ek in warned_errors:
        signal, text = "stuck", stuck_reason("error", count=error_count, tool=tool)
    else:
        parts: list[str] = []
        if call_count >= threshold:
            warned_calls.append(ck)
            parts.append(warning_message("call", count=call_count, tool=tool))
        if ek and error_count >= threshold:
            warned_errors.append(ek)
            parts.append(warning_message("error", count=error_count, tool=tool, error=error_text))
        if parts:
            signal, text = "warn", " ".join(parts)

    new_state = DoomLoopState(
        window=state.window,
        calls=calls,
        errors=errors,
        warned_calls=warned_calls[-state.window :],
        warned_errors=warned_errors[-state.window :],
        warnings=state.warnings + (1 if signal == "warn" else 0),
    )
    return new_state, signal, text
