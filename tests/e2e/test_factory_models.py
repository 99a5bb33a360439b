"""The factory with a real provider's wire format (issue 6): the triage agent talks to an
OpenAI-compatible server over HTTP, with a model no price is known for.

A repository's cost budget cannot be enforced on an unpriced model; the factory still runs it,
under the step limits, and says in the progress comment that the cost was not tracked.
"""

from __future__ import annotations

from factory_runs import POLICY, TRIAGE, factory
from pydantic import SecretStr

from shopfloor.agents.progress import ProgressView
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

NEVER = POLICY.replace("auto_fix: always", "auto_fix: never")


async def test_an_unpriced_model_triages_without_a_cost_cap_and_the_comment_says_so(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    turns = [
        ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments={"path": "calc/ops.py"})]),
        ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments=TRIAGE)]),
    ]
    with FakeModelServer(turns) as fake:
        async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {}, NEVER,
                           model="openai:local-llm", openai_base_url=fake.openai_base_url,
                           openai_api_key=SecretStr("sk-local-not-a-secret")) as f:  # fmt: skip
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result == "parked", "triage to park under auto_fix: never")
            view = await f.handle.query("progress", result_type=ProgressView)
            comments = f.progress_comments(number)
            history = (await f.handle.fetch_history()).to_json()
        requests = fake.settled_requests()

    assert state.kind == "bug" and state.steps == 2 and state.cost_usd == 0.0
    assert [r.api for r in requests] == ["openai", "openai"]
    assert all(r.body["model"] == "local-llm" for r in requests)
    assert view.unpriced_models == ["openai:local-llm"]
    assert len(comments) == 1 and "cost not tracked for ` openai:local-llm `: no price known" in comments[0]["body"]
    assert "auto_fix: never" in comments[0]["body"]
    assert "sk-local-not-a-secret" not in history
