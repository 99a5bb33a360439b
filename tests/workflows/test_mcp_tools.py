"""MCP tools through real runs (real dev server, every workflow task replayed, the fake model over
HTTP): the operator's server, written with the official `mcp` SDK (tests/support/mcp_words_server.py),
is started in the sandbox and listed once when the run starts; the model is offered its tools as
`mcp__words__<tool>`; a call the repository's rules allow runs over stdio; one they deny is refused;
one they do not name waits for an operator and is refused when nobody answers; a server the
operator does not run is a warning, not the run's end. (What the server can reach:
tests/security/test_mcp_sandbox.py.)
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agent_runs import record_history, start_agent
from harness_runs import activity_types, code_input, git_repo, status_of, tool_messages, with_fake
from mcp_runs import USE, with_words_server
from threaded_server import serving

from shopfloor.models.agent_run import AgentResult
from shopfloor.models.mcp import McpServerSpec, McpUse
from shopfloor.testing import FakeModelServer, ScriptTurn


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools") or []]


async def test_an_agent_calls_an_mcp_tool_and_the_rules_refuse_the_others(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = git_repo(tmp_path / "repo")
    turns = [
        ScriptTurn.tool("mcp__words__count_words", text="one two three"),
        ScriptTurn.tool("mcp__words__shout", text="quiet"),
        ScriptTurn.tool("mcp__words__look_around", path=str(repo / "README.md")),
        ScriptTurn(content="Done."),
    ]
    inp = code_input(repo, sha, "openai:fake", mcp=USE.model_copy(update={"allow": ["words.count_*"]}))
    inp = inp.model_copy(update={"approval_timeout_s": 2.0})
    with FakeModelServer(turns) as fake:
        async with running_worker(with_words_server(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result: AgentResult = await handle.result()
            status = await status_of(handle)
            ran = await activity_types(handle)
        requests = fake.settled_requests()
    await record_history(handle, "mcp-tools")

    assert result.state == "completed", result
    offered = tool_names(requests[0])
    assert {"mcp__words__count_words", "mcp__words__shout", "mcp__words__look_around"} <= set(offered)
    assert "read_file" in offered  # the agent's own tools stay
    (counted,) = tool_messages(requests[1])[-1:]
    assert counted["content"] == "3", counted
    shouted = tool_messages(requests[2])[-1]
    assert shouted["content"] == "denied: the repository's policy does not allow the MCP tool words.shout (`mcp.deny`)"
    looked = tool_messages(requests[3])[-1]
    assert looked["content"].startswith("rejected: no operator answered"), looked  # not allowed: asked, unanswered
    assert ran.count("mcp_list_tools") == 1 and ran.count("mcp_call_tool") == 1
    assert any("nowhere: not a server this shopfloor runs" in w for w in status.warnings), status.warnings


async def test_an_http_mcp_server_on_the_allow_list_is_called_and_one_off_it_is_not(
    temporal_client, settings, running_worker, tmp_path
):
    from mcp_words_server import server as words

    repo, sha = git_repo(tmp_path / "repo")
    turns = [ScriptTurn.tool("mcp__web__count_words", text="a b c d"), ScriptTurn(content="Done.")]
    use = McpUse(servers=["web", "far"], allow=["web.count_*"])
    with serving(words.streamable_http_app(), name="mcp-http") as base, FakeModelServer(turns) as fake:
        worker = with_fake(settings, fake).model_copy(
            update={
                "mcp_servers": {
                    "web": McpServerSpec(url=f"{base}/mcp"),
                    "far": McpServerSpec(url="https://mcp.example.com/mcp"),  # not on the allow-list
                },
                "sandbox_network_allow": [urlsplit(base).netloc],
            }
        )
        async with running_worker(worker):
            handle = await start_agent(
                temporal_client, code_input(repo, sha, "openai:fake", mcp=use), settings.task_queue
            )
            result: AgentResult = await handle.result()
            status = await status_of(handle)
        requests = fake.settled_requests()
    assert result.state == "completed", result
    assert tool_messages(requests[1])[-1]["content"] == "4"
    offered = tool_names(requests[0])
    assert "mcp__web__count_words" in offered and not any(n.startswith("mcp__far__") for n in offered)
    assert any(
        "far: the MCP server far at mcp.example.com:443 is not on the operator's network allow-list" in w
        for w in status.warnings
    ), status.warnings
