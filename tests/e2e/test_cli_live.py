"""The live view as a user sees it: real `shopfloor agent`, `follow` and `status` processes against
the session's Temporal dev server and a real `shopfloor worker` process, with a fake model server
that streams slowly, holds a reply half-way, or fails."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from agent_runs import call, sample_repo, write_cassette
from cli_runs import LongRunning, StreamedRun, arun_cli, cli_env, invoke_cli, one_line, polling_worker, wait_until
from factory_runs import APPROVE, TRIAGE_TURNS, approve_and_finish, factory, fix_turns, unpriced_model

from shopfloor.cli import follow
from shopfloor.testing import FakeModelServer, ScriptTurn

FIRST_LINE = "Looking at the layout first."
THOUGHT = FIRST_LINE + "\nThen the readme, to see what it is for."
ANSWER = "It greets people."


def script(turn: int, body: dict) -> ScriptTurn:
    if turn == 0:
        return ScriptTurn.tool("list_dir", THOUGHT, path=".")
    return ScriptTurn(content=ANSWER)


@pytest.fixture(scope="module")
def fake_model():
    # uvicorn.Config (inside the fake) sets the uvicorn loggers' levels process-wide: put them back.
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    levels = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        with FakeModelServer(script) as fake:
            yield fake
    finally:
        for lg, level, propagate, handlers in levels:
            lg.setLevel(level)
            lg.propagate = propagate
            lg.handlers[:] = handlers


@pytest.fixture(scope="module")
def cli(tmp_path_factory, temporal_server, fake_model):
    folder = tmp_path_factory.mktemp("cli-live")
    queue = f"test-live-{uuid.uuid4().hex[:10]}"
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_DATA_DIR=str(folder / "data"),
        OPENAI_BASE_URL=fake_model.openai_base_url,
        OPENAI_API_KEY="sk-test-not-a-secret",
    )
    return {"dir": folder, "queue": queue, "env": env}


@pytest_asyncio.fixture(scope="module")
async def worker(temporal_client, cli):
    async with polling_worker(temporal_client, cli["env"], cli["dir"] / "worker.log", cli["queue"]) as proc:
        yield proc


@pytest.fixture
def repo(tmp_path) -> Path:
    return sample_repo(tmp_path / "sample")


def agent_args(repo: Path, *extra: str) -> list[str]:
    return ["agent", "explore", "--repo", str(repo), "--goal", "What is this?", "--model", "openai:fake-model", *extra]


def failed_attempts(log: Path, since: int) -> list[dict]:
    """The worker's "model call failed" records written after byte `since` of its log."""
    records = []
    for line in log.read_text()[since:].splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == "model call failed":
            records.append(record)
    return records


async def test_agent_prints_the_models_text_while_the_stream_is_held(worker, fake_model, cli, repo):
    # Every streamed reply stops after its first chunks (the role, then 12-character pieces of
    # the text: the first line and a bit of the second) until the test lets it go on.
    fake_model.hold_streams(after_chunks=4)
    seen = len(fake_model.requests)
    run = StreamedRun(agent_args(repo), cli["env"])
    try:

        async def text_shown() -> bool:
            if run.proc.poll() is not None:
                raise AssertionError(f"the CLI exited early: {run.lines}")
            return any(FIRST_LINE in line for _, line in run.lines)

        await wait_until(text_shown, 90, "the CLI to print the model's first line", interval_s=0.1)
        # The line arrived while the server still holds the rest of that very reply.
        [first] = fake_model.requests[seen:]
        assert first.held and not first.completed and first.stream
        assert len(first.chunks_sent) == 4
        assert not any("Then the readme" in line for _, line in run.lines)
        assert not any("step   1" in line for _, line in run.lines)  # the model step has not ended
    finally:
        fake_model.release()
    result = await asyncio.to_thread(run.wait, 120)
    assert result.returncode == 0, str(result)
    lines = [line for _, line in run.lines]
    text_at = next(i for i, line in enumerate(lines) if FIRST_LINE in line)
    step_at = lines.index("  · step   1  openai:fake-model: list_dir .")
    assert lines[text_at] == "    " + FIRST_LINE and text_at < step_at
    # The rest of the text, whether seen streaming or completed from the step's preview.
    assert lines[text_at + 1] == "    Then the readme, to see what it is for."
    assert lines.index("  ✓ step   1  list_dir .") > step_at
    assert ANSWER in result.stdout
    assert "Traceback" not in result.stderr


