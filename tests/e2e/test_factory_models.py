"""The factory with a real provider's wire format: the agents talk to an
OpenAI-compatible server over HTTP.

- A model no price is known for: the repository's cost budget cannot be enforced on it, so the
  factory runs it under a token limit (the operator's SHOPFLOOR_MAX_TOKENS_UNPRICED) and says in
  the progress comment that the cost was not tracked; without a token limit it does not start.
- A priced model and a small budget: the run's money runs out mid-fix and the work is salvaged.
"""

from __future__ import annotations

import asyncio
import json

from factory_runs import GOOD_EDIT, POLICY, TRIAGE, factory, unpriced_model
from pydantic import SecretStr

from shopfloor.agents.progress import ProgressView
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

NEVER = POLICY.replace("auto_fix: always", "auto_fix: never")


async def test_an_unpriced_model_triages_under_a_token_cap_and_the_comment_says_so(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    turns = [
        ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments={"path": "calc/ops.py"})]),
        ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments=TRIAGE)]),
    ]
    with FakeModelServer(turns) as fake:
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            NEVER,
            **unpriced_model(fake.openai_base_url, max_tokens=50_000),
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result == "parked", "triage to park under auto_fix: never")
            final = await f.progress_when(number, "Final state: waiting for a human")
            view = await f.handle.query("progress", result_type=ProgressView)
            history = (await f.handle.fetch_history()).to_json()
            triage = await temporal_client.get_workflow_handle(f"{f.handle.id}/triage").fetch_history()
        requests = fake.settled_requests()
    started = triage.events[0].workflow_execution_started_event_attributes.input.payloads[0].data
    assert json.loads(started)["limits"]["max_tokens"] == 50_000  # the cap the run was held to

    assert state.kind == "bug" and state.steps == 2 and state.cost_usd == 0.0
    assert [r.api for r in requests] == ["openai", "openai"]
    assert all(r.body["model"] == "local-llm" for r in requests)
    assert view.unpriced_models == ["openai:local-llm"]
    assert "cost not tracked for ` openai:local-llm `: no price known" in final and "auto_fix: never" in final
    assert "sk-local-not-a-secret" not in history


async def test_an_unpriced_model_without_a_token_cap_does_not_start_and_the_comment_says_why(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    with FakeModelServer([]) as fake:
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            NEVER,
            **unpriced_model(fake.openai_base_url, max_tokens=None),
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result == "failed", "the run to refuse its triage")
            final = await f.progress_when(number, "Final state: failed")
        assert fake.requests == []  # no model call was made
    assert state.children == [] and state.steps == 0
    assert "`openai:local-llm` has no price, so no cost limit can hold it, and no token limit is set" in state.reason
    assert "SHOPFLOOR_MAX_TOKENS_UNPRICED" in final and "budgets.max_tokens" in final


EVERY_STEP = Usage(input_tokens=1_000, output_tokens=500)  # $0.002 at [1.0, 2.0] per Mtok
TRIAGE_METERED = [
    ScriptTurn(tool_calls=[ScriptToolCall(name="read_file", arguments={"path": "calc/ops.py"})], usage=EVERY_STEP),
    ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments=TRIAGE)], usage=EVERY_STEP),
]


def metered(fake: FakeModelServer) -> dict:
    """Worker settings for a priced model on the fake server: [1.0, 2.0] USD per Mtok."""
    return {
        "model": "openai:metered",
        "prices": {"metered": (1.0, 2.0)},
        "openai_base_url": fake.openai_base_url,
        "openai_api_key": SecretStr("sk-metered-not-a-secret"),
    }


async def listed_cost(handle, timeout_s: float = 30) -> float | None:
    """The run's ShopfloorCostUsd search attribute once set (it follows the final comment)."""
    from shopfloor.search_attributes import SHOPFLOOR_COST

    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        cost = (await handle.describe()).typed_search_attributes.get(SHOPFLOOR_COST)
        if cost is not None or asyncio.get_running_loop().time() > deadline:
            return cost
        await asyncio.sleep(0.2)


async def test_a_budget_spent_by_triage_starts_no_fix(simulator, settings, running_worker, temporal_client, tmp_path):
    policy = POLICY + "budgets:\n  max_cost_usd_per_run: 0.004\n"
    with FakeModelServer(TRIAGE_METERED) as fake:
        async with factory(
            simulator, settings, running_worker, temporal_client, tmp_path, {}, policy, **metered(fake)
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result != "", "the run to end")
            final = await f.progress_when(number, "Final state: failed")
            assert f.handle is not None
            listed = await listed_cost(f.handle)
        requests = fake.settled_requests()
    assert listed == 0.004  # what the Temporal UI's list can show beside the run
    assert len(requests) == 2 and state.cost_usd == 0.004 and state.children == [f"{f.handle.id}/triage"], state
    assert state.result == "failed" and "budget of $0.004 is spent" in state.reason, state
    assert f.get("/pulls", state="all") == []
    assert "budget of $0.004 is spent" in final


async def test_the_cost_budget_runs_out_mid_fix_and_the_work_is_salvaged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """A run out of budget is salvaged, with money rather than steps: a priced model, a $0.01
    budget for the run; triage spends $0.004, the fix agent edits, then the next step would pass
    the budget."""
    fix = [
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
        script = TRIAGE_METERED if "You are `triage`" in system else fix
        return script[turn] if turn < len(script) else ScriptTurn(content="out of script")

    policy = POLICY + "budgets:\n  max_cost_usd_per_run: 0.01\n"
    with FakeModelServer(answer) as fake:
        async with factory(
            simulator, settings, running_worker, temporal_client, tmp_path, {}, policy, **metered(fake)
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            state = await f.state_when(lambda s: s.result != "", "the run to end")
            final = await f.progress_when(number, "Final state: salvaged")
            prs = f.get("/pulls", state="all")
            fixed = f.file("calc/ops.py", ref=f"shopfloor/issue-{number}")

    assert state.result == "salvaged" and "cost limit reached" in state.reason, state
    assert 0.008 <= state.cost_usd <= 0.0101, state  # never more than the budget (one step's rounding)
    assert len(prs) == 1 and prs[0]["draft"] is True and "Salvaged by shopfloor" in prs[0]["body"], prs
    assert "cost limit reached" in prs[0]["body"]
    assert "return a + b" in fixed  # the edit made before the budget ran out is kept
    assert "cost not tracked" not in final  # priced: the budget was enforced
