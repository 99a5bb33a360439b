"""The live progress comment's test rig: the fix agent on a FakeModelServer whose script holds
chosen turns until the test releases them (so a mid-run state of the comment is observed for
certain, never raced), triage and review on cassettes, and a wait for the comment to show text."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_runs import call, write_cassette
from factory_runs import APPROVE, FIX, TEST_CMD, TRIAGE_TURNS, Factory
from harness_runs import with_fake
from waiting import DEADLINE_S

from shopfloor.testing import FakeModelServer, ScriptTurn

FIX_SCRIPT = [
    ScriptTurn.tool("read_file", path="calc/ops.py"),
    ScriptTurn.tool("edit_file", path="calc/ops.py", old="return a - b", new="return a + b"),
    ScriptTurn.tool("run_command", command=TEST_CMD),
    ScriptTurn.tool("submit", **FIX),
]
READ, EDIT = "read_file calc/ops.py", 'edit_file "return a - b" -> "return a + b" (calc/ops.py)'


class HeldScript:
    """The fix agent's script (FIX_SCRIPT unless given); the turns in `held` wait until the test
    releases them (blocking the fake server, whose only client is the fix agent's model call)."""

    def __init__(self, *held: int, script: list[ScriptTurn] | None = None) -> None:
        self.gates = {turn: threading.Event() for turn in held}
        self.script = script or FIX_SCRIPT

    def __call__(self, turn: int, body: dict[str, Any]) -> ScriptTurn:
        gate = self.gates.get(turn)
        if gate is not None:
            gate.wait(DEADLINE_S)
        return self.script[turn]

    def release(self, turn: int) -> None:
        self.gates[turn].set()

    def release_all(self) -> None:
        for gate in self.gates.values():
            gate.set()


@contextmanager
def fix_on_fake(script: HeldScript) -> Iterator[FakeModelServer]:
    with FakeModelServer(script) as fake:
        try:
            yield fake
        finally:
            script.release_all()  # a failed test must not leave the server blocked


def models_for(tmp_path, settings, fake: FakeModelServer, **extra: Any) -> dict[str, Any]:
    """Worker settings: triage and review on cassettes, fix on the fake server."""
    agent_models = {
        "triage": write_cassette(tmp_path / "triage.json", TRIAGE_TURNS),
        "review": write_cassette(tmp_path / "review.json", [{"tool_calls": [call("submit", **APPROVE)]}]),
        "fix": "openai:fix-model",
    }
    s = with_fake(settings, fake)
    # The fake's model has no price: a factory agent on it is held to a token limit instead.
    return {
        "openai_base_url": s.openai_base_url,
        "openai_api_key": None,
        "agent_models": agent_models,
        "max_tokens_unpriced": 1_000_000,
        **extra,
    }


async def body_when(f: Factory, number: int, *texts: str) -> str:
    """The progress comment once it holds every one of `texts`."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        comments = f.progress_comments(number)
        body = comments[0]["body"] if comments else ""
        if all(t in body for t in texts):
            return body
        assert asyncio.get_running_loop().time() < deadline, f"the progress comment never showed {texts}: {body}"
        await asyncio.sleep(0.1)
