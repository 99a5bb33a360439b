"""A run goes on: `shopfloor agent continue`, `shopfloor agent fork --step N` and a mid-run model
switch, as a user runs them: real CLI processes against the session's Temporal dev server, a real
`shopfloor worker` process, and the fake model server over HTTP, whose recorded requests show
which conversation and which model each step sent."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from agent_runs import record_history, sample_repo
from cli_runs import arun_cli, cli_env, one_line, polling_worker, wait_until
from temporalio.client import WorkflowUpdateFailedError

from shopfloor.agents.registry import AGENTS
from shopfloor.cli.agent import SUBCOMMANDS
from shopfloor.models.agent_run import AgentInput, AgentStatus, ModelSwitch, WorkspaceRef
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow

CONTINUE_GOAL = "continue-test: what is in this repository?"
FORK_GOAL = "fork-test: fix add() and take notes"
SWITCH_GOAL = "switch-test: what does greet() do?"
STEER_GOAL = "steer-test: what does greet() do?"
LIMIT_GOAL = "limit-test: list the files"
FAILED_GOAL = "failed-test: list the files"
CHAIN_GOAL = "chain-test: write eight files"
CHAIN_WRITES = 8
NEXT_MESSAGE = "Now read the README and say what it promises."


def _goal(body: dict[str, Any]) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[0]) if users else ""


class Script:
    """The fake model's answers, by the conversation's goal, its turn and the model asked; the
    switch test's first step waits on `gate` so the switch lands while that step is under way."""

    def __init__(self) -> None:
        self.gates = {SWITCH_GOAL: threading.Event(), STEER_GOAL: threading.Event()}
        self.fake: FakeModelServer | None = None

    def __call__(self, turn: int, body: dict[str, Any]) -> ScriptTurn:
        goal, model = _goal(body), body.get("model")
        if goal == CONTINUE_GOAL:
            return [
                ScriptTurn.tool("list_dir", "looking", path="."),
                ScriptTurn(content="First answer: a README and src/."),
                ScriptTurn.tool("read_file", "reading", path="README.md"),
                ScriptTurn(content="Second answer: it greets people."),
            ][min(turn, 3)]
        if goal == FORK_GOAL:
            if model == "fake-b" and turn == 2:  # the forked run takes step 3 its own way
                return ScriptTurn.tool("write_file", "forked", path="forked.txt", content="forked\n")
            return [
                ScriptTurn.tool("edit_file", "fixing", path="calc.py", old="a - b", new="a + b"),
                ScriptTurn.tool("write_file", "notes", path="notes.txt", content="one\n"),
                ScriptTurn.tool("write_file", "more notes", path="notes.txt", content="three\n"),
                ScriptTurn(content=f"done by {model}"),
            ][min(turn, 3)]
        if goal == CHAIN_GOAL:
            if model == "fake-b":
                return ScriptTurn(content="forked answer")
            if turn < CHAIN_WRITES:
                return ScriptTurn.tool("write_file", f"file {turn}", path=f"f{turn}.txt", content=f"file {turn}\n")
            return ScriptTurn(content="wrote them all")
        if goal in (LIMIT_GOAL, FAILED_GOAL):
            if turn == 0:
                if goal == FAILED_GOAL and self.fake is not None:
                    self.fake.fail_next(401)  # the run's next request: its second step
                return ScriptTurn.tool("list_dir", "looking", path=".")
            return ScriptTurn(content="There are README.md and src/.")
        if goal in self.gates:
            usage = Usage(input_tokens=10 * (turn + 1), output_tokens=1)
            if turn == 0:
                # Blocks the fake server's loop (it serves nothing else meanwhile): the test
                # switches the model while this first step is under way, then opens the gate.
                self.gates[goal].wait(120)
                return ScriptTurn(tool_calls=[("list_dir", {"path": "."})], usage=usage)
            if turn == 1:
                return ScriptTurn(tool_calls=[("read_file", {"path": "src/greet.py"})], usage=usage)
            return ScriptTurn(content=f"greet() says hello (answered by {model})", usage=usage)
        return ScriptTurn(content="unexpected conversation")


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake_model(script):
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    levels = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        with FakeModelServer(script) as fake:
            script.fake = fake
            yield fake
    finally:
        for gate in script.gates.values():
            gate.set()
        for lg, level, propagate, handlers in levels:
            lg.setLevel(level)
            lg.propagate = propagate
            lg.handlers[:] = handlers


