"""Resume after a crash: how long an agent run stands still when its worker is SIGKILLed mid-step.

A real `shopfloor worker` process (shopfloor.bench.spawn) runs the agent workload
(shopfloor.bench.workload) with the model taking L per call. While step K's model call is in
flight (the fake model server holds the request), the bench SIGKILLs the worker and at once starts
a replacement, as a supervisor (systemd, Kubernetes) would. Temporal notices the dead worker's
call only when its heartbeats stop for the heartbeat timeout (`Timeouts.model_heartbeat_s`), then
retries it (MODEL_RETRY: after 1 s) on the replacement, which calls the model again (L) and the
workflow records the step.

Measured: from the kill to the workflow task that records step K's model call (the step is done
and the run moves on), from the workflow's own history (server timestamps; same machine, same
clock as the kill). Reference: the heartbeat timeout, the part of the wait that durability
imposes and that the setting bounds; what comes on top is the retry interval, one model call and
the workflow task's dispatch.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from pydantic import BaseModel
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType, TimeoutType
from temporalio.api.history.v1 import HistoryEvent

from shopfloor.bench.spawn import WorkerProcess, worker_env
from shopfloor.bench.workload import MODEL, agent_input, chain_history, make_workspace, script
from shopfloor.devserver import DevServer, free_port
from shopfloor.errors import ShopfloorError
from shopfloor.models.agent_run import AgentResult, WorkspaceRef
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.testing import FakeModelServer
from shopfloor.workflows.agent import AgentWorkflow

MODEL_RETRY_INTERVAL_S = 1.0  # workflows/agent.py MODEL_RETRY.initial_interval


class ResumeReport(BaseModel):
    model_latency_ms: int
    heartbeat_timeout_s: float
    sticky_timeout_s: float  # the workers' SHOPFLOOR_STICKY_QUEUE_TIMEOUT_SECONDS
    steps: int
    killed_in_step: int
    killed_after_s: float  # how long the killed step's model call had been in flight
    # All from the kill:
    replacement_polling_s: float  # the new worker polls for activity tasks
    retry_started_s: float  # the new worker took the retried model_step activity (history)
    retry_attempt: int  # its attempt number (2: the killed attempt, then this one)
    retried_call_s: float  # the model call arrives again at the model (from the new worker)
    call_completed_s: float  # its activity completed (history)
    resume_s: float  # the workflow task recording the step completed (history): the run moves on
    # Where that workflow task was first offered: "normal" (any worker) or "sticky" (the dead
    # worker's queue, waited out until the sticky timeout: sticky_timeouts counts those waits).
    result_task_queue: str
    sticky_timeouts: int
    model_calls_repeated: int  # model calls made twice: the one in flight at the kill, nothing else
    state: str

    def markdown(self) -> str:
        return "\n".join(
            [
                (
                    "| model latency | heartbeat timeout | killed in step | replacement polling s | call retried s "
                    "| call done s | step recorded s |"
                ),
                "|---:|---:|---:|---:|---:|---:|---:|",
                (
                    f"| {self.model_latency_ms} ms | {self.heartbeat_timeout_s:g} s | {self.killed_in_step} of {self.steps} "
                    f"| {self.replacement_polling_s:.2f} | {self.retried_call_s:.2f} | {self.call_completed_s:.2f} "
                    f"| {self.resume_s:.2f} |"
                ),
            ]
        )


def _at(event: HistoryEvent) -> float:
    return event.event_time.ToMicroseconds() / 1e6


async def _wait(what: str, predicate, worker: WorkerProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if not worker.alive():
            raise ShopfloorError(
                f"the bench's worker exited ({worker.proc.returncode}) waiting for {what}:\n{worker.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise ShopfloorError(
                f"timed out after {timeout_s:.0f} s waiting for {what}; worker log:\n{worker.log_tail()}"
            )
        await asyncio.sleep(0.02)


async def bench_resume(
    *,
    latency_ms: int = 2000,
    heartbeat_s: float = 5.0,
    steps: int = 5,
    kill_in_step: int = 3,
    worker_settings: dict[str, str] | None = None,
) -> ResumeReport:
    """`worker_settings`: more environment for both workers (SHOPFLOOR_*), to compare settings."""
    if not 1 <= kill_in_step < steps:
        raise ValueError(f"kill_in_step must be in 1..{steps - 1}, not {kill_in_step}")
    latency_s = latency_ms / 1000
    kill_turn = kill_in_step - 1  # the fake model counts turns from 0
    workers: list[WorkerProcess] = []
    with tempfile.TemporaryDirectory(prefix="shopfloor-bench-resume-") as tmp:
        base = Path(tmp)
        workspace = WorkspaceRef(repo="local/bench", path=str(make_workspace(base / "repo")))
        server = DevServer(port=free_port())
        server.start()
        try:
            await server.wait_ready()
            with FakeModelServer(script, latency_s=latency_s) as fake:
                queue = f"bench-resume-{uuid.uuid4().hex[:8]}"
                settings = Settings(temporal_address=server.address, task_queue=queue, data_dir=base / "data")
                # Configured as a deployed worker is: its model named, so it opens the provider at start.
                env = worker_env(
                    SHOPFLOOR_TEMPORAL_ADDRESS=server.address,
                    SHOPFLOOR_TASK_QUEUE=queue,
                    SHOPFLOOR_DATA_DIR=str(base / "data"),
                    SHOPFLOOR_LOG_LEVEL="WARNING",
                    SHOPFLOOR_LOG_JSON="true",
                    SHOPFLOOR_MODEL=MODEL,
                    OPENAI_BASE_URL=fake.openai_base_url,
                    OPENAI_API_KEY="bench-not-a-secret",
                    **(worker_settings or {}),
                )
                client = await connect(settings)

                def spawn() -> WorkerProcess:
                    workers.append(WorkerProcess(env, base / f"worker-{len(workers) + 1}.log"))
                    return workers[-1]

                first = spawn()

                async def first_polls() -> bool:
                    return await first.polling(client, queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)

                await _wait("the worker to poll its task queue", first_polls, first, 120)
                # A warm-up run: the worker's first model call imports the provider SDK and opens its
                # connection pool, which the steps before the kill should not include.
                warm = await client.execute_workflow(
                    AgentWorkflow.run,
                    agent_input(workspace, 2, heartbeat_s=max(heartbeat_s, 30)),
                    id=f"bench/resume-warm-{uuid.uuid4().hex[:8]}",
                    task_queue=queue,
                )
                if warm.state != "completed":
                    raise ShopfloorError(f"the warm-up run ended {warm.state}: {warm.reason}")
                fake_seen = len(fake.requests)
                handle = await client.start_workflow(
                    AgentWorkflow.run,
                    agent_input(workspace, steps, heartbeat_s=heartbeat_s),
                    id=f"bench/resume-{uuid.uuid4().hex[:8]}",
                    task_queue=queue,
                )

                # Kill while the step's model call is well inside its latency.
                in_flight_for = min(0.5, latency_s / 4)

                async def call_in_flight() -> bool:
                    now = time.time()
                    return any(
                        r.turn == kill_turn and not r.completed and now - r.started >= in_flight_for
                        for r in fake.requests[fake_seen:]
                    )

                await _wait(f"step {kill_in_step}'s model call", call_in_flight, first, 120)
                request = next(r for r in fake.requests[fake_seen:] if r.turn == kill_turn)
                killed_at = first.kill()
                killed_after = killed_at - request.started
                second = spawn()

                async def second_polls() -> bool:
                    return await second.polling(client, queue, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)

                await _wait("the replacement worker to poll", second_polls, second, 120)
                polling_at = time.time()
                result_task = asyncio.create_task(handle.result())
                deadline = time.monotonic() + heartbeat_s + 60 * (1 + latency_s) * steps
                while not result_task.done():
                    if not second.alive():
                        raise ShopfloorError(f"the replacement worker exited:\n{second.log_tail()}")
                    if time.monotonic() > deadline:
                        result_task.cancel()
                        raise ShopfloorError(f"the run did not finish after the kill; worker log:\n{second.log_tail()}")
                    await asyncio.sleep(0.1)
                result: AgentResult = result_task.result()
                if result.state != "completed":
                    raise ShopfloorError(f"the resumed run ended {result.state}: {result.reason}")
                chain = await chain_history(client, handle.id, handle.first_execution_run_id or handle.run_id or "")
                requests = fake.settled_requests()[fake_seen:]
        finally:
            for w in workers:
                w.stop()
            server.stop()

    # The killed step's model_step activity, and the workflow task that took in its result.
    events = chain.events
    scheduled = [
        e
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "model_step"
    ]
    target = scheduled[kill_in_step - 1].event_id
    done_i = next(
        i
        for i, e in enumerate(events)
        if e.HasField("activity_task_completed_event_attributes")
        and e.activity_task_completed_event_attributes.scheduled_event_id == target
    )
    started = next(
        e
        for e in events
        if e.HasField("activity_task_started_event_attributes")
        and e.activity_task_started_event_attributes.scheduled_event_id == target
    )
    recorded = next(e for e in events[done_i:] if e.HasField("workflow_task_completed_event_attributes"))
    offered = next(e for e in events[done_i:] if e.HasField("workflow_task_scheduled_event_attributes"))
    sticky = offered.workflow_task_scheduled_event_attributes.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY
    sticky_timeouts = sum(
        1
        for e in events
        if e.HasField("workflow_task_timed_out_event_attributes")
        and e.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
    )
    retried = [r for r in requests if r.turn == kill_turn][1:]
    turns = [r.turn for r in requests]
    return ResumeReport(
        model_latency_ms=latency_ms,
        heartbeat_timeout_s=heartbeat_s,
        steps=steps,
        killed_in_step=kill_in_step,
        sticky_timeout_s=float(
            (worker_settings or {}).get(
                "SHOPFLOOR_STICKY_QUEUE_TIMEOUT_SECONDS", Settings.model_fields["sticky_queue_timeout_seconds"].default
            )
        ),
        killed_after_s=killed_after,
        replacement_polling_s=polling_at - killed_at,
        retry_started_s=_at(started) - killed_at,
        retry_attempt=started.activity_task_started_event_attributes.attempt,
        retried_call_s=(retried[0].started - killed_at) if retried else float("nan"),
        call_completed_s=_at(events[done_i]) - killed_at,
        resume_s=_at(recorded) - killed_at,
        result_task_queue="sticky" if sticky else "normal",
        sticky_timeouts=sticky_timeouts,
        model_calls_repeated=len(turns) - len(set(turns)),
        state=result.state,
    )
