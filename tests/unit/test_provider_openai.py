"""OpenAIChatProvider over real HTTP against FakeModelServer's Chat Completions wire format."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import openai
import pytest

from shopfloor.activities.providers.openai_chat import PLACEHOLDER_API_KEY, OpenAIChatProvider
from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import Message, ModelRequest, ToolSpec, Usage
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(
        model="openai:fake-model",
        system="You are a test.",
        messages=[Message(role="user", content="What is in README.md?"), *messages],
        tools=[READ_FILE],
        max_output_tokens=321,
    )


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    script = [
        ScriptTurn(
            content="Reading it.",
            tool_calls=[("read_file", {"path": "README.md"})],
            usage=Usage(input_tokens=100, output_tokens=20),
        ),
        ScriptTurn(content="It says hello.", usage=Usage(input_tokens=150, output_tokens=5)),
    ]
    with FakeModelServer(script) as srv:
        yield srv


async def test_tool_call_then_result_then_final_text(server: FakeModelServer) -> None:
    provider = OpenAIChatProvider("fake-model", "sk-test", server.openai_base_url)
    try:
        first = await provider.complete(request())
        assert first.finish_reason == "tool_calls"
        assert first.message.content == "Reading it."
        [call] = first.message.tool_calls
        assert (call.name, call.arguments, call.arguments_error) == ("read_file", {"path": "README.md"}, None)
        assert first.usage == Usage(input_tokens=100, output_tokens=20)

        result = Message(role="tool", tool_call_id=call.id, name="read_file", content="hello")
        second = await provider.complete(request(first.message, result))
        assert second.finish_reason == "stop"
        assert second.message.content == "It says hello."
        assert second.message.tool_calls == []
        assert second.usage.output_tokens == 5
    finally:
        await provider.aclose()

    # What went over the wire is OpenAI's own shape.
    one, two = server.requests
    assert one.body["model"] == "fake-model"
    assert one.body["max_tokens"] == 321  # a compatible server: the classic parameter name
    assert one.body["messages"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": "What is in README.md?"},
    ]
    assert one.body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file.", "parameters": READ_FILE.parameters},
        }
    ]
    assistant, tool = two.body["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": call.id, "content": "hello"}
    assert (one.turn, two.turn) == (0, 1)
    assert one.headers["authorization"] == "Bearer sk-test"
    assert all(r.completed and r.status == 200 for r in server.settled_requests())


async def test_multiple_tool_calls_in_one_reply() -> None:
    turn = ScriptTurn(tool_calls=[("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"}), ("list_dir", {})])
    with FakeModelServer([turn]) as srv:
        provider = OpenAIChatProvider("fake-model", None, srv.openai_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
        # No key and a base URL: a placeholder keeps the SDK happy for keyless local servers.
        assert srv.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    assert reply.message.content == ""
    assert [(c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("read_file", {"path": "a.py"}),
        ("read_file", {"path": "b.py"}),
        ("list_dir", {}),
    ]
    assert len({c.id for c in reply.message.tool_calls}) == 3


async def test_tool_only_assistant_turn_is_sent_with_null_content(server: FakeModelServer) -> None:
    provider = OpenAIChatProvider("fake-model", "sk-test", server.openai_base_url)
    call_only = Message(role="assistant", tool_calls=[{"id": "c1", "name": "read_file", "arguments": {"path": "x"}}])
    await provider.complete(request(call_only, Message(role="tool", tool_call_id="c1", content="x")))
    await provider.aclose()
    sent = server.requests[0].body["messages"][2]
    assert sent["content"] is None and sent["tool_calls"][0]["id"] == "c1"


async def test_malformed_tool_arguments_become_arguments_error() -> None:
    turn = ScriptTurn(
        tool_calls=[
            ScriptToolCall(name="read_file", arguments='{"path": "README'),  # cut off
            ScriptToolCall(name="grep", arguments='["not", "an", "object"]'),
            ScriptToolCall(name="list_dir", arguments=""),  # no arguments at all is fine
            ScriptToolCall(name="read_file", arguments='{"path": "ok.py"}'),
        ]
    )
    with FakeModelServer([turn]) as srv:
        provider = OpenAIChatProvider("fake-model", "k", srv.openai_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
    cut, listed, empty, good = reply.message.tool_calls
    assert cut.arguments == {} and "not valid JSON" in (cut.arguments_error or "")
    assert '{"path": "README' in (cut.arguments_error or "")  # shows the model what it sent
    assert listed.arguments == {} and "must be a JSON object, got list" in (listed.arguments_error or "")
    assert empty.arguments == {} and empty.arguments_error is None
    assert good.arguments == {"path": "ok.py"} and good.arguments_error is None


@pytest.mark.parametrize(
    ("wire", "expected"),
    [("length", "length"), ("content_filter", "other"), ("stop", "stop"), ("tool_calls", "tool_calls")],
)
async def test_finish_reason_mapping(wire: str, expected: str) -> None:
    with FakeModelServer([ScriptTurn(content="partial", finish_reason=wire)]) as srv:
        provider = OpenAIChatProvider("fake-model", "k", srv.openai_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
    assert reply.finish_reason == expected


async def test_stop_with_tool_calls_counts_as_tool_calls() -> None:
    # Some compatible servers report "stop" although the reply calls tools.
    with FakeModelServer([ScriptTurn(tool_calls=[("list_dir", {})], finish_reason="stop")]) as srv:
        provider = OpenAIChatProvider("fake-model", "k", srv.openai_base_url)
        reply = await provider.complete(request())
        await provider.aclose()
    assert reply.finish_reason == "tool_calls"


async def test_official_openai_uses_max_completion_tokens() -> None:
    # Without a base URL the provider targets api.openai.com; point the SDK client at the fake
    # server afterwards to see what it would send.
    with FakeModelServer([ScriptTurn(content="hi")]) as srv:
        provider = OpenAIChatProvider("gpt-4o", "sk-test", None)
        assert provider.base_url == "https://api.openai.com/v1"
        provider._client = provider._client.with_options(base_url=srv.openai_base_url)
        await provider.complete(request())
        await provider.aclose()
        body = srv.requests[0].body
    assert body["max_completion_tokens"] == 321 and "max_tokens" not in body


async def test_streamed_response_parses_with_official_sdk() -> None:
    turn = ScriptTurn(
        content="Let me look at both files before answering.",
        tool_calls=[("read_file", {"path": "src/app.py", "limit": 50}), ("grep", {"pattern": "def \\w+"})],
        usage=Usage(input_tokens=42, output_tokens=17),
    )
    with FakeModelServer([turn]) as srv:
        client = openai.AsyncOpenAI(api_key="k", base_url=srv.openai_base_url, max_retries=0)
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, finish, usage, chunks = "", {}, None, None, 0
        async for chunk in stream:
            chunks += 1
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for d in choice.delta.tool_calls or []:
                    entry = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                    entry["id"] = d.id or entry["id"]
                    entry["name"] += (d.function.name or "") if d.function else ""
                    entry["arguments"] += (d.function.arguments or "") if d.function else ""
        await client.close()
        settled = srv.settled_requests()
        assert settled[0].stream and settled[0].completed
    assert chunks > 6  # really incremental, not one blob
    assert text == turn.content
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("read_file", {"path": "src/app.py", "limit": 50}),
        ("grep", {"pattern": "def \\w+"}),
    ]
    assert all(c["id"] for c in calls.values())
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (42, 17)


async def test_concurrent_calls_overlap_and_equal_conversations_share_a_key() -> None:
    with FakeModelServer([ScriptTurn(content="ok")], latency_s=0.5) as srv:
        provider = OpenAIChatProvider("fake-model", "k", srv.openai_base_url)
        started = time.monotonic()
        replies = await asyncio.gather(*(provider.complete(request()) for _ in range(5)))
        elapsed = time.monotonic() - started
        await provider.aclose()
        logged = srv.requests
    assert [r.message.content for r in replies] == ["ok"] * 5
    assert elapsed < 1.5  # five 0.5 s calls served side by side, not one after another
    assert len(logged) == 5 and len({r.key for r in logged}) == 1 and all(r.completed for r in logged)


def test_serves_other_processes() -> None:
    with FakeModelServer([ScriptTurn(content="from afar")]) as srv:
        code = (
            "import openai, sys\n"
            f"c = openai.OpenAI(api_key='k', base_url={srv.openai_base_url!r}, max_retries=0)\n"
            "r = c.chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'x'}])\n"
            "print(r.choices[0].message.content)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "from afar"
        assert len(srv.requests) == 1


async def test_past_the_script_the_server_says_done(server: FakeModelServer) -> None:
    provider = OpenAIChatProvider("fake-model", "k", server.openai_base_url)
    a1 = Message(role="assistant", content="one")
    a2 = Message(role="assistant", content="two")
    reply = await provider.complete(request(a1, Message(role="user", content="more"), a2))
    await provider.aclose()
    assert server.requests[0].turn == 2
    assert (reply.message.content, reply.finish_reason) == ("done", "stop")


async def test_callable_script_sees_turn_and_body_and_its_failures_surface() -> None:
    def script(turn: int, body: dict) -> ScriptTurn:
        if body["messages"][-1]["content"] == "explode":
            raise ValueError("no such scene")
        return ScriptTurn(content=f"turn {turn}: {body['messages'][-1]['content']}")

    with FakeModelServer(script) as srv:
        provider = OpenAIChatProvider("fake-model", "k", srv.openai_base_url)
        reply = await provider.complete(
            request(Message(role="assistant", content="a"), Message(role="user", content="b"))
        )
        assert reply.message.content == "turn 1: b"
        with pytest.raises(ModelCallError) as info:
            await provider.complete(request(Message(role="user", content="explode")))
        await provider.aclose()
        assert srv.requests[1].status == 500
    assert info.value.retryable and "script failed: ValueError('no such scene')" in str(info.value)
