"""`shopfloor agent` and `shopfloor status` as a user runs them: real CLI processes against the
session's Temporal dev server, with a real `shopfloor worker` process on this module's queue."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_asyncio
from agent_runs import call, sample_repo, write_cassette
from cli_runs import StreamedRun, arun_cli, cli_env, invoke_cli, one_line, polling_worker, wait_until
from temporalio.client import WorkflowExecutionStatus

from shopfloor.devserver import free_port
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow

ID_RE = re.compile(r"^agent/[A-Za-z0-9._-]+/explore-[0-9a-f]{8}$")
LIVE_LATENCY_S = 1.0
LIVE_ANSWER = "The sample package greets people (src/greet.py)."


def demo_cassette() -> dict:
    text = resources.files("shopfloor.activities.providers").joinpath("cassettes/explore-demo.json").read_text()
    return json.loads(text)


@pytest.fixture(scope="module")
def fake_model():
    """An OpenAI-compatible fake whose every answer takes LIVE_LATENCY_S: a run that is slow
    enough to see whether the CLI prints steps as they happen."""
    script = [
        ScriptTurn.tool("list_dir", "looking around", path="."),
        ScriptTurn.tool("read_file", "reading", path="README.md"),
        ScriptTurn.tool("read_file", "reading more", path="src/greet.py"),
        ScriptTurn(content=LIVE_ANSWER),
    ]
    # uvicorn.Config (inside the fake) sets the uvicorn loggers' levels process-wide; put them
    # back afterwards so later tests of logging see the defaults.
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    levels = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        with FakeModelServer(script, latency_s=LIVE_LATENCY_S) as fake:
            yield fake
    finally:
        for lg, level, propagate, handlers in levels:
            lg.setLevel(level)
            lg.propagate = propagate
            lg.handlers[:] = handlers


@pytest.fixture(scope="module")
def cli(tmp_path_factory, temporal_server, fake_model):
    """The environment every process of this module runs with: this module's task queue, a UI
    port that is not 8233 (for the links), and the fake model's URL."""
    folder = tmp_path_factory.mktemp("cli-agent")
    queue, ui_port = f"test-cli-{uuid.uuid4().hex[:10]}", free_port()
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_TEMPORAL_UI_PORT=str(ui_port),
        SHOPFLOOR_DATA_DIR=str(folder / "data"),
        OPENAI_BASE_URL=fake_model.openai_base_url,
        OPENAI_API_KEY="sk-test-not-a-secret",
    )
    return {"dir": folder, "queue": queue, "ui_port": ui_port, "env": env}


@pytest.fixture(scope="module")
def env(cli) -> dict[str, str]:
    return cli["env"]


@pytest_asyncio.fixture(scope="module")
async def worker(temporal_client, cli, env):
    async with polling_worker(temporal_client, env, cli["dir"] / "worker.log", cli["queue"]) as proc:
        yield proc


@pytest.fixture
def repo(tmp_path) -> Path:
    return sample_repo(tmp_path / "sample")


