"""The repository's MCP rules (agents/mcp_rules.py) and the names tools are offered under."""

from __future__ import annotations

import pytest

from shopfloor.agents.mcp_rules import mcp_decision
from shopfloor.agents.policy import parse_policy
from shopfloor.models.mcp import McpServerSpec, McpUse, offered_name, split_name
from shopfloor.workflows.factory_agents import agent_mcp

pytestmark = pytest.mark.fast

USE = McpUse(servers=["words"], allow=["words.count_*"], deny=["words.shout", "*.drop_*"])
OFFERED = [offered_name("words", t) for t in ("count_words", "shout", "peek", "drop_all")]


@pytest.mark.parametrize(
    ("tool", "decision"),
    [("count_words", "allow"), ("shout", "deny"), ("drop_all", "deny"), ("peek", "ask")],
)
def test_deny_wins_then_allow_and_the_rest_waits_for_an_operator(tool, decision):
    verdict, reason = mcp_decision(offered_name("words", tool), OFFERED, USE)
    assert verdict == decision
    assert (reason == "") == (decision == "allow")


def test_a_tool_the_run_was_not_offered_or_a_run_without_rules_is_refused():
    assert mcp_decision("mcp__words__count_letters", OFFERED, USE)[0] == "deny"
    assert mcp_decision("mcp__words__count_words", OFFERED, None)[0] == "deny"
    assert mcp_decision("mcp__words", OFFERED, USE)[0] == "deny"


def test_names_round_trip_and_other_names_are_not_mcp():
    assert split_name(offered_name("words", "count_words")) == ("words", "count_words")
    assert split_name("read_file") is None and split_name("mcp__") is None and split_name("mcp__x__") is None


def test_the_policy_names_servers_and_patterns_and_the_factory_passes_them_on():
    load = parse_policy("mcp:\n  servers: [words]\n  allow: ['words.count_*']\n  deny: [words.shout]\n")
    assert load.ok and agent_mcp(load.policy) == USE.model_copy(update={"deny": ["words.shout"]})
    assert agent_mcp(parse_policy("").policy) is None
    assert not parse_policy("mcp:\n  servers: ['../etc']\n").ok
    assert not parse_policy("mcp:\n  allow: ['no-dot']\n").ok
    assert not parse_policy("mcp:\n  servers: [words]\n  run: [rm]\n").ok


def test_a_server_is_a_command_or_a_url_without_credentials():
    assert McpServerSpec(url="https://mcp.example.com/mcp").command is None
    for bad in (
        {},
        {"command": ["x"], "url": "https://a/b"},
        {"url": "file:///etc/passwd"},
        {"url": "https://u:p@h/x"},
    ):
        with pytest.raises(ValueError):
            McpServerSpec(**bad)


def test_a_server_command_must_be_plain():
    with pytest.raises(ValueError):
        McpServerSpec(command=[])
    with pytest.raises(ValueError):
        McpServerSpec(command=["python3", "a\x00b"])
