"""A worker told to stop (SIGTERM, as a deploy or a scale-down does) lets the model call it is
running finish within SHOPFLOOR_WORKER_SHUTDOWN_GRACE_SECONDS, so nothing is asked twice; with no
grace the call is cut off and asked again by the next worker."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

from agent_runs import agent_input, sample_repo, start_agent
from harness_runs import wait_for
from temporalio.api.enums.v1 import EventType
from worker_process import WorkerProcess, worker_env_for

from shopfloor.testing import FakeModelServer, ScriptTurn

LATENCY_S = 2.0
SCRIPT = [ScriptTurn.tool("read_file", "reading", path="README.md"), ScriptTurn(content="It greets people.")]


async def model_step_attempts(handle) -> list[int]:
    """The attempt that completed each model_step activity, in history order (Temporal records an
    activity's started event once, for its last attempt)."""
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = e.activity_task_started_event_attributes
            if scheduled.get(attrs.scheduled_event_id) == "model_step":
                attempts.append(attrs.attempt)
    return attempts


async def stop_mid_call_then_finish(temporal_client, temporal_server, settings, tmp_path, grace: str):
    """SIGTERM the worker while its first model call is in flight; a second worker finishes the
    run. Returns (the first worker's exit code, whether the call in flight was answered, the
    run's result, every request the model saw, the model_step attempts)."""
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer(SCRIPT, latency_s=LATENCY_S) as fake:
        env = worker_env_for(temporal_server, settings, fake, SHOPFLOOR_WORKER_SHUTDOWN_GRACE_SECONDS=grace)
        first = WorkerProcess(env, tmp_path / "worker-1.log")
        try:
            handle = await start_agent(
                temporal_client, agent_input(repo, "openai:fake-model", heartbeat_s=5), settings.task_queue
            )
            await wait_for(
                lambda: len(fake.requests) == 1 and time.time() - fake.requests[0].started > 0.2,
                60,
                "the first model call to be in flight",
            )
            first.proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(first.proc.wait, 60)
            answered = fake.requests[0].completed
        finally:
            first.stop()
        second = WorkerProcess(env, tmp_path / "worker-2.log")
        try:
            result = await asyncio.wait_for(handle.result(), timeout=120)
        finally:
            second.stop()
        return code, answered, result, fake.requests, await model_step_attempts(handle)


async def test_a_stopping_worker_finishes_its_model_call_and_nothing_is_asked_twice(
    temporal_client, temporal_server, settings, tmp_path
):
    code, answered, result, requests, attempts = await stop_mid_call_then_finish(
        temporal_client, temporal_server, settings, tmp_path, grace="30"
    )
    assert code == 0 and answered, (code, answered)
    assert result.state == "completed" and result.final_answer == "It greets people."
    assert Counter(r.key for r in requests).most_common(1)[0][1] == 1  # every conversation state asked once
    assert attempts == [1, 1], attempts


async def test_with_no_grace_the_call_in_flight_is_cut_off_and_asked_again(
    temporal_client, temporal_server, settings, tmp_path
):
    code, answered, result, requests, attempts = await stop_mid_call_then_finish(
        temporal_client, temporal_server, settings, tmp_path, grace="0"
    )
    assert code == 0 and not answered
    assert result.state == "completed" and result.final_answer == "It greets people."
    assert requests[0].key == requests[1].key and requests[1].completed  # the same call, asked again
    assert attempts == [2, 1], attempts  # the first step's call took a second attempt
