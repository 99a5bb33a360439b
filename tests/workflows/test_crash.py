"""A worker process is SIGKILLed mid-run; another worker process finishes the run without
repeating any completed model call."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from agent_runs import agent_input, sample_repo, start_agent
from portable_repos import wait_for
from worker_process import WorkerProcess, worker_env_for

from shopfloor.testing import FakeModelServer, ScriptTurn

TURNS = 8
ANSWER = "greet() in src/greet.py says hello."


def script() -> list[ScriptTurn]:
    reads = ["README.md", "src/greet.py"]
    # Distinct calls: the same call three times would (rightly) trip the doom-loop rule.
    turns = [ScriptTurn.tool("read_file", f"step {i}", path=reads[i % 2], limit=10 + i) for i in range(TURNS)]
    return turns + [ScriptTurn(content=ANSWER)]


async def test_sigkilled_worker_run_is_finished_by_another_without_repeating_model_calls(
    temporal_client, temporal_server, settings, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer(script(), latency_s=1.0) as fake:
        env = worker_env_for(temporal_server, settings, fake)
        first = WorkerProcess(env, tmp_path / "worker-1.log")
        try:
            inp = agent_input(repo, "openai:fake-model", heartbeat_s=3)
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            # Kill while a model call is in flight, after three have completed.
            # Well inside the call's 1 s of latency, so the worker cannot have its answer yet.
            await wait_for(
                lambda: (
                    sum(r.completed for r in fake.requests) >= 3
                    and not fake.requests[-1].completed
                    and time.time() - fake.requests[-1].started > 0.2
                ),
                60,
                "three completed model calls and a fourth in flight",
            )
            first.kill()
            in_flight = {r.key for r in fake.requests if not r.completed}
            completed_before_kill = sum(r.completed for r in fake.requests)
        finally:
            first.stop()

        second = WorkerProcess(env, tmp_path / "worker-2.log")
        try:
            result = await asyncio.wait_for(handle.result(), timeout=120)
        finally:
            second.stop()

    assert first.proc.returncode == -9
    assert result.state == "completed"
    assert result.final_answer == ANSWER
    assert result.steps == TURNS + 1

    requests = fake.requests
    assert completed_before_kill >= 3 and len(in_flight) == 1
    # Every conversation state was answered exactly once, except the one in flight at the kill,
    # which the new worker had to ask again.
    completed = Counter(r.key for r in requests if r.completed)
    assert len(completed) == TURNS + 1
    repeated = {key for key, n in completed.items() if n > 1}
    assert repeated <= in_flight, f"completed model calls were repeated: {repeated - in_flight}"
    assert sorted({r.turn for r in requests}) == list(range(TURNS + 1))
    # The call cut off by the kill was asked again, and answered, by the second worker.
    assert sum(1 for r in requests if r.key in in_flight) >= 2
    assert completed[next(iter(in_flight))] >= 1
