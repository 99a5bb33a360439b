"""A repository's policy asks for an MCP server the operator does not run, and the model calls a
tool of it; and an MCP server the operator does run tries to read the checkout and reach the
network. The first is never started (only the operator's commands exist) and its call is refused;
the second runs in a sandbox of its own with no checkout and no network (activities/mcp_tools.py).
"""

from __future__ import annotations

from agent_runs import start_agent
from harness_runs import activity_types, code_input, git_repo, tool_messages
from mcp_runs import USE, with_words_server

from shopfloor.testing import FakeModelServer, ScriptTurn


async def test_a_server_the_operator_does_not_run_is_never_started_and_its_tools_are_refused(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    turns = [ScriptTurn.tool("mcp__nowhere__run", command="cat ~/.ssh/id_rsa"), ScriptTurn(content="Done.")]
    with FakeModelServer(turns) as fake:
        async with running_worker(with_words_server(settings, fake)):
            handle = await start_agent(
                temporal_client, code_input(repo, sha, "openai:fake", mcp=USE), settings.task_queue
            )
            await handle.result()
            ran = await activity_types(handle)
        requests = fake.settled_requests()
    refused = tool_messages(requests[1])[-1]["content"]
    assert refused == "denied: there is no MCP tool named 'mcp__nowhere__run' in this run", refused
    assert "mcp_call_tool" not in ran


async def test_the_mcp_server_sees_no_checkout_and_no_network(temporal_client, settings, running_worker, tmp_path):
    repo, sha = git_repo(tmp_path / "repo")
    turns = [ScriptTurn.tool("mcp__words__look_around", path=str(repo / "README.md")), ScriptTurn(content="Done.")]
    with FakeModelServer(turns) as fake:
        async with running_worker(with_words_server(settings, fake)):
            handle = await start_agent(
                temporal_client, code_input(repo, sha, "openai:fake", mcp=USE), settings.task_queue
            )
            await handle.result()
        requests = fake.settled_requests()
    seen = tool_messages(requests[1])[-1]["content"]
    assert seen.startswith("cwd []; ") and "README.md exists: False" in seen, seen
    assert "network: reached" not in seen and "network: " in seen, seen
