"""`scripted:<cassette>`: replay a recorded or hand-written conversation turn by turn.

For demos and tests: no network, no key, and always labelled as scripted. Replays are stateless:
the turn played is the number of assistant messages already in the request, so a retried call
(or a replayed workflow) gets the same turn back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import structlog
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopfloor.agents.compaction import folded_model_turns
from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import Message, ModelReply, ModelRequest, ToolCall, Usage

log = structlog.get_logger(__name__)

_PACKAGE = "shopfloor.activities.providers"
_BUILTIN_DIR = "cassettes"


class CassetteToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")  # hand-written files: a typo must not pass silently

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class CassetteTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = ""
    tool_calls: list[CassetteToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class Cassette(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    turns: list[CassetteTurn] = Field(min_length=1)
    compaction: str = "(scripted summary) The earlier steps of this run were compacted."


def builtin_cassettes() -> list[str]:
    """Names of the cassettes shipped with shopfloor (usable as `scripted:<name>`)."""
    folder = resources.files(_PACKAGE).joinpath(_BUILTIN_DIR)
    try:
        return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _read_cassette_text(cassette: str) -> tuple[str, str, bool]:
    """(name for messages, file text, is JSON). A path wins over a built-in name."""
    path = Path(cassette).expanduser()
    if path.is_file():
        try:
            return path.name, path.read_text(encoding="utf-8"), path.suffix.lower() == ".json"
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelCallError(f"cassette {cassette}: cannot read it: {exc}", retryable=False) from exc
    if cassette in builtin_cassettes():
        shipped = resources.files(_PACKAGE).joinpath(_BUILTIN_DIR).joinpath(f"{cassette}.json")
        text = shipped.read_text(encoding="utf-8")
        return cassette, text, True
    if path.exists():
        raise ModelCallError(f"cassette {cassette}: not a file", retryable=False)
    raise ModelCallError(
        f"cassette {cassette!r} not found: no such file, and no built-in cassette of that name "
        f"(built-in: {', '.join(builtin_cassettes()) or 'none'})",
        retryable=False,
    )


def load_cassette(cassette: str) -> tuple[str, Cassette]:
    """Load a cassette (a JSON/YAML file path or a built-in name); ModelCallError if unusable."""
    name, text, is_json = _read_cassette_text(cassette)
    try:
        # YAML would read JSON too, but json's messages are clearer for .json files.
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ModelCallError(f"cassette {cassette}: not valid JSON/YAML: {exc}", retryable=False) from exc
    try:
        return name, Cassette.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ModelCallError(
            f"cassette {cassette}: not a valid cassette ({problems}); expected "
            '{"description": str, "turns": [{"content": str, "tool_calls": [{"name": str, "arguments": {}}]}]}',
            retryable=False,
        ) from exc


class ScriptedProvider:
    def __init__(self, cassette: str) -> None:
        self.name, self.cassette = load_cassette(cassette)
        self.label = f"scripted:{cassette} (scripted model)"

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        if request.purpose == "compaction":
            return ModelReply(message=Message(role="assistant", content=self.cassette.compaction))
        # Replies folded into a compaction summary still count, so the script stays in step.
        turn = 1 + sum(1 if m.role == "assistant" else folded_model_turns(m) for m in request.messages)
        turns = self.cassette.turns
        if turn > len(turns):
            raise ModelCallError(
                f"cassette {self.name} has {len(turns)} turns; the run asked for turn {turn}",
                retryable=False,
            )
        recorded = turns[turn - 1]
        calls = [
            ToolCall(id=f"call_{turn}_{i}", name=c.name, arguments=dict(c.arguments))
            for i, c in enumerate(recorded.tool_calls)
        ]
        log.debug("scripted turn", cassette=self.name, turn=turn, tool_calls=len(calls))
        if recorded.content and on_text is not None:
            on_text(recorded.content)  # a recording has no pace: its text comes in one piece
        return ModelReply(
            message=Message(role="assistant", content=recorded.content, tool_calls=calls),
            finish_reason="tool_calls" if calls else "stop",
            usage=recorded.usage.model_copy(),
        )

    async def aclose(self) -> None:
        return None
