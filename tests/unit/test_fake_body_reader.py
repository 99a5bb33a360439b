"""The fake model server reads a growing conversation a message at a time: each message is parsed
once however many calls send it, and what the server makes of a body is what parsing all of it
gives (the script sees the same body, the turn and the estimated prompt tokens are the same),
through both providers over real HTTP. Bodies it cannot read that way are parsed whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider
from shopfloor.models.transcript import Message, ModelRequest, ToolCall
from shopfloor.testing import BodyReader, FakeModelServer, ScriptTurn, prompt_tokens

STEPS = 30


def reply(step: int) -> Message:
    arguments = {"path": f"ü/m{step}.py", "nested": {"list": [1, None, "x\ny", '"]},']}}
    return Message(
        role="assistant", content=f"step {step}", tool_calls=[ToolCall(id=f"c{step}", name="grep", arguments=arguments)]
    )


def result(step: int) -> Message:
    return Message(role="tool", tool_call_id=f"c{step}", name="grep", content=f'line "{step}" \\ \u2603\t]}},{{')


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_each_message_is_parsed_once_and_every_body_reads_as_parsed_whole(api: str) -> None:
    seen: list[tuple[int, dict[str, Any]]] = []

    def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
        seen.append((turn, body))
        return ScriptTurn(content=f"turn {turn}")

    with FakeModelServer(script) as srv:
        if api == "openai":
            provider: Any = OpenAIChatProvider("fake", "sk-test", srv.openai_base_url)
        else:
            provider = AnthropicMessagesProvider("fake", "sk-test", srv.anthropic_base_url)
        messages = [Message(role="user", content="goal")]
        usages = []
        try:
            for step in range(STEPS):
                reply_ = await provider.complete(ModelRequest(model="fake", system="be brief", messages=messages))
                usages.append(reply_.usage.input_tokens)
                messages = [*messages, reply(step), result(step)]
        finally:
            await provider.aclose()
        requests = srv.settled_requests()

    assert len(requests) == len(seen) == STEPS
    for request, (turn, body), input_tokens in zip(requests, seen, usages, strict=True):
        whole = json.loads(request.raw)
        assert body == whole == request.body
        assert turn == request.turn == sum(1 for m in whole["messages"] if m["role"] == "assistant")
        assert input_tokens == prompt_tokens(whole)
    assert [t for t, _ in seen] == list(range(STEPS))
    # Every message sent was parsed one at a time, once: the last body's messages (and OpenAI's
    # system message) — not the 1 + 3 + 5 + ... a server parsing each body whole goes through.
    last = json.loads(requests[-1].raw)["messages"]
    assert srv.body_reader.parsed_messages == len(last)


def test_bodies_read_another_way_are_parsed_whole() -> None:
    reader = BodyReader()
    for raw in [
        b'{"messages": [{"role": "assistant"}]}',  # spaced
        b'{"a":{"messages":[1]},"messages":[{"role":"assistant"}]}',  # nested first
        b'{"messages":[{"role":"assistant"}],"messages":[]}',  # the last one counts
        b'\xef\xbb\xbf{"messages":[{"role":"assistant"}]}',
        b'{"messages":null}',
        b"{}",
    ]:
        assert reader.read(raw).body == json.loads(raw)
    for bad in [b'{"messages":[{"role":"assistant"}', b'{"messages":[1}]}', b"nope"]:
        with pytest.raises(json.JSONDecodeError):
            reader.read(bad)