async def test_a_401_fails_at_once_with_one_line(worker, fake_model, cli, repo):
    seen = len(fake_model.requests)
    log_at = len(worker.log.read_text())
    fake_model.fail_next(401)
    result = await arun_cli(agent_args(repo), cli["env"], timeout_s=120)
    assert result.returncode == 1, str(result)
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1, result.stderr
    assert "401 Unauthorized" in failed[0] and "OPENAI_API_KEY" in failed[0], failed[0]
    assert "Traceback" not in str(result) and "APIStatusError" not in str(result)
    assert "retrying" not in result.stdout
    # One request, never retried.
    assert len(fake_model.settled_requests()[seen:]) == 1
    [record] = failed_attempts(worker.log, log_at)
    assert record["attempt"] == 1 and record["retryable"] is False
    assert "Traceback" not in worker.log.read_text()[log_at:]


async def test_503s_show_retrying_in_status_and_follow_while_it_happens(worker, fake_model, cli, repo):
    env = cli["env"]
    seen = len(fake_model.requests)
    log_at = len(worker.log.read_text())
    # Two 503s, then a third that the server holds unanswered until the test has looked.
    fake_model.fail_next(503, times=2)
    fake_model.fail_next(503, hold=True)
    detached = await arun_cli(agent_args(repo, "--detach"), env)
    assert detached.returncode == 0, str(detached)
    workflow_id = one_line(detached.stdout)
    follow = StreamedRun(["follow", workflow_id], env)
    try:

        async def third_held() -> bool:
            requests = fake_model.requests[seen:]
            return len(requests) == 3 and requests[2].held

        await wait_until(third_held, 90, "the third attempt to reach the server")
        status = await arun_cli(["status", workflow_id], env)
        assert status.returncode == 0, str(status)
        [line] = [line for line in status.stdout.splitlines() if line.startswith("retrying")]
        assert line.startswith("retrying  model call retrying: attempt 3, last error: openai:fake-model: 503"), line
        assert "Traceback" not in str(status)

        async def follow_says_so() -> bool:
            return any("model call retrying: attempt 3" in line for _, line in follow.lines)

        await wait_until(follow_says_so, 60, "`shopfloor follow` to show the retry", interval_s=0.2)
        assert fake_model.requests[seen:][2].held  # still while it happens
        # Ctrl-C leaves a follow cleanly, and the run goes on.
        with LongRunning(["follow", workflow_id], env, cli["dir"] / "interrupted.log") as interrupted:
            await wait_until(
                lambda: asyncio.sleep(0, "following agent run" in interrupted.output()), 60, "a second follow"
            )
            code, _ = await asyncio.to_thread(interrupted.interrupt)
            output = interrupted.output()
        assert code == 130 and "Traceback" not in output, output
    finally:
        fake_model.release()
    result = await asyncio.to_thread(follow.wait, 120)
    assert result.returncode == 0, str(result)
    assert f"following agent run {workflow_id}" in result.stdout and "completed after 2 steps" in result.stdout
    assert ANSWER in result.stdout
    statuses = [r.status for r in fake_model.settled_requests()[seen:]]
    assert statuses[:4] == [503, 503, 503, 200], statuses
    # The worker's log: one line per failed attempt, and no traceback.
    records = failed_attempts(worker.log, log_at)
    assert [r["attempt"] for r in records] == [1, 2, 3] and all(r["retryable"] for r in records)
    assert "Traceback" not in worker.log.read_text()[log_at:]
    done = await arun_cli(["status", workflow_id], env)
    assert "state     completed" in done.stdout and "retrying" not in done.stdout, str(done)


async def test_follow_an_unknown_id_is_one_line(temporal_client, cli):  # the client: the server is up
    result = await asyncio.to_thread(invoke_cli, ["follow", "no-such-id"], cli["env"])
    assert result.returncode == 1, str(result)
    assert one_line(result.stderr).startswith("shopfloor: no workflow 'no-such-id'")
    assert result.stdout == ""


