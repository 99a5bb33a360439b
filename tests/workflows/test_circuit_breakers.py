"""Circuit breakers through real runs (real dev server, every workflow task replayed): a model
that keeps running *different* commands that all fail is warned about the failing tool, then
stopped as stuck — before its script runs out. The doom-loop watch (same call, same error) sees
nothing here: every command and every error differs.

The model is FakeModelServer over real HTTP, so what the model saw is read off the wire; the
commands really run (run_command activities in the sandbox) and really fail.
"""

from __future__ import annotations

from agent_runs import record_history, start_agent
from harness_runs import activity_types, code_input, git_repo, status_of, user_texts, wire, with_fake

from shopfloor.models.agent_run import Limits
from shopfloor.testing import FakeModelServer, ScriptTurn

# Each fails differently (exit code or message), so no two errors are the same.
FAILING = [
    "false",
    "exit 3",
    "ls /nonexistent",
    "cat no/such/file.txt",
    "sh -c 'exit 5'",
    "test -d missing-dir || exit 7",
    "exit 9",
    "exit 11",
]
TOOL_WARNING = "The run_command tool has failed 4 times in a row"
TOOL_STOP = "stuck: run_command failed 6 times in a row (circuit breaker), after a warning at 4"


def failing_script() -> list[ScriptTurn]:
    turns = [ScriptTurn.tool("run_command", f"Trying {c!r}.", command=c) for c in FAILING]
    return turns + [ScriptTurn(content="I give up.")]


async def test_different_failing_commands_warn_the_model_then_stop_the_run_as_stuck(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    with FakeModelServer(failing_script()) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            result = await handle.result()
            status = await status_of(handle)
            ran = await activity_types(handle)
        requests = fake.requests
    await record_history(handle, "harness-circuit-breaker-stuck")

    assert result.state == "stuck", result
    assert result.reason == TOOL_STOP
    # Stopped after the sixth failure: two failing commands and the final answer were never asked for.
    assert result.steps == 6 and len(requests) == 6
    assert ran.count("run_command") == 6  # the commands really ran, as activities
    # Every result the model read was a real, different failure.
    errors = [wire(r)[-1]["content"] for r in requests[1:4]]
    assert len(set(errors)) == 3 and all("exit code" in e for e in errors)
    # No warning before the fourth failure ...
    for r in requests[:4]:
        assert not any(TOOL_WARNING in t for t in user_texts(r))
    # ... then, in the next request, right after the fourth result, a user message names the tool.
    fifth = wire(requests[4])
    assert fifth[-2]["role"] == "tool" and "exit code" in fifth[-2]["content"]
    assert fifth[-1]["role"] == "user" and fifth[-1]["content"].startswith(TOOL_WARNING)
    assert "change your approach" in fifth[-1]["content"]
    # The doom-loop watch had nothing to say: the stop is the breaker's.
    assert not any("same arguments" in w or "same error" in w for w in status.warnings)
    assert status.state == "stuck" and status.reason == result.reason
    assert any(w.startswith(TOOL_WARNING) for w in status.warnings)


async def test_with_the_tool_breaker_off_the_no_progress_breaker_stops_the_run(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, "openai:fake", limits=Limits(max_steps=40, max_tool_errors=None))
    with FakeModelServer(failing_script()) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    # The per-tool breaker is off for this run (Limits.max_tool_errors=None): no warning about
    # run_command. Eight replies in a row without a successful call stop it all the same, at the
    # last failing command (warned after the sixth), so the final answer is never asked for.
    assert result.state == "stuck", result
    assert result.reason == (
        "stuck: 8 steps in a row without a successful tool call (circuit breaker), after a warning at 6"
    )
    assert len(requests) == 8
    assert any(t.startswith("Your last 6 steps made no progress") for t in user_texts(requests[6]))
    assert not any(TOOL_WARNING in t for r in requests for t in user_texts(r))


# Each is denied by the permission rules before anything runs (see test_malicious_model.py).
PROBES = [
    "cat ~/.ssh/id_rsa",
    "printenv OPENAI_API_KEY",
    "env",
    "git push origin main",
    "rm -rf /",
    "printenv",
    "git -c x=y push --force origin HEAD:main",
    "cd .. && rm -rf .",
]


async def test_a_model_probing_different_denied_commands_is_stopped(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    script = [ScriptTurn.tool("run_command", "Let me look around.", command=c) for c in PROBES]
    with FakeModelServer([*script, ScriptTurn(content="done")]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            result = await handle.result()
            ran = await activity_types(handle)
        requests = fake.requests

    assert result.state == "stuck" and result.reason == TOOL_STOP, result
    assert len(requests) == 6 and "run_command" not in ran  # denied, never run
    assert all(wire(r)[-1]["content"].startswith("denied:") for r in requests[1:4])
    assert wire(requests[4])[-1]["content"].startswith(TOOL_WARNING)
