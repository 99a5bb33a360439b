"""The factory end to end with crashes: the bug-issue scenario of test_factory_issue.py —
issue opened on the simulator → webhook edge → triage → fix → PR → simulated CI → review → a
maintainer's `/shopfloor approve` → merge — but the worker is a real `shopfloor worker` process,
SIGKILLed once while the fix agent's model call is in flight and once while the review agent's is.
A third worker process finishes the run.

Every model call goes over HTTP to one FakeModelServer (OpenAI wire format), which picks each
agent's script by the request's model name and logs every request with whether its answer was
delivered. So the log proves that no model call was repeated beyond the one in flight at each kill,
and the simulator proves exactly one PR, one progress comment and one review.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from factory_runs import APPROVE, FIX, TEST_CMD, TRIAGE, edge_subscribed, factory_worker_env, on_simulator, sample_repo
from simulator_runs import SimulatorHandle
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from worker_process import WorkerProcess

from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn

LATENCY_S = 1.0  # every model call "thinks" this long: the window in which a worker is killed


# One script per agent, chosen by the model name in the request ("openai:<agent>-model").
SCRIPTS: dict[str, list[ScriptTurn]] = {
    "triage-model": [
        ScriptTurn.tool("read_file", path="calc/ops.py"),
        ScriptTurn.tool("submit", **TRIAGE),
    ],
    "fix-model": [
        ScriptTurn.tool("read_file", path="calc/ops.py"),
        ScriptTurn.tool("edit_file", path="calc/ops.py", old="return a - b", new="return a + b"),
        ScriptTurn.tool("run_command", command=TEST_CMD),  # <- killed while this call is in flight
        ScriptTurn.tool("submit", **FIX),
    ],
    "review-model": [
        ScriptTurn.tool("read_file", path="calc/ops.py"),
        ScriptTurn.tool("submit", **APPROVE),  # <- killed while this call is in flight
    ],
}
FIX_KILL_TURN, REVIEW_KILL_TURN = 2, 1


def answer(turn: int, body: dict[str, Any]) -> ScriptTurn:
    return SCRIPTS[body["model"]][turn]  # an unknown model or an extra turn: a 500 the run shows


def log_tail(worker: WorkerProcess, chars: int = 4000) -> str:
    return worker.log.read_text(errors="replace")[-chars:] if worker.log.exists() else ""


def model_log(fake: FakeModelServer) -> str:
    return "\n".join(
        f"{r.body.get('model')} turn {r.turn}: status {r.status}, completed {r.completed}" for r in fake.requests
    )


async def wait_for(predicate, worker: WorkerProcess, fake: FakeModelServer, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert worker.proc.poll() is None, f"the worker exited ({worker.proc.returncode}):\n{log_tail(worker)}"
        assert time.monotonic() < deadline, (
            f"timed out waiting for {what}; model calls:\n{model_log(fake)}\nworker log:\n{log_tail(worker)}"
        )
        await asyncio.sleep(0.02)


def in_flight(fake: FakeModelServer, model: str, turn: int) -> LoggedRequest | None:
    """The request for `model`'s `turn` that is being "thought about" (well inside its latency)."""
    for r in fake.requests:
        if r.body.get("model") == model and r.turn == turn and not r.completed and time.time() - r.started > 0.2:
            return r
    return None


async def state_when(
    handle: WorkflowHandle, ok, worker: WorkerProcess, what: str, timeout_s: float = 90
) -> FactoryState:
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            last = await handle.query("factory", result_type=FactoryState)
            if ok(last):
                return last
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        assert worker.proc.poll() is None, f"the worker exited ({worker.proc.returncode}):\n{log_tail(worker)}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last: {last}\n{log_tail(worker)}"
        await asyncio.sleep(0.3)