@pytest.fixture(scope="module")
def cli(tmp_path_factory, temporal_server, fake_model):
    folder = tmp_path_factory.mktemp("cli-agent-sessions")
    queue = f"test-sessions-{uuid.uuid4().hex[:10]}"
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_DATA_DIR=str(folder / "data"),
        OPENAI_BASE_URL=fake_model.openai_base_url,
        OPENAI_API_KEY="sk-test-not-a-secret",
        # USD per million tokens, so a step's cost shows which model's price it was counted at.
        SHOPFLOOR_PRICES=json.dumps({"fake-a": [1_000_000, 0], "fake-b": [100_000_000, 0]}),
    )
    return {"dir": folder, "queue": queue, "env": env}


@pytest_asyncio.fixture(scope="module")
async def worker(temporal_client, cli):
    async with polling_worker(temporal_client, cli["env"], cli["dir"] / "worker.log", cli["queue"]) as proc:
        yield proc


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def git_repo(repo: Path) -> Path:
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "init")
    return repo


def _requests(fake: FakeModelServer, goal: str) -> list[LoggedRequest]:
    return [r for r in fake.settled_requests() if _goal(r.body) == goal and r.status == 200]


def _messages(request: LoggedRequest) -> list[dict[str, Any]]:
    return [m for m in request.body["messages"] if m.get("role") != "system"]


def _system(request: LoggedRequest) -> str:
    return "".join(str(m.get("content")) for m in request.body["messages"] if m.get("role") == "system")


def _workflow_id(stdout: str) -> str:
    return next(line.removeprefix("workflow ") for line in stdout.splitlines() if line.startswith("workflow "))


async def _status(temporal_client, workflow_id: str) -> AgentStatus:
    return await temporal_client.get_workflow_handle_for(AgentWorkflow.run, workflow_id).query(AgentWorkflow.status)


