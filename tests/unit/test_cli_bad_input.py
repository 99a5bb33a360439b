"""Bad input to the CLI: one clear line on stderr, exit status 2, nothing started.

"Nothing started" is shown two ways: with SHOPFLOOR_TEMPORAL_ADDRESS at a closed port (a command
that got as far as connecting would end with status 1 and "cannot reach Temporal" instead), and
against the real test server, where a visibility query finds no workflow on the test's queue.

The commands run in this process (`invoke_cli`, typer's CliRunner): parsing and validating
arguments needs no process of its own. The console script itself is run where a process is the
point: the control run on the real server below, and tests/e2e/test_cli_*.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from pathlib import Path

import pytest
from cli_runs import arun_cli, cli_env, invoke_cli, kill_pids, one_line, pids_with_arg

from shopfloor.devserver import free_port

UNREACHABLE = "cannot reach Temporal"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("# sample\n")
    return root


@pytest.fixture
def closed_env(tmp_path: Path) -> dict[str, str]:
    """Temporal at a port nothing listens on."""
    return cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
    )


# (id, extra args or replacements, fragments the one line must hold). "{repo}" and "{tmp}"
# are filled in per test; the default arguments are a valid run of the explore agent.
BAD_AGENT_INPUT = [
    ("unknown-agent", {"name": "no-such-agent"}, ["unknown agent", "no-such-agent", "explore"]),
    ("repo-is-a-file", {"repo": "{repo}/README.md"}, ["--repo", "README.md", "not a directory"]),
    ("repo-missing", {"repo": "{tmp}/nowhere"}, ["--repo", "nowhere", "not a directory"]),
    ("empty-goal", {"goal": "  "}, ["goal is empty", "--goal"]),
    ("unknown-provider", {"model": "foo:bar"}, ["unknown model provider", "'foo'", "openai", "anthropic", "scripted"]),
    ("malformed-model", {"model": "gpt4"}, ["'gpt4'", "provider:model"]),
    ("cassette-missing", {"model": "scripted:{tmp}/missing.json"}, ["cassette", "missing.json", "not found"]),
]


def agent_args(repo_dir: Path, tmp: Path, /, **changes: str) -> list[str]:
    values = {
        "name": "explore",
        "repo": str(repo_dir),
        "goal": "What does this repo do?",
        "model": "scripted:explore-demo",
    } | changes
    values = {k: v.format(repo=repo_dir, tmp=tmp) for k, v in values.items()}
    return ["agent", values["name"], "--repo", values["repo"], "--goal", values["goal"], "--model", values["model"]]


def assert_usage_error(result, fragments: list[str]) -> str:
    assert result.returncode == 2, str(result)
    line = one_line(result.stderr)
    assert line.startswith("shopfloor: "), line
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    assert UNREACHABLE not in line
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == "", str(result)
    return line


@pytest.mark.parametrize("changes, fragments", [c[1:] for c in BAD_AGENT_INPUT], ids=[c[0] for c in BAD_AGENT_INPUT])
def test_bad_agent_input_is_refused_before_connecting(changes, fragments, repo, tmp_path, closed_env):
    result = invoke_cli(agent_args(repo, tmp_path, **changes), closed_env)
    assert_usage_error(result, fragments)


@pytest.mark.parametrize("detach", [False, True], ids=["follow", "detach"])
def test_valid_agent_input_gets_as_far_as_connecting(detach, repo, tmp_path, closed_env):
    """The control for the test above: valid input with the same closed port fails differently."""
    result = invoke_cli(agent_args(repo, tmp_path) + (["--detach"] if detach else []), closed_env)
    assert result.returncode == 1, str(result)
    line = one_line(result.stderr)
    assert UNREACHABLE in line and "SHOPFLOOR_TEMPORAL_ADDRESS" in line, line
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("model", "key"), [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")]
)
def test_a_key_missing_in_this_terminal_is_a_note_about_the_worker_not_a_refusal(
    model, key, repo, tmp_path, closed_env
):
    """`shopfloor agent` only starts the run: the worker, with its own environment, calls the
    model. A key exported where the worker runs must not be refused here, so a key missing here
    is a note that says where it has to be, and the command goes on (here: to the closed port)."""
    result = invoke_cli(agent_args(repo, tmp_path, model=model), closed_env)
    assert result.returncode == 1, str(result)
    said = " ".join(result.stderr.split())
    assert f"note: {key} is not set in this terminal" in said, said
    assert "where `shopfloor dev` or `shopfloor worker` runs" in said and model in said, said
    assert UNREACHABLE in said


async def _queue_workflows(client, queue: str) -> list[str]:
    return [wf.id async for wf in client.list_workflows(f'TaskQueue="{queue}"')]


async def test_bad_input_starts_no_workflow_on_a_real_server(temporal_client, temporal_server, repo, tmp_path):
    queue = f"test-bad-input-{uuid.uuid4().hex[:10]}"
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
    )
    # Each case once, every other one with --detach.
    for i, (_, changes, fragments) in enumerate(BAD_AGENT_INPUT):
        args = agent_args(repo, tmp_path, **changes) + (["--detach"] if i % 2 else [])
        assert_usage_error(await asyncio.to_thread(invoke_cli, args, env), fragments)

    # Visibility is eventually consistent: keep looking for a while before concluding "none".
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert await _queue_workflows(temporal_client, queue) == []
        await asyncio.sleep(0.3)

    # The same query does see a run the CLI starts on this queue (no worker: it just waits); this
    # one is the console script itself, in a process of its own.
    started = await arun_cli(agent_args(repo, tmp_path) + ["--detach"], env)
    assert started.returncode == 0, str(started)
    workflow_id = one_line(started.stdout)
    try:
        deadline = time.monotonic() + 15
        while (found := await _queue_workflows(temporal_client, queue)) != [workflow_id]:
            assert set(found) <= {workflow_id}, f"unexpected workflows on {queue}: {found}"
            assert time.monotonic() < deadline, f"the started run never showed up on {queue}"
            await asyncio.sleep(0.3)
    finally:
        await temporal_client.get_workflow_handle(workflow_id).terminate(reason="test cleanup")


@pytest.mark.parametrize("how", ["address", "port"])
def test_worker_with_unreachable_temporal_says_what_to_do(how, tmp_path):
    port = free_port()
    setting = {
        "address": {"SHOPFLOOR_TEMPORAL_ADDRESS": f"127.0.0.1:{port}"},
        "port": {"SHOPFLOOR_TEMPORAL_PORT": str(port)},
    }[how]
    started = time.monotonic()
    result = invoke_cli(["worker"], cli_env(SHOPFLOOR_DATA_DIR=str(tmp_path / "data"), **setting), timeout_s=60)
    assert result.returncode == 1, str(result)
    line = one_line(result.stderr)
    assert line.startswith(f"shopfloor: {UNREACHABLE} at ") and str(port) in line, line
    # What to do: point at a running server, or start one.
    if how == "address":
        assert "set SHOPFLOOR_TEMPORAL_ADDRESS to a running server" in line, line
    else:
        assert "shopfloor dev" in line and "SHOPFLOOR_TEMPORAL_ADDRESS" in line, line
    assert "Traceback" not in result.stderr + result.stdout
    assert time.monotonic() - started < 30  # gives up promptly instead of hanging


def _listening_socket(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


@pytest.mark.parametrize(
    "taken, setting",
    [
        ("webhook", "SHOPFLOOR_WEBHOOK_PORT"),
        ("temporal", "SHOPFLOOR_TEMPORAL_PORT"),
        ("ui", "SHOPFLOOR_TEMPORAL_UI_PORT"),
        ("simulator", "SHOPFLOOR_SIMULATOR_PORT"),
    ],
)
def test_dev_with_a_port_in_use_names_the_port_and_the_setting(taken, setting, tmp_path):
    ports = {"webhook": free_port(), "temporal": free_port(), "ui": free_port(), "simulator": free_port()}
    data = tmp_path / "data"
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(data),
        SHOPFLOOR_WEBHOOK_PORT=str(ports["webhook"]),
        SHOPFLOOR_TEMPORAL_PORT=str(ports["temporal"]),
        SHOPFLOOR_TEMPORAL_UI_PORT=str(ports["ui"]),
        SHOPFLOOR_SIMULATOR_PORT=str(ports["simulator"]),
        SHOPFLOOR_MODEL="scripted:explore-demo",
    )
    holder = _listening_socket(ports[taken])
    try:
        result = invoke_cli(["dev"], env, timeout_s=60)
    finally:
        holder.close()
        stray = pids_with_arg(str(data))  # a `temporal` child it should never have started
        kill_pids(stray)
    assert stray == [], "shopfloor dev left a Temporal server running"
    assert result.returncode == 2, str(result)
    line = one_line(result.stderr)
    assert f"port {ports[taken]}" in line and "already in use" in line and setting in line, line
    assert not (data / "temporal.sqlite").exists(), "a Temporal server was started"


@pytest.mark.parametrize("value", ["-1", "abc"])
@pytest.mark.parametrize("command", ["dev", "worker", "status some-id"])
def test_a_bad_setting_is_one_line_and_status_2(command, value, tmp_path):
    data = tmp_path / "data"
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(data),
        SHOPFLOOR_MAX_CACHED_WORKFLOWS=value,
        SHOPFLOOR_TEMPORAL_PORT=str(free_port()),
        SHOPFLOOR_TEMPORAL_UI_PORT=str(free_port()),
        SHOPFLOOR_WEBHOOK_PORT=str(free_port()),
        SHOPFLOOR_SIMULATOR_PORT=str(free_port()),
    )
    result = invoke_cli(command.split(), env, timeout_s=60)
    line = assert_usage_error(result, ["bad setting", "SHOPFLOOR_MAX_CACHED_WORKFLOWS"])
    assert ("greater than or equal to 0" if value == "-1" else "integer") in line, line
    assert not data.exists(), "something started before the settings were checked"


@pytest.mark.fast
def test_a_bad_port_setting_is_one_line_and_status_2(tmp_path):
    env = cli_env(SHOPFLOOR_DATA_DIR=str(tmp_path / "data"), SHOPFLOOR_WEBHOOK_PORT="eighty")
    result = invoke_cli(["dev"], env, timeout_s=60)
    assert_usage_error(result, ["bad setting", "SHOPFLOOR_WEBHOOK_PORT"])


@pytest.mark.parametrize("command", ["dev", "webhooks", "simulator"])
def test_a_port_option_out_of_range_is_a_usage_error(command, tmp_path):
    result = invoke_cli([command, "--port", "70000"], cli_env(SHOPFLOOR_DATA_DIR=str(tmp_path / "data")))
    assert result.returncode == 2, str(result)
    said = " ".join(result.stderr.replace("│", " ").split())
    assert "Invalid value for '--port'" in said and "less than or equal to 65535" in said, said


def test_a_port_given_on_the_command_line_that_is_taken_names_the_option(tmp_path):
    port = free_port()
    holder = _listening_socket(port)
    try:
        result = invoke_cli(["webhooks", "--port", str(port)], cli_env(SHOPFLOOR_DATA_DIR=str(tmp_path / "data")))
    finally:
        holder.close()
    assert result.returncode == 2, str(result)
    line = one_line(result.stderr)
    assert f"port {port}" in line and "already in use" in line and "--port or SHOPFLOOR_WEBHOOK_PORT" in line, line
