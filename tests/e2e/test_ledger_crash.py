"""The spend ledger counts each run once, whatever crashes: three issues triage (a priced model,
so each run costs something) and park; a maintainer closes all three, and the worker — a real
`shopfloor worker` process — is SIGKILLed while the runs end and report to the ledger. A second
worker finishes them. The ledger then holds exactly three runs and exactly their cost, with no
run left holding a slot, and repeated reports change nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

from factory_runs import TEST_CMD, TRIAGE, edge_subscribed, factory_worker_env, on_simulator, sample_repo
from simulator_runs import SimulatorHandle
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from waiting import DEADLINE_S
from worker_process import WorkerProcess

from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.models.ledger import LEDGER_QUERY, SPEND_SIGNAL, LedgerView, Spend, ledger_id
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptTurn

POLICY = f"auto_fix: label\nrequire_human_approval: true\ntest_command: {TEST_CMD}\n"
STEP = Usage(input_tokens=1_000, output_tokens=500)  # $0.002 a step at [1.0, 2.0] per Mtok
TURNS = [ScriptTurn.tool("read_file", path="calc/ops.py"), ScriptTurn.tool("submit", **TRIAGE)]


def answer(turn: int, body: dict) -> ScriptTurn:
    return TURNS[turn].model_copy(update={"usage": STEP})


async def until(predicate, what: str, worker: WorkerProcess, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = await predicate()
        except RPCError:
            value = None
        if value:
            return value
        assert worker.proc.poll() is None, f"the worker exited: {worker.log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.3)


async def test_a_worker_killed_while_runs_end_leaves_each_counted_exactly_once(
    simulator: SimulatorHandle, settings, temporal_server, temporal_client: Client, tmp_path: Path
):
    owner, name = "acme", f"calc{uuid.uuid4().hex[:6]}"
    repo = f"{owner}/{name}"
    simulator.create_repo(owner, name, source_dir=sample_repo(tmp_path / "src", POLICY), ci_command=TEST_CMD)
    simulator.set_permission(owner, name, "maria", "maintain")
    edge_settings = on_simulator(settings, simulator)
    ledger = temporal_client.get_workflow_handle(ledger_id(settings.task_queue))
    workers: list[WorkerProcess] = []
    with FakeModelServer(answer) as fake, edge_subscribed(simulator, repo, temporal_client, edge_settings):
        env = factory_worker_env(
            temporal_server,
            settings,
            fake,
            simulator,
            SHOPFLOOR_AGENT_MODELS=json.dumps({"triage": "openai:metered"}),
            SHOPFLOOR_PRICES=json.dumps({"metered": [1.0, 2.0]}),
            SHOPFLOOR_LEDGER="true",  # count every run, with no limit set
        )
        try:
            workers.append(first := WorkerProcess(env, tmp_path / "worker-1.log"))
            numbers = []
            for title in ("one", "two", "three"):
                resp = simulator.api("bob").post(
                    f"/repos/{repo}/issues", json={"title": title, "body": "add() subtracts"}
                )
                assert resp.status_code == 201, resp.text
                numbers.append(resp.json()["number"])
            handles = [temporal_client.get_workflow_handle(issue_workflow_id(repo, n)) for n in numbers]

            async def all_parked() -> list[FactoryState] | None:
                states = [await h.query("factory", result_type=FactoryState) for h in handles]
                return states if all(s.result == "parked" for s in states) else None

            states = await until(all_parked, "the three runs to triage and park", first)
            assert all(s.cost_usd > 0 for s in states), states
            keys = [f"{h.id}#{(await h.describe()).run_id}" for h in handles]

            for n in numbers:  # a maintainer closes all three: each run ends and tells the ledger
                resp = simulator.api("maria").patch(f"/repos/{repo}/issues/{n}", json={"state": "closed"})
                assert resp.status_code == 200, resp.text

            await asyncio.sleep(0.3)  # the edge has handed the closes on; the runs are ending
            first.kill()  # while the others end and report
            running_at_kill = sum([(await h.describe()).status == WorkflowExecutionStatus.RUNNING for h in handles])
            workers.append(second := WorkerProcess(env, tmp_path / "worker-2.log"))
            outcomes = [IssueOutcome.model_validate(await asyncio.wait_for(h.result(), DEADLINE_S)) for h in handles]

            async def settled() -> LedgerView | None:
                view = await ledger.query(LEDGER_QUERY, result_type=LedgerView)
                return view if view.total.running == 0 else None

            view = await until(settled, "the ledger to see every run end", second)
            # What a retried activity or a replayed run would send again: counted already, so nothing.
            for key in keys:
                await ledger.signal(SPEND_SIGNAL, Spend(key=key, repo=repo, cost_usd=1.0, final=True))
            again = await ledger.query(LEDGER_QUERY, result_type=LedgerView)
        finally:
            for w in workers:
                w.stop()
    costs = [o.factory.cost_usd for o in outcomes if o.factory is not None]
    assert len(costs) == 3 and all(c > 0 for c in costs), outcomes
    (mine,) = [r for r in view.repos if r.repo == repo]
    assert (mine.today.runs, mine.month.runs, mine.running, mine.queued) == (3, 3, 0, [])
    assert round(mine.today.cost_usd, 9) == round(sum(costs), 9) == round(mine.month.cost_usd, 9)
    assert view.total.today == mine.today
    assert again.model_dump(exclude={"day", "month"}) == view.model_dump(exclude={"day", "month"})
    assert running_at_kill >= 1  # the kill came while runs were still ending
