"""The model knows where it is: the environment section of the system prompt, through real runs
(real dev server, every workflow task replayed, the model a FakeModelServer over real HTTP).

The facts come from the sandbox_facts activity (run once, before the first step, in the sandbox
the agent's commands use), the date from workflow time; the section is read off the wire.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime

from agent_runs import record_history, start_agent
from harness_runs import activity_types, code_input, explore_input, git_repo, status_of, wire, with_fake

from shopfloor.models.agent_run import Limits
from shopfloor.testing import FakeModelServer, ScriptTurn


def system_message(request) -> str:
    (system,) = [m["content"] for m in wire(request) if m["role"] == "system"]
    return system


def dates_between(start: datetime, end: datetime) -> set[str]:
    return {start.astimezone(UTC).strftime("%Y-%m-%d"), end.astimezone(UTC).strftime("%Y-%m-%d")}


async def test_the_system_prompt_states_date_repository_workdir_os_toolchains_and_model(
    temporal_client, settings, running_worker, tmp_path
):
    repo, _ = git_repo(tmp_path / "sample")
    script = [
        ScriptTurn.tool("read_file", "Looking.", path="README.md"),
        ScriptTurn(content="It greets people."),
    ]
    with FakeModelServer(lambda turn, body: script[min(turn, len(script) - 1)]) as fake:
        async with running_worker(with_fake(settings, fake)):
            before = datetime.now(UTC)
            handle = await start_agent(
                temporal_client,
                explore_input(repo, "openai:env-model", limits=Limits(max_steps=5)),
                settings.task_queue,
            )
            result = await handle.result()
            after = datetime.now(UTC)
            status = await status_of(handle)
        requests = fake.requests
    await record_history(handle, "agent-environment")

    assert result.state == "completed", result
    assert len(requests) == 2
    system = system_message(requests[0])
    env = system[system.index("<env>") : system.index("</env>") + len("</env>")]
    # The date is workflow time's, in UTC: the day the run ran.
    assert any(f"Today's date: {d} " in env for d in dates_between(before, after)), env
    assert "Repository: local/sample\n" in env
    assert f"Working directory: {os.path.realpath(repo)} (" in env  # a path workspace: commands start there
    # Detected in the sandbox: the python on its PATH is this worker's interpreter.
    assert f"python3 {platform.python_version()}" in env
    assert "git " in env.split("Toolchains on PATH:", 1)[1]
    assert f"OS: {platform.freedesktop_os_release().get('PRETTY_NAME', '')}" in env
    assert f"{platform.system()} {platform.release()}" in env
    assert "Model: openai:env-model\n" in env
    # After the agent's own prompt, once per request; the same facts again at the next step.
    assert system.index("<env>") > 0 and system.count("<env>") == 1
    assert env in system_message(requests[1])
    # Detected once, before the first model step.
    assert (await activity_types(handle))[:2] == ["sandbox_facts", "model_step"]
    assert (await activity_types(handle)).count("sandbox_facts") == 1
    assert status.state == "completed"


async def test_on_a_checkout_the_working_directory_is_where_the_runs_commands_run(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    script = [
        ScriptTurn.tool("run_command", "Where am I?", command="pwd"),
        ScriptTurn(content="Done."),
    ]
    with FakeModelServer(lambda turn, body: script[min(turn, len(script) - 1)]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(
                temporal_client, code_input(repo, sha, "openai:first-model"), settings.task_queue
            )
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed", result
    env = system_message(requests[0])
    workdir = env.split("Working directory: ", 1)[1].split(" (", 1)[0]
    # The run's own checkout on this worker, where its commands ran (`pwd` said so).
    assert workdir.startswith(str(os.path.realpath(settings.data_dir / "workspaces")))
    tool_output = [m["content"] for m in wire(requests[1]) if m["role"] == "tool"][0]
    assert workdir in tool_output
    assert "Repository: local/repo\n" in env and "Model: openai:first-model\n" in env
    assert f"python3 {platform.python_version()}" in env
