"""A growing conversation's request body is the SDK's bytes at every step while each message is
rendered once: the earlier messages' bytes are reused only when they are the very same message
objects; a retried step, a compacted conversation and conversations taking turns all send what
rendering everything anew sends."""

from __future__ import annotations

import pytest

from shopfloor.activities.providers.openai_chat import OpenAIChatProvider, to_openai_message
from shopfloor.activities.providers.wire import JoinedMessages, wire_json
from shopfloor.models.transcript import Message, ModelRequest, ToolCall


def reply(step: int) -> Message:
    return Message(role="assistant", content=f"step {step} ü", tool_calls=[ToolCall(id=f"c{step}", name="grep")])


def result(step: int) -> Message:
    return Message(role="tool", tool_call_id=f"c{step}", name="grep", content=f'"{step}"\n')


def expected(messages: list[Message]) -> bytes:
    return b",".join(wire_json(to_openai_message(m)) for m in messages)


@pytest.mark.fast
def test_each_message_is_rendered_once_and_the_join_is_the_whole_rendering() -> None:
    rendered: list[Message] = []

    def render(m: Message) -> bytes:
        rendered.append(m)
        return wire_json(to_openai_message(m))

    join = JoinedMessages(render)
    run_a = [Message(role="user", content="goal a")]
    run_b = [Message(role="user", content="goal a")]  # equal, not the same object: another run
    for step in range(40):
        assert join(run_a) == expected(run_a)
        assert join(run_a) == expected(run_a)  # a retried step
        assert join(run_b) == expected(run_b)
        run_a = [*run_a, reply(step), result(step)]
        run_b = [*run_b, reply(step), result(step)]
    assert len(rendered) == len(run_a) - 2 + len(run_b) - 2

    # Compacted: the same first message, then a summary: rendered anew, not appended to.
    compacted = [run_a[0], Message(role="user", content="[compaction] summary"), *run_a[-4:]]
    assert join(compacted) == expected(compacted)
    shorter = run_a[:5]  # a conversation that is a prefix of one joined before
    assert join(shorter) == expected(shorter)
    assert join([]) == b""


@pytest.mark.fast
def test_the_request_bytes_are_the_request_body_at_every_step() -> None:
    provider = OpenAIChatProvider("fake", "sk-test", "http://127.0.0.1:9/v1")
    messages = [Message(role="user", content="goal")]
    for step in range(20):
        request = ModelRequest(model="fake", system="be brief" if step % 3 else "", messages=messages)
        assert provider.request_bytes(request) == wire_json(provider.request_body(request))
        messages = [*messages, reply(step), result(step)]
    empty = ModelRequest(model="fake", system="s", messages=[])
    assert provider.request_bytes(empty) == wire_json(provider.request_body(empty))


@pytest.mark.fast
def test_joined_conversations_stay_within_their_bytes() -> None:
    join = JoinedMessages(lambda m: wire_json(to_openai_message(m)), max_bytes=2_000)
    for run in range(50):
        conversation = [Message(role="user", content=f"goal {run} " + "x" * 100)]
        assert join(conversation) == expected(conversation)
        assert join.bytes <= join.max_bytes