async def test_agent_follows_a_scripted_run_and_prints_answer_and_link(worker, temporal_client, env, cli, repo):
    cassette = demo_cassette()
    answer = cassette["turns"][-1]["content"]
    result = await arun_cli(
        [
            "agent",
            "explore",
            "--repo",
            str(repo),
            "--goal",
            "What does this repo do?",
            "--model",
            "scripted:explore-demo",
        ],
        env,
        timeout_s=120,
    )
    assert result.returncode == 0, str(result)
    assert "warning" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()

    assert lines[0] == f"explore on {repo.resolve()} with scripted:explore-demo (scripted model: replays a cassette)"
    assert lines[1].startswith("workflow ")
    workflow_id = lines[1].removeprefix("workflow ")
    assert ID_RE.match(workflow_id), workflow_id

    # Every step, model decision then tool result, in order and once each.
    steps = [line.strip() for line in lines if re.match(r"^\s+[·✓✗] step", line)]
    assert steps == [
        "· step   1  scripted:explore-demo: list_dir .",
        "✓ step   1  list_dir .",
        "· step   2  scripted:explore-demo: glob '**/*.md'",
        "✓ step   2  glob '**/*.md'",
        "· step   3  scripted:explore-demo: read_file README.md",
        "✓ step   3  read_file README.md",
        "· step   4  scripted:explore-demo: final answer",
    ]
    # The cassette's final answer, whole, after the steps; then the totals and the UI link.
    assert answer in result.stdout
    assert result.stdout.index(answer) > result.stdout.index("✓ step   3  read_file README.md")
    tokens_in = sum(t["usage"]["input_tokens"] for t in cassette["turns"])
    tokens_out = sum(t["usage"]["output_tokens"] for t in cassette["turns"])
    assert f"4 steps · tokens in {tokens_in} / out {tokens_out}" in lines
    assert lines[-1] == f"http://localhost:{cli['ui_port']}/namespaces/default/workflows/{quote(workflow_id, safe='')}"
    assert "%2F" in lines[-1]  # the slashes of the id are quoted, or the UI cannot route it

    # What the CLI printed is what the workflow returned.
    handle = temporal_client.get_workflow_handle(workflow_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert (await handle.describe()).task_queue == cli["queue"]


async def test_agent_prints_each_step_as_it_happens(worker, env, repo):
    """Each model answer takes LIVE_LATENCY_S, so a step printed live arrives seconds before the
    answer; output printed at the end would arrive all at once."""
    run = StreamedRun(
        ["agent", "explore", "--repo", str(repo), "--goal", "What does this repo do?", "--model", "openai:fake-model"],
        env,
    )
    result = await asyncio.to_thread(run.wait, 120)
    assert result.returncode == 0, str(result)
    first_tool = run.arrival("✓ step   1  list_dir .")
    second_tool = run.arrival("✓ step   2  read_file README.md")
    third_tool = run.arrival("✓ step   3  read_file src/greet.py")
    answer = run.arrival(LIVE_ANSWER)
    # Three more model calls (at least 3 x LIVE_LATENCY_S) separate step 1 from the answer;
    # the CLI polls every 0.5 s, so allow that much slack on each gap.
    assert answer - first_tool >= 3 * LIVE_LATENCY_S - 1.0, run.lines
    assert second_tool - first_tool >= LIVE_LATENCY_S - 0.75, run.lines
    assert third_tool - second_tool >= LIVE_LATENCY_S - 0.75, run.lines
    assert "openai:fake-model" in result.stdout and "scripted model" not in result.stdout


async def _status(env, workflow_id: str, *extra: str):
    return await arun_cli(["status", workflow_id, *extra], env, timeout_s=60)


async def test_detach_prints_only_the_id_and_status_shows_the_result(worker, temporal_client, env, cli, repo, tmp_path):
    answer = "ANSWER: this package greets people.\nIt has one function, greet()."
    model = write_cassette(
        tmp_path / "cassette.json",
        [
            {
                "content": "reading the readme",
                "tool_calls": [call("read_file", path="README.md")],
                "usage": {"input_tokens": 100, "output_tokens": 10},
            },
            {"content": answer, "usage": {"input_tokens": 200, "output_tokens": 20}},
        ],
    )
    started = time.monotonic()
    detached = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", "What is this?", "--model", model, "--detach"], env
    )
    assert detached.returncode == 0, str(detached)
    assert detached.stderr == ""
    workflow_id = one_line(detached.stdout)
    assert detached.stdout == workflow_id + "\n"
    assert workflow_id.startswith("agent/") and ID_RE.match(workflow_id), workflow_id
    assert time.monotonic() - started < 30

    async def completed():
        result = await _status(env, workflow_id)
        assert result.returncode == 0, str(result)
        return result if "state     completed" in result.stdout.splitlines() else None

    shown = await wait_until(completed, 90, f"`shopfloor status {workflow_id}` to show state completed", interval_s=0.5)
    lines = shown.stdout.splitlines()
    assert lines[0] == f"workflow  {workflow_id}"
    assert "temporal  COMPLETED" in lines
    assert f"agent     explore · {model}" in lines
    assert any(re.fullmatch(r"stage     agent · step 2/40", line) for line in lines), lines
    assert "tokens    in 300 / out 30" in lines
    assert lines[lines.index("answer") + 1 : lines.index("answer") + 3] == [f"  {a}" for a in answer.splitlines()]
    assert (
        lines[-1]
        == f"ui        http://localhost:{cli['ui_port']}/namespaces/default/workflows/{quote(workflow_id, safe='')}"
    )

    as_json = await _status(env, workflow_id, "--json")
    assert as_json.returncode == 0, str(as_json)
    data = json.loads(as_json.stdout)
    assert data["workflow_id"] == workflow_id
    assert data["temporal_status"] == "COMPLETED"
    assert data["state"] == "completed"
    assert data["step"] == 2
    assert data["stage"] == "agent"
    assert data["final_answer"] == answer
    assert data["url"].endswith(quote(workflow_id, safe=""))

    # The same answer the workflow itself returned.
    result = await temporal_client.get_workflow_handle_for(AgentWorkflow.run, workflow_id).result()
    assert (result.state, result.steps, result.final_answer) == ("completed", 2, answer)

    # The conversation itself, read from the blob store through the digest in history.
    shown = await arun_cli(["transcript", workflow_id], env)
    assert shown.returncode == 0, str(shown)
    text = shown.stdout
    assert text.startswith("── [0] user\nWhat is this?"), text
    assert '→ read_file({"path": "README.md"})' in text
    assert "── [2] tool · read_file\n" in text and "A tiny package that greets people." in text
    assert text.rstrip().endswith(answer.splitlines()[-1])
    as_lines = await arun_cli(["transcript", workflow_id, "--json"], env)
    assert as_lines.returncode == 0, str(as_lines)
    messages = [json.loads(line) for line in as_lines.stdout.splitlines()]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1]["content"] == answer
    missing = await arun_cli(["transcript", "no-such-id"], env)
    assert missing.returncode == 1 and one_line(missing.stderr).startswith("shopfloor: no workflow 'no-such-id'")


