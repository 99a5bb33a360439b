"""AnthropicMessagesProvider over real HTTP against FakeModelServer's Messages wire format."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.models.transcript import Message, ModelRequest, ToolCall, ToolSpec, Usage
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

GREP = ToolSpec(
    name="grep",
    description="Search files.",
    parameters={"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(
        model="anthropic:fake-claude",
        system="You are a test.",
        messages=[Message(role="user", content="Where is login handled?"), *messages],
        tools=[GREP],
        max_output_tokens=555,
    )


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    script = [
        ScriptTurn(
            content="Searching.",
            tool_calls=[("grep", {"pattern": "login"}), ("grep", {"pattern": "Login"})],
            usage=Usage(input_tokens=300, output_tokens=30),
        ),
        ScriptTurn(content="In app/auth.py.", usage=Usage(input_tokens=400, output_tokens=8)),
    ]
    with FakeModelServer(script) as srv:
        yield srv


async def test_tool_calls_then_results_then_final_text(server: FakeModelServer) -> None:
    provider = AnthropicMessagesProvider("fake-claude", "sk-ant-test", server.anthropic_base_url)
    try:
        first = await provider.complete(request())
        assert first.finish_reason == "tool_calls"
        assert first.message.content == "Searching."
        assert [(c.name, c.arguments, c.arguments_error) for c in first.message.tool_calls] == [
            ("grep", {"pattern": "login"}, None),
            ("grep", {"pattern": "Login"}, None),
        ]
        assert first.usage == Usage(input_tokens=300, output_tokens=30)
        a, b = first.message.tool_calls
        results = [
            Message(role="tool", tool_call_id=a.id, name="grep", content="app/auth.py:3: def login"),
            Message(role="tool", tool_call_id=b.id, name="grep", content="bad regex", is_error=True),
        ]
        second = await provider.complete(request(first.message, *results))
        assert (second.message.content, second.finish_reason) == ("In app/auth.py.", "stop")
        assert second.message.tool_calls == []
    finally:
        await provider.aclose()

    one, two = server.settled_requests()
    assert one.api == "anthropic"
    assert one.body["system"] == "You are a test."  # top level, not a message
    assert one.body["max_tokens"] == 555
    assert one.body["tools"] == [{"name": "grep", "description": "Search files.", "input_schema": GREP.parameters}]
    assert one.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Where is login handled?"}]}]
    # The key travels as x-api-key or (newer SDKs) as a bearer token.
    auth = {one.headers.get("x-api-key"), one.headers.get("authorization")}
    assert auth & {"sk-ant-test", "Bearer sk-ant-test"} and "anthropic-version" in one.headers
    # The assistant turn carries text and tool_use blocks; both results share ONE user turn.
    assert two.body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": a.id, "name": "grep", "input": {"pattern": "login"}},
                {"type": "tool_use", "id": b.id, "name": "grep", "input": {"pattern": "Login"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": a.id, "content": "app/auth.py:3: def login", "is_error": False},
                {"type": "tool_result", "tool_use_id": b.id, "content": "bad regex", "is_error": True},
            ],
        },
    ]
    assert two.turn == 1 and two.completed


async def test_user_text_after_tool_results_joins_the_same_user_turn(server: FakeModelServer) -> None:
    # An operator's steer message arriving after tool results must not break alternation.
    provider = AnthropicMessagesProvider("fake-claude", "k", server.anthropic_base_url)
    call = ToolCall(id="toolu_x", name="grep", arguments={"pattern": "x"})
    await provider.complete(
        request(
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_call_id="toolu_x", content=""),
            Message(role="user", content="Focus on the tests."),
        )
    )
    await provider.aclose()
    messages = server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "tool_use", "id": "toolu_x", "name": "grep", "input": {"pattern": "x"}}]
    result, steer = messages[2]["content"]
    assert result["type"] == "tool_result" and result["content"]  # never an empty result
    assert steer == {"type": "text", "text": "Focus on the tests."}


async def test_non_object_tool_input_becomes_arguments_error() -> None:
    turn = ScriptTurn(
        tool_calls=[
            ScriptToolCall(name="grep", arguments='"just a string"'),
            ScriptToolCall(name="grep", arguments="[1, 2]"),
            ScriptToolCall(name="grep", arguments={"pattern": "fine"}),
        ]
    )
    with FakeModelServer([turn]) as srv:
        provider = AnthropicMessagesProvider("fake-claude", "k", srv.anthropic_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
    text, listed, good = reply.message.tool_calls
    assert text.arguments == {} and "must be a JSON object, got str" in (text.arguments_error or "")
    assert listed.arguments == {} and "got list" in (listed.arguments_error or "")
    assert good.arguments == {"pattern": "fine"} and good.arguments_error is None


@pytest.mark.parametrize(
    ("wire", "expected"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("refusal", "other")],
)
async def test_stop_reason_mapping(wire: str, expected: str) -> None:
    with FakeModelServer([ScriptTurn(content="text", finish_reason=wire)]) as srv:
        provider = AnthropicMessagesProvider("fake-claude", "k", srv.anthropic_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
    assert (reply.finish_reason, reply.message.content) == (expected, "text")


async def test_streamed_response_parses_with_official_sdk() -> None:
    turn = ScriptTurn(content="Looking for the handler now.", tool_calls=[("grep", {"pattern": "def login\\("})])
    with FakeModelServer([turn]) as srv:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=srv.anthropic_base_url, max_retries=0)
        async with client.messages.stream(
            model="fake-claude", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            message = await stream.get_final_message()
        await client.close()
        settled = srv.settled_requests()
        assert settled[0].stream and settled[0].completed
    assert message.stop_reason == "tool_use"
    text, tool = message.content
    assert text.type == "text" and text.text == turn.content
    assert tool.type == "tool_use" and tool.input == {"pattern": "def login\\("}
    assert message.usage.output_tokens > 0
