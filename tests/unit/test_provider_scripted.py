"""ScriptedProvider: cassettes replayed turn by turn, statelessly, with clear errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from shopfloor.activities.providers.registry import check_credentials, open_provider
from shopfloor.activities.providers.scripted import ScriptedProvider, builtin_cassettes
from shopfloor.agents.tools import TOOLS
from shopfloor.errors import ModelCallError
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import Message, ModelRequest, ToolCall

pytestmark = pytest.mark.fast

CASSETTE = {
    "description": "two tool turns and an answer",
    "turns": [
        {"content": "listing", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "a.py"}},
                {"name": "read_file", "arguments": {"path": "b.py"}},
            ],
            "usage": {"input_tokens": 10, "output_tokens": 3},
        },
        {"content": "the answer"},
    ],
}

NO_KEYS: dict[str, str | None] = {
    "openai_api_key": None,
    "openai_base_url": None,
    "anthropic_api_key": None,
    "anthropic_base_url": None,
}


def conversation(assistant_turns: int) -> ModelRequest:
    messages = [Message(role="user", content="go")]
    for n in range(assistant_turns):
        call = ToolCall(id=f"call_{n + 1}_0", name="list_dir")
        messages += [
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_call_id=call.id, content="x"),
        ]
    return ModelRequest(model="scripted:test", system="s", messages=messages)


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "three.json"
    path.write_text(json.dumps(CASSETTE))
    return path


async def test_turn_is_the_number_of_assistant_messages(cassette: Path) -> None:
    provider = ScriptedProvider(str(cassette))
    first = await provider.complete(conversation(0))
    assert first.message.content == "listing" and first.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in first.message.tool_calls] == [("call_1_0", "list_dir", {"path": "."})]

    second = await provider.complete(conversation(1))
    assert [(c.id, c.arguments["path"]) for c in second.message.tool_calls] == [
        ("call_2_0", "a.py"),
        ("call_2_1", "b.py"),
    ]
    assert (second.usage.input_tokens, second.usage.output_tokens) == (10, 3)

    third = await provider.complete(conversation(2))
    assert (third.message.content, third.finish_reason, third.message.tool_calls) == ("the answer", "stop", [])


async def test_replay_is_stateless(cassette: Path) -> None:
    # A retried call (or another worker) asking for the same turn gets the same reply.
    provider = ScriptedProvider(str(cassette))
    again = [await provider.complete(conversation(1)) for _ in range(3)]
    assert again[0] == again[1] == again[2]
    other = ScriptedProvider(str(cassette))
    assert await other.complete(conversation(1)) == again[0]


async def test_past_the_last_turn_is_a_final_error(cassette: Path) -> None:
    provider = ScriptedProvider(str(cassette))
    with pytest.raises(ModelCallError) as info:
        await provider.complete(conversation(3))
    assert not info.value.retryable
    assert str(info.value) == "cassette three.json has 3 turns; the run asked for turn 4"


async def test_builtin_explore_demo() -> None:
    assert "explore-demo" in builtin_cassettes()
    shipped = resources.files("shopfloor.activities.providers").joinpath("cassettes/explore-demo.json")
    assert shipped.is_file() and json.loads(shipped.read_text())["turns"]

    provider = open_provider(ModelSpec.parse("scripted:explore-demo"), **NO_KEYS)
    assert provider.label == "scripted:explore-demo (scripted model)"
    replies = [await provider.complete(conversation(n)) for n in range(4)]
    calls = [[(c.name, c.arguments) for c in r.message.tool_calls] for r in replies]
    assert calls == [
        [("list_dir", {"path": "."})],
        [("glob", {"pattern": "**/*.md"})],
        [("read_file", {"path": "README.md"})],
        [],
    ]
    for r in replies[:3]:  # every recorded call is valid for the explore agent's tools
        for c in r.message.tool_calls:
            TOOLS[c.name].args.model_validate(c.arguments)
    final = replies[3].message.content
    assert replies[3].finish_reason == "stop"
    assert "scripted demo model" in final
    assert "SHOPFLOOR_MODEL=openai:<model>" in final and "SHOPFLOOR_MODEL=anthropic:<model>" in final
    assert check_credentials(ModelSpec.parse("scripted:explore-demo"), **NO_KEYS) is None


async def test_yaml_cassette(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(
        "description: hand-written\n"
        "turns:\n"
        "  - content: looking\n"
        "    tool_calls:\n"
        "      - name: grep\n"
        "        arguments: {pattern: 'def main', glob: '*.py'}\n"
        "  - content: found it\n"
    )
    provider = ScriptedProvider(str(path))
    first = await provider.complete(conversation(0))
    assert [(c.name, c.arguments) for c in first.message.tool_calls] == [
        ("grep", {"pattern": "def main", "glob": "*.py"})
    ]
    assert (await provider.complete(conversation(1))).message.content == "found it"


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ('{"turns": [', "broken.json", "not valid JSON/YAML"),
        ("turns: [unclosed", "broken.yaml", "not valid JSON/YAML"),
        ('{"turns": []}', "empty.json", "turns: List should have at least 1 item"),
        ('{"turns": [{"content": "x", "tool_call": []}]}', "typo.json", "turns.0.tool_call: Extra inputs"),
        (
            '{"turns": [{"tool_calls": [{"arguments": {}}]}]}',
            "noname.json",
            "turns.0.tool_calls.0.name: Field required",
        ),
        ("[1, 2]", "list.json", "(top level)"),
    ],
)
def test_invalid_cassettes_are_refused_clearly(tmp_path: Path, text: str, name: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ModelCallError) as info:
        ScriptedProvider(str(path))
    assert not info.value.retryable
    assert str(info.value).startswith(f"cassette {path}:")
    assert expected in str(info.value)
    problem = check_credentials(ModelSpec(provider="scripted", model=str(path)), **NO_KEYS)
    assert problem is not None and expected in problem


def test_missing_cassette_lists_the_builtins(tmp_path: Path) -> None:
    with pytest.raises(ModelCallError) as info:
        open_provider(ModelSpec.parse(f"scripted:{tmp_path / 'nope.json'}"), **NO_KEYS)
    assert not info.value.retryable
    assert "not found" in str(info.value) and "explore-demo" in str(info.value)
    with pytest.raises(ModelCallError, match="not a file"):
        ScriptedProvider(str(tmp_path))
