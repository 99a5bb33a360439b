"""Code mode through real runs (real dev server, every workflow task replayed, the fake model over
HTTP, the program in the real bubblewrap sandbox): one `run_python` call runs a program that calls
`grep` and `read_file` and prints what they found together; a call the permission rules deny
fails inside the program with the denial; a repository that turns code mode off gets run_python
refused before anything runs.
"""

from __future__ import annotations

import json

from agent_runs import record_history, start_agent
from harness_runs import activity_types, code_input, git, git_repo, tool_messages, with_fake

from shopfloor.models.agent_run import AgentResult, PermissionRules
from shopfloor.testing import FakeModelServer, ScriptTurn

PROGRAM = """
hits = grep("def ", path="src")
first = hits.splitlines()[0].split(":")[0]
source = read_file(first)
print("FOUND", len(hits.splitlines()), "in", first)
print(source.splitlines()[0])
try:
    read_file("deploy/.git-credentials")
except BindingError as exc:
    print("REFUSED", exc)
"""


def script(program: str) -> list[ScriptTurn]:
    return [
        ScriptTurn.tool("run_python", "One program instead of three calls.", code=program),
        ScriptTurn(content="Done."),
    ]


async def test_a_program_calls_grep_and_read_file_and_a_denied_call_fails_inside_it(
    temporal_client, settings, running_worker, tmp_path
):
    repo, _ = git_repo(tmp_path / "repo")
    (repo / "deploy").mkdir()
    (repo / "deploy/.git-credentials").write_text("https://bot:sk-live-not-for-agents@example.com\n")
    git(repo, "add", "-f", "deploy/.git-credentials")
    git(repo, "commit", "-qm", "a secret")
    sha = git(repo, "rev-parse", "HEAD")
    with FakeModelServer(script(PROGRAM)) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            result: AgentResult = await handle.result()
            ran = await activity_types(handle)
        requests = fake.settled_requests()
    await record_history(handle, "code-mode")

    assert result.state == "completed", result
    (answer,) = tool_messages(requests[1])
    text = answer["content"]
    # grep and read_file, combined by the program: the match count, the file, its first line.
    assert "FOUND 1 in src/greet.py\n     1\tdef greet(name):" in text, text
    assert "[3 tool calls, 1 refused]" in text
    # The denied call failed inside the program, with the judge's reason; the secret never came back.
    assert (
        "REFUSED denied: read_file of 'deploy/.git-credentials' is not allowed" in text
        and "sk-live" not in json.dumps(answer)
    )
    assert ran.count("run_python") == 1 and "read_file" not in ran and "grep" not in ran  # one step, one call


async def test_an_uncaught_denial_ends_the_program_with_its_traceback(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    program = 'print("before")\nread_file("../../etc/shadow")\nprint("never")\n'
    with FakeModelServer(script(program)) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, code_input(repo, sha, "openai:fake"), settings.task_queue)
            await handle.result()
        requests = fake.settled_requests()
    (answer,) = tool_messages(requests[1])
    text = answer["content"]
    assert text.startswith("error: before") and "never" not in text
    assert "BindingError: " in text and "[the program raised]" in text, text


async def test_a_repository_that_turns_code_mode_off_gets_run_python_refused(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    inp = code_input(repo, sha, "openai:fake", permissions=PermissionRules(code_mode=False))
    with FakeModelServer(script('print("ran")')) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            await handle.result()
            ran = await activity_types(handle)
        requests = fake.settled_requests()
    (answer,) = tool_messages(requests[1])
    assert answer["content"].startswith("denied: run_python is turned off for this repository"), answer
    assert "run_python" not in ran
