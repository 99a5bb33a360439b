"""The `submit` tool: how an agent with an output model finishes, and the rules around it.

Pure functions shared by model_step (which sees the arguments: it validates them) and the
workflow (which sees only references: it keeps the record of edits and test runs).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pydantic import BaseModel, ValidationError

from shopfloor.agents.command_judge import too_long
from shopfloor.agents.outputs import MAX_OUTPUT_BYTES, get_output_model
from shopfloor.models.transcript import ToolSpec

SUBMIT = "submit"
# Harness-recorded fields: whatever the model sends for them is replaced (the record wins).
RECORDED_FIELDS = ("tests_passed",)


class SubmitRecord(BaseModel):
    """What the harness saw happen, in tool-call order (travels in AgentCarry)."""

    tool_seq: int = 0  # tool calls run so far
    last_edit_seq: int = 0  # the last call that changed the workspace (0: none)
    last_required_run_seq: int | None = None  # the last call that ran the required command
    last_required_ok: bool | None = None
    last_required_exit_code: int | None = None
    nudged: bool = False  # the "finish by calling submit" reminder was given
    # The workspace state (agents.hooks.hooks_key) the before-submit hooks last passed on: they
    # run again only once it changed.
    hooks_passed_on: str | None = None


def submit_spec(output_model: str) -> ToolSpec:
    model = get_output_model(output_model)
    return ToolSpec(
        name=SUBMIT,
        description=(
            f"Finish the task by submitting your result as a {output_model}. Call it alone, as the "
            "last call, once you have seen the results of your other calls. Invalid arguments are "
            "returned to you as an error listing the problems."
        ),
        parameters=model.model_json_schema(),
        risk="read",
    )


def validate_submission(output_model: str, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(the validated output as JSON data, None) or (None, an error the model can act on)."""
    model = get_output_model(output_model)
    try:
        value = model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()[:20]
        )
        return None, f"error: invalid {output_model}: {problems}. Fix these and call submit again."
    data = value.model_dump(mode="json")
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > MAX_OUTPUT_BYTES:
        return None, (
            f"error: the {output_model} is {size} bytes; keep it under {MAX_OUTPUT_BYTES}. "
            "Shorten it and call submit again."
        )
    return data, None


def runs_required(tool: str, arguments: dict[str, Any], required: str | None, test_command: str | None) -> bool:
    """Does this call run the required command? run_command whose command equals or contains it
    (whitespace-normalized), or run_tests when the policy's test command is that command.

    A command over the length cap never runs (the judge refuses it), so it is not split at all:
    shlex is quadratic on one long word."""
    if not required:
        return False
    want = _norm(required)
    if tool == "run_command":
        command = arguments.get("command")
        return isinstance(command, str) and too_long(command) is None and want in _norm(command)
    if tool == "run_tests":
        return test_command is not None and want in _norm(test_command)
    return False


def _norm(command: str) -> str:
    try:
        return " ".join(shlex.split(command))
    except ValueError:
        return " ".join(command.split())


_EXIT = re.compile(r"exit code (-?\d+)")


def record_call(record: SubmitRecord, *, edited: bool, ran_required: bool, ok: bool, preview: str) -> SubmitRecord:
    """The record after one more tool call (in the order the calls ran)."""
    seq = record.tool_seq + 1
    update: dict[str, Any] = {"tool_seq": seq}
    if edited:
        update["last_edit_seq"] = seq
    if ran_required:
        code = _EXIT.search(preview[:200])
        update |= {
            "last_required_run_seq": seq,
            "last_required_ok": ok,
            "last_required_exit_code": int(code.group(1)) if code else None,
        }
    return record.model_copy(update=update)


def gate_refusal(record: SubmitRecord, required: str | None) -> str | None:
    """Why submit is refused now (None: it may go ahead)."""
    if not required:
        return None
    ran = record.last_required_run_seq
    if ran is None or ran < record.last_edit_seq:
        after = " after your last edit" if ran is not None else ""
        return f"error: run the tests first: `{required}` (it must run{after} before you submit)."
    return None


def recorded_fields(record: SubmitRecord, required: str | None) -> dict[str, Any]:
    """The harness's own values for RECORDED_FIELDS (tests_passed: None when no test gate)."""
    return {"tests_passed": record.last_required_ok if required else None}


def nudge_text(output_model: str) -> str:
    fields = ", ".join(get_output_model(output_model).model_fields)
    return (
        f"You answered in plain text, but this task ends only when you call the `submit` tool with a "
        f"{output_model} ({fields}). Finish by calling submit now."
    )


def no_submit_reason(output_model: str) -> str:
    return f"the agent answered in plain text twice and never called submit with a {output_model}"