async def test_status_of_an_unknown_id_is_one_clear_line(temporal_server, temporal_client, env):
    # In this process: the refusal is the subject, the console script is run by the tests above.
    result = await asyncio.to_thread(invoke_cli, ["status", "no-such-id"], env)
    assert result.returncode != 0, str(result)
    line = one_line(result.stderr)
    assert line.startswith("shopfloor: no workflow 'no-such-id'"), line
    assert result.stdout == ""


CONTROLS = [
    ["pause"],
    ["resume"],
    ["cancel", "--reason", "done"],
    ["steer", "also handle negative numbers"],
    ["approve"],
    ["reject", "--reason", "no"],
    ["raise-limits", "--steps", "5"],
    ["transcript"],
]


@pytest.mark.parametrize("command", CONTROLS, ids=[c[0] for c in CONTROLS])
async def test_an_agent_command_on_an_issue_run_says_it_is_not_an_agent_run(temporal_client, env, command):
    # The control commands take an issue's run too (tests/e2e/test_cli_controls.py acts on one);
    # one that has ended (terminated here, with no worker to replay it) refuses each of them in
    # one line that says so, exit 1, and nothing is sent to it.
    issue_id = f"issue/acme/calc-{uuid.uuid4().hex[:8]}/1"
    handle = await temporal_client.start_workflow(
        "IssueWorkflow", {"repo": "acme/calc", "number": 1}, id=issue_id, task_queue=f"nobody-{uuid.uuid4().hex}"
    )
    await handle.terminate("test over")
    before = [e.event_type async for e in handle.fetch_history_events()]
    result = await asyncio.to_thread(invoke_cli, [command[0], issue_id, *command[1:]], env)
    history = [e.event_type async for e in handle.fetch_history_events()]
    assert result.returncode == 1, str(result)
    line = one_line(result.stderr)
    if command[0] == "transcript":
        expected = f"shopfloor: no worker answered which agent runs the issue's run {issue_id} has: name one"
    else:
        expected = f"shopfloor: {command[0]} does not apply: the issue's run {issue_id} has ended (terminated)"
    assert line.startswith(expected), line
    assert result.stdout == ""
    assert "handler" not in str(result) and "Traceback" not in str(result)
    assert history == before  # nothing was sent
