"""Both providers send the request the official SDK's own `create` would have sent: the same JSON
(keys in the same order, the same bytes) and the same headers, for a conversation with every kind
of message (tool calls with nested and non-ASCII arguments, a tool error, text after results,
a tool-call-only turn), although they hand the SDK's client a body they serialized themselves.
Captured at the fake model server, over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider
from shopfloor.activities.providers.wire import wire_json
from shopfloor.agents.registry import get_agent
from shopfloor.models.transcript import Message, ModelRequest, ToolCall
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn

ARGS = {"path": "src/ü/app.py", "offset": 3, "limit": 1.5, "nested": {"list": [1, None, True, "x\ny"]}}
CONVERSATION = [
    Message(role="user", content="Fix the bug in app.py — quickly \u2603."),
    Message(
        role="assistant",
        content="Reading two files.",
        tool_calls=[
            ToolCall(id="call_a", name="read_file", arguments=ARGS),
            ToolCall(id="call_b", name="grep", arguments={"pattern": r"def \w+\(", "path": "."}),
        ],
    ),
    Message(role="tool", tool_call_id="call_a", name="read_file", content='line 1\nline 2 "quoted" \\ tab\t'),
    Message(role="tool", tool_call_id="call_b", name="grep", content="no such file", is_error=True),
    Message(role="user", content="[operator] look at tests too"),
    Message(role="assistant", tool_calls=[ToolCall(id="call_c", name="list_dir", arguments={})]),
    Message(role="tool", tool_call_id="call_c", name="list_dir", content=""),
    Message(role="assistant", content="Done: the bug is in f()."),
    Message(role="user", content="go on"),
]
REQUEST = ModelRequest(
    model="fake-model",
    system="You are `fix`. Rules\n\n<repository-instructions>…</repository-instructions>",
    messages=CONVERSATION,
    tools=get_agent("fix").tool_specs(),  # real schemas, submit's included
    max_output_tokens=777,
)


def same_request(ours: LoggedRequest, sdk: LoggedRequest) -> None:
    assert ours.body == sdk.body
    assert json.dumps(ours.body) == json.dumps(sdk.body)  # key order too
    # With equal (compact) JSON, equal lengths mean equal bytes; every other header equal too.
    assert ours.headers == sdk.headers


async def test_openai_request_is_the_sdks_own() -> None:
    with FakeModelServer(lambda turn, body: ScriptTurn(content="one")) as srv:
        provider = OpenAIChatProvider("fake-model", "sk-test", srv.openai_base_url)
        try:
            reply = await provider.complete(REQUEST)
            body: dict[str, Any] = provider.request_body(REQUEST)
            stream = await provider._client.chat.completions.create(**body)
            async for _ in stream:
                pass
        finally:
            await provider.aclose()
        ours, sdk = srv.settled_requests()
    assert reply.message.content == "one"
    same_request(ours, sdk)
    assert ours.body["max_tokens"] == 777 and ours.body["stream"] is True
    assert [m["role"] for m in ours.body["messages"]][:3] == ["system", "user", "assistant"]
    assert json.loads(ours.body["messages"][2]["tool_calls"][0]["function"]["arguments"]) == ARGS
    assert ours.headers["authorization"] == "Bearer sk-test"


async def test_anthropic_request_is_the_sdks_own() -> None:
    with FakeModelServer(lambda turn, body: ScriptTurn(content="one")) as srv:
        provider = AnthropicMessagesProvider("fake-model", "sk-ant-test", srv.anthropic_base_url)
        try:
            reply = await provider.complete(REQUEST)
            body: dict[str, Any] = provider.request_body(REQUEST)
            stream = await provider._client.messages.create(**body)
            async for _ in stream:
                pass
        finally:
            await provider.aclose()
        ours, sdk = srv.settled_requests()
    assert reply.message.content == "one"
    same_request(ours, sdk)
    assert ours.body["max_tokens"] == 777 and ours.body["system"] == REQUEST.system
    assert ours.body["messages"][1]["content"][1]["input"] == ARGS
    assert ours.headers["authorization"] == "Bearer sk-ant-test"


@pytest.mark.fast
async def test_bodies_built_from_messages_encoded_once_are_the_whole_bodys_json() -> None:
    openai_provider = OpenAIChatProvider("fake-model", "sk-test", "http://127.0.0.1:9/v1")
    anthropic_provider = AnthropicMessagesProvider("fake-model", "sk-ant-test", "http://127.0.0.1:9")
    try:
        for provider in (openai_provider, anthropic_provider):
            for n in range(len(CONVERSATION) + 1):  # every prefix: each turn boundary, each merge
                request = REQUEST.model_copy(update={"messages": CONVERSATION[:n]})
                assert provider.request_bytes(request) == wire_json(provider.request_body(request))
            # Encoded once: the second time round every message comes from the provider's cache.
            kept = len(provider._rendered)
            assert kept == len(CONVERSATION)
            assert provider.request_bytes(REQUEST) == wire_json(provider.request_body(REQUEST))
            assert len(provider._rendered) == kept
            no_system = REQUEST.model_copy(update={"system": "", "tools": []})
            assert provider.request_bytes(no_system) == wire_json(provider.request_body(no_system))
    finally:
        await openai_provider.aclose()
        await anthropic_provider.aclose()
