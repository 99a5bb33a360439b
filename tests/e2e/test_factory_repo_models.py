"""The repository chooses its agents' models and caps their cost, within the operator's bounds:
`models.<agent>` picks a model from SHOPFLOOR_REPO_MODELS (the wire request names it), and
`budgets.max_cost_usd.<agent>` stops that agent at its cap (limit_reached, the work salvaged)
long before the run's budget. A model outside the operator's list makes the policy an error: the
run parks with the reason on its progress comment and no model is asked anything. The agents
talk to the fake OpenAI-compatible server over HTTP; simulator, edge, worker and Temporal are real.
"""

from __future__ import annotations

import json

from factory_runs import GOOD_EDIT, POLICY, TRIAGE, factory
from pydantic import SecretStr

from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

EVERY_STEP = Usage(input_tokens=1_000, output_tokens=500)  # $0.002 at [1.0, 2.0] per Mtok
TRIAGE_TURNS = [
    ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments={"path": "calc/ops.py"})], usage=EVERY_STEP),
    ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments=TRIAGE)], usage=EVERY_STEP),
]
FIX_TURNS = [
    ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments={"path": "calc/ops.py"})], usage=EVERY_STEP),
    ScriptTurn(tool_calls=[ScriptToolCall(name="edit_file", arguments=GOOD_EDIT)], usage=EVERY_STEP),
    *[
        ScriptTurn(
            tool_calls=[ScriptToolCall(name="run_command", arguments={"command": f"python -c 'print({i})'"})],
            usage=EVERY_STEP,
        )
        for i in range(10)
    ],
]


def answer(turn: int, body: dict) -> ScriptTurn:
    system = json.dumps(body.get("messages", [])[:1])
    script = TRIAGE_TURNS if "You are `triage`" in system else FIX_TURNS
    return script[turn] if turn < len(script) else ScriptTurn(content="out of script")


def worker(fake: FakeModelServer) -> dict:
    """Priced models on the fake server ([1.0, 2.0] USD per Mtok); repositories may choose `openai:fixer`."""
    return {
        "model": "openai:metered",
        "prices": {"metered": (1.0, 2.0), "fixer": (1.0, 2.0)},
        "repo_models": ["openai:fixer"],
        "openai_base_url": fake.openai_base_url,
        "openai_api_key": SecretStr("sk-metered-not-a-secret"),
    }


async def test_the_repositorys_fix_model_is_used_and_stops_at_its_cost_cap(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY + "models:\n  fix: openai:fixer\nbudgets:\n  max_cost_usd:\n    fix: 0.005\n"
    with FakeModelServer(answer) as fake:
        async with factory(
            simulator, settings, running_worker, temporal_client, tmp_path, {}, policy, **worker(fake)
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result != "", "the run to end")
            await f.progress_when(number, "Final state: salvaged")
            fix = await temporal_client.get_workflow_handle(f"{f.handle.id}/fix-1").query(
                "status", result_type=AgentStatus
            )
        requests = fake.settled_requests()

    def model_of(agent: str) -> set[str]:
        mine = [r for r in requests if f"You are `{agent}`" in json.dumps(r.body.get("messages", [])[:1])]
        assert mine, f"no request from {agent}"
        return {r.body["model"] for r in mine}

    assert model_of("triage") == {"metered"} and model_of("fix") == {"fixer"}
    assert fix.model == "openai:fixer"
    assert fix.state == "limit_reached" and "cost limit reached" in (fix.reason or ""), fix
    # Its own cap, not the run's $5 budget: a limit is reached once spending reaches it (before a step).
    assert fix.step == 3 and fix.cost_usd == 0.006, fix
    assert state.result == "salvaged" and "cost limit reached" in state.reason, state
    assert state.cost_usd == 0.01, state  # triage's $0.004 and the fix's $0.006
    assert "return a + b" in f.file("calc/ops.py", ref=f"shopfloor/issue-{number}")  # its edit is kept


async def test_a_model_the_operator_does_not_allow_parks_the_run_before_any_model_call(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY + "models:\n  fix: openai:gpt-huge\n"
    with FakeModelServer(answer) as fake:
        async with factory(
            simulator, settings, running_worker, temporal_client, tmp_path, {}, policy, **worker(fake)
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result == "parked", "the policy error to park the run")
            body = await f.progress_when(number, "Final state: waiting for a human")
        requests = fake.settled_requests()

    assert requests == []
    assert state.waiting_for == "policy" and state.children == [], state
    assert "`models.fix`: `openai:gpt-huge` is not a model this shopfloor lets repositories choose" in state.reason
    assert "(allowed: `openai:fixer`)" in state.reason
    assert "openai:gpt-huge" in body and "shopfloor.yml" in body
    comments = f.get(f"/issues/{number}/comments")
    assert len(comments) == 1, [c["body"] for c in comments]  # the progress comment is the one reply
