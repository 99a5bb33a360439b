"""A worker process is SIGKILLed mid model call: the call is retried on a replacement worker, and the
workflow task its result schedules goes to the normal task queue at once, not to the dead worker's
sticky queue to wait out the sticky timeout there (shopfloor/sticky_reset.py).

Sticky queues exist only where workers cache workflows, so these workers keep a cache (the other
worker-process tests run without one), and the sticky timeout is long (60 s): a task offered to
the dead worker's queue would show in the history as a workflow task scheduled on the sticky queue
and then timed out before it started.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from agent_runs import agent_input, sample_repo, start_agent
from portable_repos import wait_for
from temporalio.api.enums.v1 import TaskQueueKind, TimeoutType
from worker_process import WorkerProcess, worker_env_for

from shopfloor.testing import FakeModelServer, ScriptTurn

TURNS = 4
ANSWER = "greet() in src/greet.py says hello."


def script() -> list[ScriptTurn]:
    reads = ["README.md", "src/greet.py"]
    turns = [ScriptTurn.tool("read_file", f"step {i}", path=reads[i % 2], limit=10 + i) for i in range(TURNS)]
    return turns + [ScriptTurn(content=ANSWER)]


async def test_a_retried_calls_result_goes_to_the_replacement_not_to_the_dead_workers_sticky_queue(
    temporal_client, temporal_server, settings, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer(script(), latency_s=1.0) as fake:
        env = worker_env_for(
            temporal_server,
            settings,
            fake,
            SHOPFLOOR_MAX_CACHED_WORKFLOWS="100",
            SHOPFLOOR_STICKY_QUEUE_TIMEOUT_SECONDS="60",
        )
        first = WorkerProcess(env, tmp_path / "worker-1.log")
        try:
            # A 5 s heartbeat timeout: a first call held up while the worker opens its provider keeps its attempt.
            inp = agent_input(repo, "openai:fake-model", heartbeat_s=5)
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            await wait_for(
                lambda: (
                    sum(r.completed for r in fake.requests) >= 2
                    and not fake.requests[-1].completed
                    and time.time() - fake.requests[-1].started > 0.2
                ),
                60,
                "two completed model calls and a third in flight",
            )
            first.kill()
            in_flight = {r.key for r in fake.requests if not r.completed}
        finally:
            first.stop()
        second = WorkerProcess(env, tmp_path / "worker-2.log")
        try:
            # Well inside the 60 s sticky timeout: a result offered to the dead worker would not be in yet.
            result = await asyncio.wait_for(handle.result(), timeout=50)
        finally:
            second.stop()
        history = await handle.fetch_history()
        requests = fake.settled_requests()

    assert first.proc.returncode == -9
    assert result.state == "completed" and result.final_answer == ANSWER
    completed = Counter(r.key for r in requests if r.completed)
    assert {key for key, n in completed.items() if n > 1} <= in_flight  # only the call in flight was repeated

    events = list(history.events)
    retried = [
        e.activity_task_started_event_attributes.scheduled_event_id
        for e in events
        if e.HasField("activity_task_started_event_attributes") and e.activity_task_started_event_attributes.attempt > 1
    ]
    assert retried, "no activity was retried after the kill"
    for scheduled_id in retried:
        done = next(
            i
            for i, e in enumerate(events)
            if e.HasField("activity_task_completed_event_attributes")
            and e.activity_task_completed_event_attributes.scheduled_event_id == scheduled_id
        )
        # The workflow task that takes in the retried activity's result: on the normal queue.
        task = next(e for e in events[done:] if e.HasField("workflow_task_scheduled_event_attributes"))
        queue = task.workflow_task_scheduled_event_attributes.task_queue
        assert queue.kind == TaskQueueKind.TASK_QUEUE_KIND_NORMAL and queue.name == settings.task_queue, queue
    timed_out = [
        e
        for e in events
        if e.HasField("workflow_task_timed_out_event_attributes")
        and e.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
    ]
    assert timed_out == []