async def test_continue_and_fork_refuse_what_is_not_an_agent_run(temporal_client, cli):
    """An issue's run (started here on a queue no worker polls, so nothing runs) and an unknown id
    each get one line and exit 1."""
    env = cli["env"]
    issue_id = f"issue/acme/shop/{uuid.uuid4().int % 100000}"
    await temporal_client.start_workflow("IssueWorkflow", id=issue_id, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    try:
        for args in (["continue", issue_id, "more"], ["fork", issue_id, "--step", "1"]):
            refused = await arun_cli(["agent", *args], env)
            assert refused.returncode == 1, str(refused)
            line = one_line(refused.stderr)
            assert f"acts on an agent run, and {issue_id!r} is not one" in line, line
            assert "Traceback" not in refused.stderr and refused.stdout == ""
        unknown = await arun_cli(["agent", "fork", "agent/nowhere/explore-00000000", "--step", "1"], env)
        assert unknown.returncode == 1, str(unknown)
        assert "no workflow 'agent/nowhere/explore-00000000'" in one_line(unknown.stderr)
    finally:
        await temporal_client.get_workflow_handle(issue_id).terminate(reason="test cleanup")


def test_no_agent_is_named_like_an_agent_subcommand():
    assert not set(SUBCOMMANDS) & set(AGENTS)


async def test_continue_gives_a_finished_run_another_turn(worker, temporal_client, fake_model, cli, tmp_path):
    env, repo = cli["env"], sample_repo(tmp_path / "sample")
    first = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", CONTINUE_GOAL, "--model", "openai:fake-a"],
        env,
        timeout_s=120,
    )
    assert first.returncode == 0, str(first)
    assert "First answer: a README and src/." in first.stdout
    old_id = _workflow_id(first.stdout)
    before = _requests(fake_model, CONTINUE_GOAL)
    assert [r.turn for r in before] == [0, 1]

    result = await arun_cli(["agent", "continue", old_id, NEXT_MESSAGE], env, timeout_s=120)
    assert result.returncode == 0, str(result)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"explore with openai:fake-a, continued from {old_id}"
    new_id = _workflow_id(result.stdout)
    assert new_id != old_id and new_id.startswith("agent/sample/explore-"), new_id
    assert "Second answer: it greets people." in result.stdout
    # Step numbers go on from the run it continues: it took two, the new run takes 3 and 4.
    steps = [line.strip() for line in lines if line.strip().startswith(("·", "✓"))]
    assert "✓ step   3  read_file README.md" in steps, steps
    assert "· step   4  openai:fake-a: final answer" in steps, steps

    after = _requests(fake_model, CONTINUE_GOAL)[len(before) :]
    assert [r.turn for r in after] == [2, 3]
    # The first request of the new run: the whole old conversation, its final answer, then the
    # message; the goal is not repeated; the same model.
    sent = _messages(after[0])
    assert sent[: len(_messages(before[1]))] == _messages(before[1])
    assert sent[-2] == {"role": "assistant", "content": "First answer: a README and src/."}
    assert sent[-1] == {"role": "user", "content": NEXT_MESSAGE}
    assert [m["content"] for m in sent if m["role"] == "user"] == [CONTINUE_GOAL, NEXT_MESSAGE]
    assert [r.body["model"] for r in after] == ["fake-a", "fake-a"]

    status = await _status(temporal_client, new_id)
    assert status.started_from == f"continued from {old_id}"
    await record_history(temporal_client.get_workflow_handle(new_id), "agent-continued")
    shown = await arun_cli(["status", new_id, "--json"], env)
    assert shown.returncode == 0, str(shown)
    assert json.loads(shown.stdout)["started_from"] == f"continued from {old_id}"
    human = await arun_cli(["status", new_id], env)
    assert f"from      continued from {old_id}" in human.stdout.splitlines(), str(human)
    assert (status.state, status.step) == ("completed", 4)

    # An unknown id gets one line.
    refused = await arun_cli(["agent", "continue", f"{old_id}-nope", "more"], env)
    assert refused.returncode == 1, str(refused)
    assert "no workflow" in one_line(refused.stderr) and "Traceback" not in refused.stderr


async def test_continue_answers_the_calls_a_run_ended_with(worker, fake_model, cli, tmp_path):
    """A run stopped by its step limit after its model asked for a call: the continued run sends
    that call's result (the tool did run) before the message, as the provider requires."""
    env, repo = cli["env"], sample_repo(tmp_path / "sample")
    first = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", LIMIT_GOAL, "--model", "openai:fake-a", "--max-steps", "1"],
        env,
        timeout_s=120,
    )
    assert first.returncode == 0, str(first)
    assert "ended: limit_reached" in first.stdout
    result = await arun_cli(["agent", "continue", _workflow_id(first.stdout), "Go on."], env, timeout_s=120)
    assert result.returncode == 0, str(result)
    assert "There are README.md and src/." in result.stdout
    [asked, answered] = _requests(fake_model, LIMIT_GOAL)
    assert [m["role"] for m in _messages(answered)] == ["user", "assistant", "tool", "user"]
    call_id = answered.body["messages"][-3]["tool_calls"][0]["id"]
    assert answered.body["messages"][-2]["tool_call_id"] == call_id
    assert "README.md" in answered.body["messages"][-2]["content"]  # list_dir's output
    assert answered.body["messages"][-1] == {"role": "user", "content": "Go on."}
    assert asked.turn == 0


