"""No model input may stall a worker.

The attacks: text a model sends that made the worker's checks super-linear — a 63 KB command the
fork-bomb regex retried from each of its characters (minutes on the event loop), a 1 MB word that
shlex split in quadratic time to see whether it was the required test command, a grep pattern
that Python's backtracking `re` runs in exponential time (holding the GIL, so every run on the
worker froze), a reply full of text actions, a long `*` name, a tower of prefixes. Each must now
be answered within a bound (2 s of CPU time, generous; before, these took minutes or never ended);
a repository rule that still backtracks is cut off in its child process while the
event loop keeps turning; and end to end, a real worker process keeps answering a run's `status`
query within 1 s while its model sends a 1 MB command, a fork bomb behind a 63 KB word and a
catastrophic grep, and the run finishes with the errors the model saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from portable_repos import code_input, load_messages, make_repo
from temporalio.service import RPCError
from worker_process import WorkerProcess, worker_env_for

from shopfloor.activities.tools.read_only import glob, grep
from shopfloor.agents.command_judge import judge_command
from shopfloor.agents.permissions import PermissionPolicy, classify
from shopfloor.agents.submission import runs_required
from shopfloor.agents.text_actions import parse_text_actions
from shopfloor.agents.tools import GlobArgs, GrepArgs
from shopfloor.blobs import FileBlobStore
from shopfloor.errors import ToolError
from shopfloor.models.agent_run import AgentResult
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow

T = TypeVar("T")
BOUND_S = 2.0
MB = 1_000_000
BOMB_63KB = "a" * 63_000 + "; :(){ :|:& };:"  # a real fork bomb, behind a 63 KB word


def _cpu_seconds() -> float:
    """CPU time of this thread and of the child processes it waited for (ripgrep): the work done,
    which other processes' load on the machine does not inflate as it does wall-clock time."""
    times = os.times()
    return time.thread_time() + times.children_user + times.children_system


def within_bound(fn: Callable[..., T], *args: Any) -> T:
    start = _cpu_seconds()
    value = fn(*args)
    spent = _cpu_seconds() - start
    assert spent < BOUND_S, f"{fn.__name__} took {spent:.1f} s of CPU"
    return value


# --- the checks on a command -------------------------------------------------------------------


@pytest.mark.fast
def test_a_1_mb_command_is_refused_at_once_with_the_cap_in_the_reason():
    verdict = within_bound(classify, "run_command", {"command": "echo " + "a" * MB})
    assert verdict.decision == "deny"
    assert "commands are limited to 64 KB" in verdict.reason and "script file" in verdict.reason


@pytest.mark.fast
@pytest.mark.parametrize(
    ("command", "decision", "says"),
    [
        ("a" * 63_000, "allow", ""),  # one long word: the old fork-bomb regex's worst case
        (BOMB_63KB, "deny", "fork bomb"),
        ("f(){ " * 12_000, "deny", "could not parse"),  # thousands of unclosed function heads
        ("g(){ " + "h g | " * 10_000 + "h; }", "allow", ""),  # one body, thousands of pipes
        ("rm -r '" + "*" * 63_000 + "x'", "allow", ""),  # a long `*` name: path_rules' old regex
        ("cd .. && " * 7_000 + "rm -rf .", "deny", "too deep to follow"),
        ("nice " * 12_000 + "ls", "deny", "prefixes"),
    ],
    ids=["one-word", "bomb-behind-word", "unclosed-heads", "pipes-in-body", "star-name", "cd-chain", "prefixes"],
)
def test_a_63_kb_command_is_judged_within_the_bound(command: str, decision: str, says: str):
    assert len(command) < 64 * 1024
    verdict = within_bound(classify, "run_command", {"command": command})
    assert verdict.decision == decision, verdict.reason
    assert says in verdict.reason


@pytest.mark.fast
def test_a_command_behind_too_many_prefixes_is_refused_not_followed():
    assert judge_command("nice " * 16 + "ls")[0] == "allow"
    decision, reason = judge_command("nice " * 17 + "ls")
    assert decision == "deny" and "more than 16 prefixes" in reason


@pytest.mark.fast
def test_a_1_mb_word_is_not_split_to_find_the_required_command():
    word = "a" * MB
    assert within_bound(runs_required, "run_command", {"command": word}, "pytest -q", None) is False
    assert (
        within_bound(runs_required, "run_command", {"command": f'echo "{word}" && pytest -q'}, "pytest -q", None)
        is False
    )
    # Under the cap the check still works.
    assert runs_required("run_command", {"command": "cd x &&  pytest  -q"}, "pytest -q", None) is True


@pytest.mark.fast
def test_run_tests_arguments_and_paths_have_caps_too():
    verdict = within_bound(classify, "run_tests", {"args": "a" * MB})
    assert verdict.decision == "deny" and "limited to 64 KB" in verdict.reason
    verdict = within_bound(classify, "write_file", {"path": "a/" * MB, "content": ""})
    assert verdict.decision == "deny" and "paths are limited to 4096 bytes" in verdict.reason