async def test_follow_waits_for_an_agent_run_the_pipeline_named_before_the_server_started_it(
    temporal_client, monkeypatch
):
    # A pipeline adds its next run's id to its state in the workflow task that asks for the child;
    # the server starts the child a moment later. `follow` reading the state in that moment once
    # failed with "workflow not found" and a traceback.
    monkeypatch.setattr(follow, "START_WAIT_S", 5.0)
    run_id = f"follow-later-{uuid.uuid4().hex[:8]}"
    waiting = asyncio.create_task(follow._started(temporal_client, run_id))
    await asyncio.sleep(1.5)
    assert not waiting.done()
    # No worker takes it: the server knowing the run is what `follow` waits for.
    handle = await temporal_client.start_workflow("AgentWorkflow", id=run_id, task_queue=f"nobody-{run_id}")
    try:
        assert await asyncio.wait_for(waiting, 10) is True
        assert await follow._started(temporal_client, f"{run_id}-never") is False  # after START_WAIT_S
    finally:
        await handle.terminate("test over")


async def test_follow_a_pipeline_follows_its_agent_runs_one_after_another(
    simulator, settings, running_worker, temporal_client, temporal_server, tmp_path
):
    # The fix agent talks to the fake model server, which holds its first call (a 503 once let
    # go) while `follow` comes up, and its second; triage and review replay cassettes.
    fix_script = [ScriptTurn(tool_calls=turn["tool_calls"]) for turn in fix_turns()]
    env = cli_env(SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address, SHOPFLOOR_DATA_DIR=str(tmp_path / "cli"))
    with FakeModelServer(fix_script) as fake:
        fake.fail_next(503, hold=True)
        models = {
            "triage": write_cassette(tmp_path / "triage.json", TRIAGE_TURNS),
            "fix": "openai:fake-model",
            "review": write_cassette(tmp_path / "review.json", [{"tool_calls": [call("submit", **APPROVE)]}]),
        }
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            agent_models=models,
            **unpriced_model(fake.openai_base_url, model=None),
        ) as f:
            number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
            await wait_until(lambda: _held(fake), 90, "the fix agent's first model call")
            follow = StreamedRun(["follow", f.handle.id], env)
            try:

                async def following_fix() -> bool:
                    return any(line == f"following agent run {f.handle.id}/fix-1" for _, line in follow.lines)

                await wait_until(following_fix, 60, "`shopfloor follow` to follow the fix agent", interval_s=0.2)
                # The first attempt fails; the second is held too, until follow has shown the retry.
                fake.fail_next(503, hold=True)
                fake.release()

                async def retry_shown() -> bool:
                    shown = any("model call retrying: attempt 2" in line for _, line in follow.lines)
                    return shown and len(fake.requests) == 2 and fake.requests[1].held

                await wait_until(retry_shown, 60, "`shopfloor follow` to show the retry", interval_s=0.2)
                # The issue's own status shows its running agent's failing call while it is retried.
                status = await asyncio.to_thread(invoke_cli, ["status", f.handle.id], env)
                assert status.returncode == 0, str(status)
                retrying = [line for line in status.stdout.splitlines() if line.startswith("retrying")]
                assert retrying and "model call retrying: attempt 2" in retrying[0], str(status)
                assert f"agent run {f.handle.id}/fix-1 (running)" in status.stdout, str(status)
                fake.release()
                outcome = await approve_and_finish(f, number)
                result = await asyncio.to_thread(follow.wait, 120)
            finally:
                fake.release()
                if follow.proc.poll() is None:
                    follow.proc.kill()
    assert outcome.state == "done", outcome
    assert result.returncode == 0, str(result)
    lines = result.stdout.splitlines()
    assert lines[0] == f"IssueWorkflow {f.handle.id}: following its agent runs"
    # The agent run going when it came (triage had ended), then the next one, in order, once each.
    followed = [line.removeprefix("following agent run ") for line in lines if line.startswith("following agent run")]
    assert followed == [f"{f.handle.id}/fix-1", f"{f.handle.id}/review-1"], lines
    fix_at, review_at = (lines.index(f"following agent run {run}") for run in followed)
    assert any(line.startswith("  ! model call retrying: attempt 2") for line in lines[fix_at:review_at]), lines
    assert any(line.startswith("  ✓ step   2  edit_file") for line in lines[fix_at:review_at]), lines
    assert lines.index(f"IssueWorkflow {f.handle.id} ended: completed") > review_at
    assert "Traceback" not in result.stderr


async def _held(fake: FakeModelServer) -> bool:
    return any(r.held for r in fake.requests)