async def test_continue_asks_again_the_step_a_run_failed_on(worker, fake_model, cli, tmp_path):
    """A run whose second model call was refused (401): the continued run asks that step again,
    with the first step's tool result and then the message."""
    env, repo = cli["env"], sample_repo(tmp_path / "sample")
    first = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", FAILED_GOAL, "--model", "openai:fake-a"],
        env,
        timeout_s=120,
    )
    assert first.returncode == 1, str(first)
    old_id = _workflow_id(first.stdout)
    refused = [r for r in fake_model.settled_requests() if _goal(r.body) == FAILED_GOAL and r.status == 401]
    assert [r.turn for r in refused] == [1]

    result = await arun_cli(["agent", "continue", old_id, "Try again."], env, timeout_s=120)
    assert result.returncode == 0, str(result)
    assert f"continued from {old_id}" in result.stdout.splitlines()[0]
    assert "· step   2  openai:fake-a: final answer" in [line.strip() for line in result.stdout.splitlines()]
    answered = _requests(fake_model, FAILED_GOAL)[-1]
    assert _messages(answered)[:-1] == _messages(refused[0])
    assert _messages(answered)[-1] == {"role": "user", "content": "Try again."}


async def test_fork_takes_step_3_again_from_its_conversation_and_workspace(
    worker, temporal_client, fake_model, cli, tmp_path
):
    env, repo = cli["env"], git_repo(tmp_path / "proj")
    first = await arun_cli(
        ["agent", "code", "--repo", str(repo), "--goal", FORK_GOAL, "--model", "openai:fake-a"], env, timeout_s=120
    )
    assert first.returncode == 0, str(first)
    assert "done by fake-a" in first.stdout
    old_id = _workflow_id(first.stdout)
    original = _requests(fake_model, FORK_GOAL)
    assert [r.turn for r in original] == [0, 1, 2, 3]

    out_of_range = await arun_cli(["agent", "fork", old_id, "--step", "9"], env)
    assert out_of_range.returncode == 1, str(out_of_range)
    assert one_line(out_of_range.stderr) == f"shopfloor: {old_id} has no step 9 to fork from (it asked steps 1 to 4)"

    result = await arun_cli(["agent", "fork", old_id, "--step", "3", "--model", "openai:fake-b"], env, timeout_s=120)
    assert result.returncode == 0, str(result)
    lines = result.stdout.splitlines()
    assert lines[0] == f"code with openai:fake-b, forked from {old_id} at step 3"
    assert "done by fake-b" in result.stdout

    forked = _requests(fake_model, FORK_GOAL)[len(original) :]
    assert [(r.turn, r.body["model"]) for r in forked] == [(2, "fake-b"), (3, "fake-b")]
    # Step 3 is asked again with exactly the conversation the original step 3 was asked with; the
    # system prompt's environment names the model now asked (the fork's).
    assert _messages(forked[0]) == _messages(original[2])
    assert "Model: openai:fake-b" in _system(forked[0]) and "Model: openai:fake-a" in _system(original[2])

    # The workspace is step 3's checkpoint: steps 1 and 2's edits, not the original step 3's.
    patch_line = next(line for line in lines if line.startswith("changes: git -C"))
    patch = Path(patch_line.split()[-1]).read_text()
    assert "+    return a + b" in patch
    assert "+one" in patch and "three" not in patch
    assert "+forked" in patch
    await record_history(temporal_client.get_workflow_handle(_workflow_id(result.stdout)), "agent-forked")

    # A step before the forked run's own is found in the run it was forked from.
    again = await arun_cli(["agent", "fork", _workflow_id(result.stdout), "--step", "2", "--detach"], env)
    assert again.returncode == 0, str(again)
    refork_id = one_line(again.stdout)
    assert (await temporal_client.get_workflow_handle_for(AgentWorkflow.run, refork_id).result()).state == "completed"
    assert (await _status(temporal_client, refork_id)).started_from == f"forked from {old_id} at step 2"
    reforked = _requests(fake_model, FORK_GOAL)[len(original) + len(forked) :]
    assert [(r.turn, r.body["model"]) for r in reforked] == [(1, "fake-a"), (2, "fake-a"), (3, "fake-a")]
    # (Each run works in a checkout of its own: the environment's working directory differs.)
    assert _messages(reforked[0]) == _messages(original[1]) and "Model: openai:fake-a" in _system(reforked[0])


