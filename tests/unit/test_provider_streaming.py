"""Both providers stream, over real HTTP against FakeModelServer's SSE wire formats: the reply
built from a stream equals the one the non-streamed response gives (text, tool calls, arguments
errors, finish reasons, usage), the text reaches `on_text` piece by piece as it arrives, and a
stream that fails part-way maps to ModelCallError with the right retry decision."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from shopfloor.activities.providers.anthropic_messages import (
    AnthropicMessagesProvider,
    parse_anthropic_response,
    to_anthropic_messages,
    to_anthropic_tools,
)
from shopfloor.activities.providers.openai_chat import (
    OpenAIChatProvider,
    parse_openai_response,
    to_openai_messages,
    to_openai_tools,
)
from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import Message, ModelReply, ModelRequest, ToolSpec, Usage
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

TOOL = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
REQUEST = ModelRequest(
    model="fake", system="You are a test.", messages=[Message(role="user", content="go")], tools=[TOOL]
)
LONG_TEXT = "First I will read the readme, then the source, and then I will answer the question. " * 3

TURNS = {
    "text": ScriptTurn(content=LONG_TEXT, usage=Usage(input_tokens=120, output_tokens=40)),
    "tools": ScriptTurn(
        content="Reading both.",
        tool_calls=[("read_file", {"path": "README.md"}), ("read_file", {"path": "src/app.py", "limit": 5})],
        usage=Usage(input_tokens=99, output_tokens=7),
    ),
    "bad arguments": ScriptTurn(
        tool_calls=[
            ScriptToolCall(name="read_file", arguments='{"path": "READ'),  # cut off
            ScriptToolCall(name="read_file", arguments="[1, 2]"),  # not an object
            ScriptToolCall(name="list_dir", arguments=""),  # none at all
        ]
    ),
    "cut off at the limit": ScriptTurn(content="It goes on and on", finish_reason="length"),
    "stop with calls": ScriptTurn(tool_calls=[("list_dir", {})], finish_reason="stop"),
    "refused": ScriptTurn(content="no", finish_reason="content_filter"),
}
ANTHROPIC_FINISH = {"cut off at the limit": "max_tokens", "stop with calls": "end_turn", "refused": "refusal"}


async def whole_openai(server: FakeModelServer) -> ModelReply:
    """The reply of the same request answered without streaming, read by the non-streamed parser."""
    client = openai.AsyncOpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    try:
        response = await client.chat.completions.create(
            model="fake-model",
            messages=to_openai_messages(REQUEST.system, REQUEST.messages),  # type: ignore[arg-type]
            tools=to_openai_tools(REQUEST.tools),  # type: ignore[arg-type]
        )
    finally:
        await client.close()
    return parse_openai_response(response, label="openai:fake-model")


async def whole_anthropic(server: FakeModelServer) -> ModelReply:
    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
    try:
        response = await client.messages.create(
            model="fake-claude",
            max_tokens=100,
            system=REQUEST.system,
            messages=to_anthropic_messages(REQUEST.messages),  # type: ignore[arg-type]
            tools=to_anthropic_tools(REQUEST.tools),  # type: ignore[arg-type]
        )
    finally:
        await client.close()
    return parse_anthropic_response(response)


def provider(api: str, server: FakeModelServer) -> Any:
    if api == "openai":
        return OpenAIChatProvider("fake-model", "k", server.openai_base_url)
    return AnthropicMessagesProvider("fake-claude", "k", server.anthropic_base_url)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("name", list(TURNS))
async def test_a_streamed_reply_equals_the_whole_one(api: str, name: str) -> None:
    turn = TURNS[name]
    if api == "anthropic" and name in ANTHROPIC_FINISH:
        turn = turn.model_copy(update={"finish_reason": ANTHROPIC_FINISH[name]})
    pieces: list[str] = []
    with FakeModelServer([turn]) as server:
        p = provider(api, server)
        try:
            streamed = await p.complete(REQUEST, on_text=pieces.append)
        finally:
            await p.aclose()
        whole = await (whole_openai(server) if api == "openai" else whole_anthropic(server))
        [sent, plain] = server.settled_requests()
    assert sent.stream and sent.completed and not plain.stream
    if api == "openai":
        assert sent.body["stream_options"] == {"include_usage": True}
    assert streamed == whole
    assert "".join(pieces) == turn.content
    if len(turn.content) > 24:
        assert len(pieces) > 2  # piece by piece, as the chunks came


async def test_the_stream_matches_what_the_old_tests_expect_of_arguments() -> None:
    with FakeModelServer([TURNS["bad arguments"]]) as server:
        p = provider("openai", server)
        reply = await p.complete(REQUEST)
        await p.aclose()
    cut, listed, empty = reply.message.tool_calls
    assert cut.arguments == {} and "not valid JSON" in (cut.arguments_error or "")
    assert listed.arguments == {} and "must be a JSON object, got list" in (listed.arguments_error or "")
    assert empty.arguments == {} and empty.arguments_error is None


async def test_a_compatible_server_that_sends_no_usage_gives_zero_tokens() -> None:
    with FakeModelServer([ScriptTurn(content="hi", usage=Usage(input_tokens=5, output_tokens=1))]) as server:
        server.stream_usage = False
        p = provider("openai", server)
        reply = await p.complete(REQUEST)
        await p.aclose()
    assert reply.message.content == "hi" and reply.usage == Usage()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_text_arrives_before_the_stream_ends(api: str) -> None:
    """on_text is first called while the server holds the rest of the reply (3 chunks sent)."""
    with FakeModelServer([ScriptTurn(content=LONG_TEXT)]) as server:
        server.hold_streams(after_chunks=3)
        sent_at_first_text: list[int] = []

        def on_text(text: str) -> None:
            if not sent_at_first_text:
                sent_at_first_text.append(len(server.requests[-1].chunks_sent))
                server.release()

        p = provider(api, server)
        reply = await p.complete(REQUEST, on_text=on_text)
        await p.aclose()
        [logged] = server.settled_requests()
    assert reply.message.content == LONG_TEXT
    assert sent_at_first_text[0] <= 3 < len(logged.chunks_sent)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_an_error_event_midway_is_retried_when_the_provider_is_at_fault(api: str) -> None:
    with FakeModelServer([ScriptTurn(content=LONG_TEXT)]) as server:
        server.fail_midway_next(529)
        server.fail_midway_next(400)
        p = provider(api, server)
        pieces: list[str] = []
        with pytest.raises(ModelCallError) as overloaded:
            await p.complete(REQUEST, on_text=pieces.append)
        with pytest.raises(ModelCallError) as invalid:
            await p.complete(REQUEST)
        recovered = await p.complete(REQUEST)
        await p.aclose()
    assert pieces and LONG_TEXT.startswith("".join(pieces))  # some text came before the error
    assert overloaded.value.retryable and "streamed reply failed" in str(overloaded.value)
    assert ("overloaded_error" if api == "anthropic" else "server_error") in str(overloaded.value)
    assert not invalid.value.retryable and "invalid_request_error" in str(invalid.value)
    assert "\n" not in str(overloaded.value) and "Traceback" not in str(overloaded.value)
    assert recovered.message.content == LONG_TEXT


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_dropped_stream_is_retryable(api: str) -> None:
    with FakeModelServer([ScriptTurn(content=LONG_TEXT)]) as server:
        server.truncate_next()
        p = provider(api, server)
        with pytest.raises(ModelCallError) as dropped:
            await p.complete(REQUEST)
        await p.aclose()
    assert dropped.value.retryable and "failed" in str(dropped.value)
