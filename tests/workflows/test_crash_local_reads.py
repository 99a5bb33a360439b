"""A worker process is SIGKILLed during a burst of read-only tool calls, which run as local
activities; another worker process finishes the run.

Temporal's guarantee for a local activity: it runs at least once, and its result is recorded (a
marker) when the workflow task that ran it completes. Once recorded it never runs again; if the
worker dies before, the workflow task times out and the worker that takes it next runs the
activity again: once more per workflow task attempt that reached it (plus its own retries after
a failure; none fail here). So with one kill: a call recorded before the kill ran once, a call of
the burst the kill cut short ran at most twice, every later call once. Which files the workers
opened, and how often, is counted from outside them (inotify on the repository).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections import Counter

from agent_runs import LOCAL_ACTIVITY_MARKER, agent_input, start_agent
from file_opens import FileOpens
from portable_repos import wait_for
from temporalio.api.enums.v1 import EventType
from worker_process import WorkerProcess, worker_env_for

from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

STEPS = 6  # replies of read_file calls, then the answer
CALLS = 3  # read_file calls in each reply: they run at once
LINES = 6_000_000
LINE = b"abcdefghi\n"  # 60 MB in all: each call scans the file to its offset, so a burst takes a while
ANSWER = "Read them all."


def name(step: int, call: int) -> str:
    return f"big_{step}_{call}.txt"


def step_of(file: str) -> int:
    return int(file.split("_")[1])


def script() -> list[ScriptTurn]:
    turns = [
        ScriptTurn(
            content=f"reading batch {s}",
            tool_calls=[
                ScriptToolCall(name="read_file", arguments={"path": name(s, k), "offset": LINES - k, "limit": 1})
                for k in range(CALLS)
            ],
        )
        for s in range(STEPS)
    ]
    return [*turns, ScriptTurn(content=ANSWER)]


async def recorded_reads(handle) -> int:
    """Local activities whose results the run's history holds."""
    history = await handle.fetch_history()
    return sum(
        e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
        for e in history.events
    )


async def test_a_worker_killed_during_a_burst_of_local_reads_leaves_each_run_at_most_twice(
    temporal_client, temporal_server, settings, tmp_path
):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / name(0, 0)).write_bytes(LINE * LINES)
    for s in range(STEPS):
        for k in range(CALLS):
            if (s, k) != (0, 0):
                os.link(repo / name(0, 0), repo / name(s, k))  # one file's data under every name

    frozen = threading.Event()
    caught: dict[str, int | str] = {"from_step": 1}
    first: WorkerProcess | None = None

    def freeze_at_a_burst(file: str) -> None:
        # In the watcher thread, as the open is seen: stop the worker where it is, mid-burst.
        if first is not None and not frozen.is_set() and step_of(file) >= int(caught["from_step"]):
            os.kill(first.proc.pid, signal.SIGSTOP)
            caught.update(step=step_of(file), file=file)
            frozen.set()

    with FakeModelServer(script()) as fake, FileOpens(repo, freeze_at_a_burst) as opens:
        env = worker_env_for(temporal_server, settings, fake)
        first = WorkerProcess(env, tmp_path / "worker-1.log")
        try:
            handle = await start_agent(temporal_client, agent_input(repo, "openai:fake-model"), settings.task_queue)
            while True:
                await wait_for(frozen.is_set, 120, "the worker to start a burst of reads")
                await asyncio.sleep(0.5)  # a completion already sent reaches the server meanwhile
                step = int(caught["step"])
                recorded = await recorded_reads(handle)
                if recorded < CALLS * (step + 1):
                    break  # the burst's results are not in history: kill it now
                # The burst finished before the worker stopped: let it go on and catch the next.
                assert step + 1 < STEPS, "every burst finished before the worker could be stopped"
                caught["from_step"] = step + 1
                frozen.clear()
                os.kill(first.proc.pid, signal.SIGCONT)
            first.kill()
            opened_before_kill = opens.snapshot()
        finally:
            first.stop()

        second = WorkerProcess(env, tmp_path / "worker-2.log")
        try:
            result = await asyncio.wait_for(handle.result(), timeout=120)
        finally:
            second.stop()
        opened = opens.snapshot()
        requests = fake.requests

    assert first.proc.returncode == -9
    assert result.state == "completed" and result.final_answer == ANSWER, result
    assert result.steps == STEPS + 1

    killed_at, trigger = int(caught["step"]), str(caught["file"])
    assert recorded == CALLS * killed_at, "the kill came before the burst's results were recorded"
    assert opened_before_kill[trigger] == 1
    for s in range(STEPS):
        for k in range(CALLS):
            file, times = name(s, k), opened[name(s, k)]
            if s < killed_at:  # recorded before the kill: never run again
                assert times == 1, f"{file}, recorded before the kill, was read {times} times"
            elif s == killed_at:  # cut short: run again by the next worker, at most once more
                assert 1 <= times <= 2, f"{file} was read {times} times"
            else:
                assert times == 1, f"{file} was read {times} times"
    assert opened[trigger] == 2  # the call in flight at the kill ran again on the second worker

    # No completed model call was asked again, and the model read every call's result.
    completed = Counter(r.key for r in requests if r.completed)
    assert len(completed) == STEPS + 1 and set(completed.values()) == {1}, completed
    tool_messages = [m for m in requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == STEPS * CALLS
    assert all("abcdefghi" in str(m["content"]) for m in tool_messages)