async def test_fork_finds_a_step_in_any_run_of_a_continued_as_new_chain(
    worker, temporal_client, fake_model, cli, tmp_path
):
    """A run long enough to continue as new twice: a step of its first run and one of a later run
    are each forked from their own conversation and workspace checkpoint."""
    env, repo = cli["env"], git_repo(tmp_path / "chain")
    sha = git(repo, "rev-parse", "HEAD").strip()
    inp = AgentInput(
        agent="code",
        model="openai:fake-a",
        goal=CHAIN_GOAL,
        workspace=WorkspaceRef(repo="local/chain", clone_url=str(repo), base_sha=sha),
        max_history_events=40,
    )
    old_id = f"agent/chain/code-{uuid.uuid4().hex[:8]}"
    handle = await temporal_client.start_workflow(AgentWorkflow.run, inp, id=old_id, task_queue=cli["queue"])
    assert (await handle.result()).steps == CHAIN_WRITES + 1
    # The chain, newest run first: which steps each run asked.
    chain, run_id = [], None
    while True:
        history = await temporal_client.get_workflow_handle(old_id, run_id=run_id).fetch_history()
        asked = [e.activity_task_scheduled_event_attributes.activity_type.name == "model_step" for e in history.events]
        chain.append(sum(asked))
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id
        if not run_id:
            break
    assert len(chain) >= 3, chain
    steps_of_first_run = chain[-1]
    assert 2 <= steps_of_first_run < CHAIN_WRITES - 1, chain
    original = _requests(fake_model, CHAIN_GOAL)
    assert [r.turn for r in original] == list(range(CHAIN_WRITES + 1))

    for step in (2, CHAIN_WRITES - 1):
        result = await arun_cli(
            ["agent", "fork", old_id, "--step", str(step), "--model", "openai:fake-b"], env, timeout_s=120
        )
        assert result.returncode == 0, str(result)
        assert "forked answer" in result.stdout
        forked = _requests(fake_model, CHAIN_GOAL)[-1]
        assert (forked.turn, forked.body["model"]) == (step - 1, "fake-b")
        assert _messages(forked) == _messages(original[step - 1]) and "Model: openai:fake-b" in _system(forked)
        patch_line = next(line for line in result.stdout.splitlines() if line.startswith("changes: git -C"))
        patch = Path(patch_line.split()[-1]).read_text()
        written = sorted(int(name) for name in re.findall(r"^\+\+\+ b/f(\d+)\.txt$", patch, re.MULTILINE))
        assert written == list(range(step - 1)), (step, written)


