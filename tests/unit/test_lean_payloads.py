"""What an agent step writes into history: activity payloads without their defaults, and the next
model step's tool results by reference. Both must read back as the same values, and the JSON
older histories hold (every field written out) must still read."""

from __future__ import annotations

import json

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from shopfloor.models.agent_run import (
    CommandPolicy,
    ModelStepInput,
    ModelStepOutput,
    PermissionRules,
    ToolCallRef,
    ToolInput,
    ToolResult,
    WorkspaceRef,
)
from shopfloor.workflows.agent import by_reference

pytestmark = pytest.mark.fast

DIGEST = "a" * 64
RESULT = ToolResult(call_id="call_1", name="read_file", ok=True, preview="1\tdef f():", output_digest=DIGEST)


def through_history(value):
    """`value` as Temporal's converter writes it into history and reads it back."""
    converter = pydantic_data_converter.payload_converter
    payload = converter.to_payload(value)
    return json.loads(payload.data), converter.from_payload(payload, type(value))


def test_payloads_leave_out_defaults_and_read_back_the_same():
    step = ModelStepInput(agent="explore", model="openai:m", step=3, transcript=DIGEST, append=[by_reference(RESULT)])
    data, back = through_history(step)
    assert back == step
    assert data == {
        "agent": "explore",
        "model": "openai:m",
        "step": 3,
        "transcript": DIGEST,
        "append": [{"call_id": "call_1", "name": "read_file", "ok": True, "output_digest": DIGEST}],
    }
    call = ToolCallRef(id="c", name="grep", summary="grep 'x'", args_digest=DIGEST)
    out = ModelStepOutput(transcript=DIGEST, reply_digest=DIGEST, tool_calls=[call], finish_reason="tool_calls")
    data, back = through_history(out)
    assert back == out
    assert data["tool_calls"] == [{"id": "c", "name": "grep", "summary": "grep 'x'", "args_digest": DIGEST}]
    assert "usage" not in data and "output" not in data and "cost_usd" not in data


def test_a_value_that_differs_from_the_default_is_kept():
    rules = PermissionRules(deny_commands=[])  # empty, but not the default (None: keep the defaults)
    data, back = through_history(rules)
    assert data == {"deny_commands": []} and back == rules
    inp = ToolInput(
        workspace=WorkspaceRef(repo="acme/shop", base_sha="b" * 40),
        reply_digest=DIGEST,
        call_id="c",
        name="run_command",
        commands=CommandPolicy(timeout_s=30),
    )
    data, back = through_history(inp)
    assert back == inp
    assert data["workspace"] == {"repo": "acme/shop", "base_sha": "b" * 40}
    assert data["commands"]["timeout_s"] == 30 and data["commands"]["memory_mb"] == 2048  # the policy stays whole


def test_json_with_every_field_from_older_histories_still_reads():
    written_before = {
        "call_id": "call_1",
        "name": "read_file",
        "ok": True,
        "preview": "1\tdef f():",
        "output_digest": DIGEST,
        "output_bytes": 0,
        "workspace": None,
        "warning": None,
    }
    assert ToolResult.model_validate_json(json.dumps(written_before)) == RESULT
    assert RESULT.model_dump() == written_before  # Python dumps keep every field


def test_the_next_step_gets_a_stored_result_by_reference_and_a_refusal_whole():
    edited = RESULT.model_copy(
        update={"workspace": WorkspaceRef(repo="acme/shop", patch_digest=DIGEST), "warning": "w"}
    )
    sent = by_reference(edited)
    assert (sent.call_id, sent.name, sent.ok, sent.output_digest) == ("call_1", "read_file", True, DIGEST)
    assert sent.preview == "" and sent.workspace is None and sent.warning is None
    refused = ToolResult(call_id="c2", name="write_file", ok=False, preview="denied: protected path")
    assert by_reference(refused) == refused  # no stored output: the model reads the preview