@pytest.mark.fast
def test_a_reply_full_of_text_actions_is_parsed_within_the_bound():
    reply = 'Action: read_file(path="README.md")\n' * 10_000 + "x" * 200_000
    calls = within_bound(parse_text_actions, reply, ["read_file"])
    assert len(calls) == 10_000 and calls[-1].arguments == {"path": "README.md"}


# --- grep: a backtracking pattern ---------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a" * 100_000 + "!\n")
    (ws / "x.txt").write_text("x" * 100_000 + "\n")
    (ws / "ok.txt").write_text("aaa\nxxy\n")
    return ws


@pytest.mark.parametrize(("pattern", "found"), [("(a+)+$", "ok.txt:1: aaa"), ("(x+x+)+y", "ok.txt:2: xxy")])
def test_a_catastrophic_pattern_is_answered_within_the_bound(ws: Path, pattern: str, found: str):
    assert within_bound(grep, ws, GrepArgs(pattern=pattern)) == found


@pytest.mark.parametrize(
    ("pattern", "says"),
    [(r"(?<=a)b", "look-around"), (r"(a)\1", "backreferences are not supported"), (r"\n", "never spans lines")],
)
def test_what_ripgrep_cannot_run_is_a_clear_tool_error(ws: Path, pattern: str, says: str):
    with pytest.raises(ToolError) as info:
        grep(ws, GrepArgs(pattern=pattern))
    message = str(info.value)
    assert message.startswith(f"invalid regular expression {pattern!r}: ") and says in message
    assert "Traceback" not in message and "rg:" not in message


@pytest.mark.fast
def test_a_glob_pattern_of_thousands_of_parts_is_refused_before_the_walk(tmp_path: Path):
    for d in range(20):  # every entry of a walk is matched against every part of the pattern
        (tmp_path / f"d{d}" / "x").mkdir(parents=True)
        for f in range(20):
            (tmp_path / f"d{d}" / "x" / f"f{f}.txt").write_text("hi\n")
    pattern = "**/" * 20_000 + "*.txt"
    with pytest.raises(ToolError) as info:
        within_bound(glob, tmp_path, GlobArgs(pattern=pattern))
    assert "globs are limited to 1000" in str(info.value)
    with pytest.raises(ToolError):
        within_bound(grep, tmp_path, GrepArgs(pattern="hi", glob=pattern))
    assert "d0/x/f0.txt" in within_bound(glob, tmp_path, GlobArgs(pattern="**/*.txt"))


# --- defence in depth: a repository rule that still backtracks ---------------------------------


async def test_a_backtracking_repository_rule_is_cut_off_while_the_loop_keeps_turning():
    from shopfloor.activities.judging import JUDGE_TIME_LIMIT_S, CallToJudge, judge_calls

    slow = PermissionPolicy(deny_commands=[r"^(a+)+$"]).model_dump()  # a maintainer's mistake
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    try:
        start = time.monotonic()
        slow_one, fine = await judge_calls(
            [
                CallToJudge(tool="run_command", arguments={"command": "a" * 60 + "!"}, policy=slow),
                CallToJudge(tool="run_command", arguments={"command": "git push"}, policy=slow),
            ]
        )
        elapsed = time.monotonic() - start
    finally:
        ticking.cancel()
    assert slow_one.decision == "deny" and "took longer than" in slow_one.reason
    assert fine.decision == "deny" and "git push" in fine.reason
    assert JUDGE_TIME_LIMIT_S <= elapsed < JUDGE_TIME_LIMIT_S + 30
    # Inline, the rule held the loop for the whole judgment (forever: it is exponential).
    assert max(gaps) < 2.0, f"the event loop stood still for {max(gaps):.1f} s"
    # The killed child is replaced: the next judgment works.
    (again,) = await judge_calls([CallToJudge(tool="run_command", arguments={"command": "ls"}, policy=slow)])
    assert again.decision == "allow"


# --- end to end: a worker process keeps answering ----------------------------------------------

CHECK = "python3 check.py"
FIX = {"pr_title": "Nothing to fix", "pr_body": "Fixes #1", "summary": "The tests pass.", "tests_command": CHECK}
# A status query answers in about 0.1 s here; a stalled worker took minutes or never answered. The
# bound leaves room for a loaded CI machine (one answer took 1.1 s there, with a 1 s bound).
QUERY_LIMIT_S = 3.0
QUERY_TIMEOUT_S = 10.0  # a query not answered by then counts as never answered
# With no workflow cache (as tests run workers), the Temporal SDK's core evicts a run after each
# workflow task and drops what it had buffered for the run meanwhile, a query racing that task, with
# this warning; the run then waits out the workflow task timeout (10 s) and the query with it. That
# is the SDK's zero-cache eviction, not a stalled worker; a worker with a cache (the default) does not.
DROPPED_TASK = "leftover buffered tasks when evicting run"
WFT_TIMEOUT_S = 10 + 1