async def test_switching_the_model_mid_run_takes_effect_from_the_next_step(
    worker, temporal_client, fake_model, script, cli, tmp_path
):
    env, repo = cli["env"], sample_repo(tmp_path / "sample")
    started = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", SWITCH_GOAL, "--model", "openai:fake-a", "--detach"], env
    )
    assert started.returncode == 0, str(started)
    workflow_id = one_line(started.stdout)
    handle = temporal_client.get_workflow_handle_for(AgentWorkflow.run, workflow_id)

    async def first_step_asked() -> bool:
        return any(_goal(r.body) == SWITCH_GOAL for r in fake_model.requests)

    await wait_until(first_step_asked, 60, "the first model step to reach the fake server")
    # Continuing a run that is still running is refused: it is steered instead.
    running = await arun_cli(["agent", "continue", workflow_id, "more"], env)
    assert running.returncode == 1, str(running)
    assert one_line(running.stderr).startswith(f"shopfloor: {workflow_id} is still running: steer it instead")
    # A malformed model is refused by the update's validator; the run goes on with its own.
    for malformed, why in [
        ("gpt4", "provider:model"),
        ("nosuch:model", "unknown model provider 'nosuch'"),
        ("openai:two words", "has no spaces"),
    ]:
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(AgentWorkflow.switch_model, ModelSwitch(model=malformed, by="ops"))
        assert why in str(refused.value.cause), refused.value.cause
    # One a parent forwards cannot be refused (a signal): it becomes a warning, nothing switches.
    await handle.signal(AgentWorkflow.switch_model_from_parent, ModelSwitch(model="nosuch:model", by="parent"))

    async def warned() -> bool:
        return any(
            w.startswith("model not switched: unknown model provider")
            for w in (await _status(temporal_client, workflow_id)).warnings
        )

    await wait_until(warned, 30, "the forwarded malformed switch to show as a warning")
    assert (await _status(temporal_client, workflow_id)).model == "openai:fake-a"
    now = await handle.execute_update(AgentWorkflow.switch_model, ModelSwitch(model="openai:fake-b", by="ops-alice"))
    assert now == "openai:fake-b"
    script.gates[SWITCH_GOAL].set()
    result = await handle.result()
    assert result.state == "completed"
    assert result.final_answer == "greet() says hello (answered by fake-b)"
    # Priced at the model that answered: step 1 (10 tokens) at fake-a's $1 a token, steps 2 and 3
    # (20 and 30) at fake-b's $100.
    assert result.cost_usd == 10 * 1 + (20 + 30) * 100

    # The step under way when the switch came finished with its model; every later one asked the new one.
    asked = [(r.turn, r.body["model"]) for r in _requests(fake_model, SWITCH_GOAL)]
    assert asked == [(0, "fake-a"), (1, "fake-b"), (2, "fake-b")]
    status = await _status(temporal_client, workflow_id)
    assert status.model == "openai:fake-b"
    await record_history(handle, "agent-model-switched")
    assert [e.summary for e in status.events] == [
        "model switched to openai:fake-b by ops-alice",
        "openai:fake-a: list_dir .",
        "list_dir .",
        "openai:fake-b: read_file src/greet.py",
        "read_file src/greet.py",
        "openai:fake-b: final answer",
    ]


async def test_steer_model_switches_from_the_command_line(worker, temporal_client, fake_model, script, cli, tmp_path):
    env, repo = cli["env"], sample_repo(tmp_path / "sample")
    started = await arun_cli(
        ["agent", "explore", "--repo", str(repo), "--goal", STEER_GOAL, "--model", "openai:fake-a", "--detach"], env
    )
    assert started.returncode == 0, str(started)
    workflow_id = one_line(started.stdout)

    async def first_step_asked() -> bool:
        return any(_goal(r.body) == STEER_GOAL for r in fake_model.requests)

    await wait_until(first_step_asked, 60, "the first model step to reach the fake server")
    malformed = await arun_cli(["steer", workflow_id, "--model", "gpt4"], env)
    assert malformed.returncode != 0 and "provider:model" in one_line(malformed.stderr), str(malformed)
    switched = await arun_cli(["steer", workflow_id, "--model", "openai:fake-b"], env)
    assert switched.returncode == 0, str(switched)
    assert "model switched to openai:fake-b" in switched.stdout
    script.gates[STEER_GOAL].set()
    result = await temporal_client.get_workflow_handle_for(AgentWorkflow.run, workflow_id).result()
    assert result.final_answer == "greet() says hello (answered by fake-b)"
    asked = [(r.turn, r.body["model"]) for r in _requests(fake_model, STEER_GOAL)]
    assert asked == [(0, "fake-a"), (1, "fake-b"), (2, "fake-b")]
    assert (
        (await _status(temporal_client, workflow_id))
        .events[0]
        .summary.startswith("model switched to openai:fake-b by ")
    )