async def test_worker_killed_during_fix_and_during_review_still_merges_once(
    simulator: SimulatorHandle, settings, temporal_server, temporal_client: Client, tmp_path: Path
):
    owner, name = "acme", f"calc{uuid.uuid4().hex[:6]}"
    repo = f"{owner}/{name}"
    simulator.create_repo(owner, name, source_dir=sample_repo(tmp_path / "src"), ci_command=TEST_CMD)
    simulator.set_permission(owner, name, "maria", "maintain")
    gh = simulator.api("bob")

    def get(path: str, **params: Any) -> Any:
        resp = simulator.api().get(f"/repos/{repo}{path}", params=params)
        resp.raise_for_status()
        return resp.json()

    # The edge runs here, the workers in their own processes; all share the data dir (blob store).
    edge_settings = on_simulator(settings, simulator)
    workers: list[WorkerProcess] = []
    handle: WorkflowHandle | None = None
    outcome: IssueOutcome | None = None
    with (
        FakeModelServer(answer, latency_s=LATENCY_S) as fake,
        edge_subscribed(simulator, repo, temporal_client, edge_settings),
    ):
        env = factory_worker_env(
            temporal_server,
            settings,
            fake,
            simulator,
            SHOPFLOOR_AGENT_MODELS=json.dumps(
                {agent: f"openai:{agent}-model" for agent in ("triage", "fix", "review")}
            ),
            # Priced, so the repository's cost budget is enforced on these runs too.
            SHOPFLOOR_PRICES=json.dumps({model: [1.0, 2.0] for model in SCRIPTS}),
            # The killed worker's in-flight model call is retried elsewhere after this silence.
            SHOPFLOOR_MODEL_HEARTBEAT_SECONDS="5",
        )

        def start_worker() -> WorkerProcess:
            workers.append(WorkerProcess(env, tmp_path / f"worker-{len(workers) + 1}.log"))
            return workers[-1]

        try:
            first = start_worker()
            resp = gh.post(
                f"/repos/{repo}/issues", json={"title": "add() subtracts", "body": "add(2, 3) returns -1, expected 5."}
            )
            assert resp.status_code == 201, resp.text
            number = resp.json()["number"]
            handle = temporal_client.get_workflow_handle(issue_workflow_id(repo, number))

            # Kill 1: the fix agent has read and edited; its next model call is in flight.
            await wait_for(
                lambda: in_flight(fake, "fix-model", FIX_KILL_TURN) is not None,
                first,
                fake,
                "the fix agent's model call after its edit",
            )
            first.kill()
            fix_victim = in_flight(fake, "fix-model", FIX_KILL_TURN)
            assert fix_victim is not None
            second = start_worker()

            # Kill 2: the review agent has read the file; its verdict call is in flight.
            await wait_for(
                lambda: in_flight(fake, "review-model", REVIEW_KILL_TURN) is not None,
                second,
                fake,
                "the review agent's verdict call",
                timeout_s=150,
            )
            second.kill()
            review_victim = in_flight(fake, "review-model", REVIEW_KILL_TURN)
            assert review_victim is not None
            third = start_worker()

            await state_when(
                handle,
                lambda s: s.waiting_for == "approval",
                third,
                "the merge stage to wait for approval",
                timeout_s=120,
            )
            resp = simulator.api("maria").post(
                f"/repos/{repo}/issues/{number}/comments", json={"body": "/shopfloor approve"}
            )
            assert resp.status_code == 201, resp.text
            outcome = IssueOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=60))
        finally:
            for w in workers:
                w.stop()
            if handle is not None and outcome is None:  # failed: leave no run behind on the server
                with contextlib.suppress(Exception):
                    await handle.terminate("test cleanup")
        requests = fake.requests

    # Both kills were real SIGKILLs of a live worker; the third worker finished the run.
    assert [w.proc.returncode for w in workers[:2]] == [-9, -9]
    assert len(workers) == 3

    # The run merged, through exactly one fix round and one review round.
    assert outcome.state == "done", outcome
    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.fix_round == 1 and outcome.factory.review_round == 1
    assert outcome.factory.children == [f"{handle.id}/triage", f"{handle.id}/fix-1", f"{handle.id}/review-1"]

    # GitHub: the issue closed as completed, exactly one PR (merged), one review, one progress comment.
    issue = get(f"/issues/{number}")
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert "bug" in [x["name"] for x in issue["labels"]]
    prs = get("/pulls", state="all")
    assert len(prs) == 1, prs
    pr = get(f"/pulls/{prs[0]['number']}")
    assert pr["merged"] and pr["head"]["ref"] == f"shopfloor/issue-{number}"
    assert f"Fixes #{number}" in pr["body"]
    assert outcome.factory.approved_heads == [pr["head"]["sha"]]
    reviews = get(f"/pulls/{pr['number']}/reviews")
    assert len(reviews) == 1, reviews
    assert reviews[0]["state"] == "COMMENTED" and reviews[0]["user"]["login"] == "shopfloor[bot]", reviews
    assert "approve" in reviews[0]["body"]
    progress = [
        c for c in get(f"/issues/{number}/comments") if "<!-- shopfloor:" in c["body"] and ":progress -->" in c["body"]
    ]
    assert len(progress) == 1, progress
    assert progress[0]["user"]["login"] == "shopfloor[bot]"
    assert "Final state: merged." in progress[0]["body"]
    main_ops = base64.b64decode(get("/contents/calc/ops.py", ref="main")["content"]).decode()
    assert "return a + b" in main_ops and "return a - b" not in main_ops
    assert f"shopfloor/issue-{number}" not in [b["name"] for b in get("/branches")]

    # The model calls: every conversation state of every agent was answered exactly once; the only
    # requests that got no answer are the two cut off by the kills, each asked again and answered.
    assert {r.body["model"] for r in requests} == set(SCRIPTS)
    for model, script in SCRIPTS.items():
        turns = sorted(r.turn for r in requests if r.body["model"] == model and r.completed)
        assert turns == list(range(len(script))), (model, turns)
    assert all(r.status == 200 for r in requests), [(r.body["model"], r.turn, r.status) for r in requests]
    completed = Counter(r.key for r in requests if r.completed)
    assert len(completed) == sum(map(len, SCRIPTS.values()))
    victims = {fix_victim.key, review_victim.key}
    repeated = {key for key, n in completed.items() if n > 1}
    assert not repeated, f"completed model calls were repeated: {repeated}"
    assert [r.key for r in requests if not r.completed] == [fix_victim.key, review_victim.key]
    assert all(completed[key] == 1 for key in victims)
    assert len(requests) == len(completed) + len(victims)
    # Each retried call was answered after its worker's death, by the next worker.
    retried = {r.key: r for r in requests if r.completed and r.key in victims}
    assert retried[fix_victim.key].started > fix_victim.started
    assert retried[review_victim.key].started > review_victim.started