async def test_a_worker_keeps_answering_while_its_model_sends_stalling_input(
    temporal_client, temporal_server, settings, tmp_path: Path
):
    repo = tmp_path / "repo"
    sha = make_repo(repo, {"check.py": "print('ok')\n", "aaaa.txt": "a" * 100_000 + "!\n"})
    calls = [
        ScriptToolCall(name="read_file", arguments={"path": "check.py"}),  # the worker warms up (imports)
        ScriptToolCall(name="run_command", arguments={"command": "a" * MB}),
        ScriptToolCall(name="run_command", arguments={"command": BOMB_63KB}),
        ScriptToolCall(name="grep", arguments={"pattern": "(a+)+$", "path": "aaaa.txt"}),
        ScriptToolCall(name="run_command", arguments={"command": CHECK}),
        ScriptToolCall(name="submit", arguments=FIX),
    ]
    turns = [ScriptTurn(content=f"turn {i}", tool_calls=[c]) for i, c in enumerate(calls)]
    inp = code_input(repo, sha, "Check that the tests pass.").model_copy(
        update={
            "agent": "fix",
            "required_command": CHECK,
            "compaction_budget_tokens": 10 * MB,  # keep the 1 MB call: the fake model counts turns
        }
    )
    with FakeModelServer(turns) as fake:
        worker = WorkerProcess(worker_env_for(temporal_server, settings, fake), tmp_path / "worker.log")
        handle = result = None
        try:
            handle = await temporal_client.start_workflow(
                AgentWorkflow.run, inp, id=f"test/stall-{uuid.uuid4().hex[:10]}", task_queue=settings.task_queue
            )
            result, latencies = await _result_while_polling(handle, worker)
        finally:
            worker.stop()
            if handle is not None and result is None:
                with contextlib.suppress(Exception):
                    await handle.terminate("test cleanup")

    assert max(latencies) < QUERY_LIMIT_S, f"status took {max(latencies):.1f} s to answer:\n{worker.log_tail()}"
    assert len(latencies) >= 5, latencies  # one query after another while the attacks ran
    assert result is not None and result.state == "completed", result
    assert result.output is not None and result.output["tests_passed"] is True
    messages = await load_messages(FileBlobStore(settings.data_dir / "blobs"), result.transcript)
    seen = [m for m in messages if m.role == "tool"]
    assert [m.name for m in seen] == ["read_file", "run_command", "run_command", "grep", "run_command"]
    assert seen[1].is_error and "commands are limited to 64 KB" in seen[1].content
    assert seen[2].is_error and "fork bomb" in seen[2].content
    assert not seen[3].is_error and "no matches for '(a+)+$' in 'aaaa.txt'" in seen[3].content
    assert not seen[4].is_error and "exit code 0" in seen[4].content


async def _result_while_polling(handle, worker: WorkerProcess) -> tuple[AgentResult | None, list[float]]:
    """The run's result, and how long each `status` query took, asked one after another once the first
    step is done (the worker process has started and imported its model's SDK). Stops at the first
    answer slower than QUERY_LIMIT_S, without a result (a stalled worker may never answer again),
    unless the worker's log shows the SDK dropped a task within a workflow task timeout before it
    (DROPPED_TASK): then polling goes on, at most three times, and later queries must be in time."""
    done = asyncio.ensure_future(handle.result())
    latencies: list[float] = []
    answered = False
    excused: set[float] = set()
    deadline = time.monotonic() + 240
    try:
        while not done.done():
            assert worker.alive(), f"the worker exited:\n{worker.log_tail()}"
            assert time.monotonic() < deadline, f"the run did not finish:\n{worker.log_tail()}"
            start, started_at = time.monotonic(), time.time()
            try:
                status = await asyncio.wait_for(handle.query(AgentWorkflow.status), timeout=QUERY_TIMEOUT_S)
            except (TimeoutError, RPCError):
                if not answered:
                    await asyncio.sleep(0.1)  # the worker is still starting
                    continue
                status = None  # an answer that never came
            if answered:
                took = time.monotonic() - start
                if took < QUERY_LIMIT_S and status is not None:
                    latencies.append(took)
                else:
                    drops = {t for t in _drops(worker) if started_at - WFT_TIMEOUT_S <= t} - excused
                    if not drops or len(excused) >= 3:
                        latencies.append(took)
                        break
                    excused |= drops  # the SDK's zero-cache drop, not a stall
            answered = answered or (status is not None and status.step >= 2)  # step 1 (and its read_file) done
            await asyncio.wait({done}, timeout=0 if answered else 0.1)
        if max(latencies, default=0) >= QUERY_LIMIT_S:
            return None, latencies
        return done.result(), latencies
    finally:
        if not done.done():
            done.cancel()


def _drops(worker: WorkerProcess) -> list[float]:
    """When (Unix time) the worker's log says the SDK dropped buffered tasks."""
    found = []
    for line in worker.log_tail(chars=-1).splitlines():
        if DROPPED_TASK in line:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                found.append(datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp())
    return found
