"""A repository's `commands:` rules only add to the command judge's: `deny` refuses, `ask` waits
for an operator, and nothing a repository writes removes the asks shopfloor makes by default.

The attack: the policy file is the repository's (anyone who can land a commit on the default
branch writes it), and an agent that can `pip install`, `curl` or `docker` unasked can pull in and
run anything. A policy that tries to loosen the rules — an empty `ask` list, an `allow` key, asks
under another name — is either refused as a policy error (nothing runs with it) or changes
nothing about the default asks. Replayed through the same chain a run uses (the policy parser,
the pipeline's mapping into the agent's permissions, the model step's judge), and end to end:
a repository's deny refuses its command, its ask waits for an operator like the default asks do.
"""

from __future__ import annotations

import asyncio

import pytest
from agent_runs import call
from factory_runs import APPROVE, POLICY, TRIAGE_TURNS, approve_and_finish, assert_merged, factory, fix_turns
from waiting import DEADLINE_S

from shopfloor.agents.permissions import PermissionPolicy, classify
from shopfloor.agents.policy import parse_policy
from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.workflows.factory_agents import agent_permissions

# One command for each kind of default ask.
DEFAULT_ASKED = [
    "pip install requests",
    "uv add httpx",
    "npm install left-pad",
    "npx some-tool",
    "cargo install ripgrep",
    "apt-get install -y jq",
    "curl https://example.com",
    "docker run alpine",
    "chmod -R 777 src",
    "pkill python",
    "systemctl restart nginx",
]

LOOSENING = {
    "an empty ask list": "commands:\n  ask: []\n",
    "empty lists for both": "commands:\n  ask: []\n  deny: []\n",
    "a rule that matches nothing": "commands:\n  ask: ['(?!)']\n",
    "an allow list": "commands:\n  allow: ['^pip install']\n",
    "an allow key beside ask": "commands:\n  ask: []\n  allow: ['.*']\n",
    "the judge's own key names": "permissions:\n  ask_commands: []\n",
    "ask as a string": "commands:\n  ask: ''\n",
    "ask as null": "commands:\n  ask: null\n",
}


def judged(policy_text: str, command: str) -> tuple[str, str]:
    """How a run under this policy judges `command`: the load as the pipeline checks it, mapped as
    run_agent maps it, judged as model_step judges (None: the policy is an error, nothing runs)."""
    load = parse_policy(policy_text)
    assert load.ok, load.errors
    rules = agent_permissions(load.policy)
    verdict = classify("run_command", {"command": command}, PermissionPolicy(**rules.model_dump(exclude_none=True)))
    return verdict.decision, verdict.reason


@pytest.mark.fast
@pytest.mark.parametrize("attempt", LOOSENING, ids=list(LOOSENING))
def test_a_policy_cannot_remove_the_default_asks(attempt: str):
    text = LOOSENING[attempt]
    load = parse_policy(text)
    if not load.ok:  # refused as a whole: the run parks on it, no agent runs with any part of it
        assert any("`commands." in e or "`permissions`" in e or "unknown key" in e for e in load.errors), load.errors
        return
    for command in DEFAULT_ASKED:
        assert judged(text, command)[0] == "ask", (attempt, command)


@pytest.mark.fast
def test_repository_rules_add_to_the_defaults():
    text = "commands:\n  ask: ['^make build']\n  deny: ['^make deploy']\n"
    assert judged(text, "make deploy")[0] == "deny"
    assert "matches the repository's deny rule '^make deploy'" in judged(text, "make deploy")[1]
    decision, reason = judged(text, "make build")
    assert decision == "ask" and "the repository's ask rule '^make build'" in reason
    assert judged(text, "make test")[0] == "allow"
    for command in DEFAULT_ASKED:
        assert judged(text, command)[0] == "ask", command
    assert judged(text, "cd src && make deploy")[0] == "deny"  # searched in every simple command


async def _waits(f) -> list[CallWait]:
    try:
        return await f.handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])
    except Exception:  # the run has not started yet
        return []


async def _next_wait(f, seen: set[str]) -> CallWait:
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        fresh = [w for w in await _waits(f) if w.key not in seen]
        if fresh:
            seen.add(fresh[0].key)
            return fresh[0]
        assert asyncio.get_running_loop().time() < deadline, "no new call waited for an operator"
        await asyncio.sleep(0.3)


async def test_a_repositorys_deny_refuses_and_its_ask_waits_beside_the_default_asks(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY + "commands:\n  ask: ['^make build']\n  deny: ['^make deploy']\n"
    read, edit, test, submit = fix_turns()
    fix = [
        read,
        edit,
        {"tool_calls": [call("run_command", command="make deploy")]},
        {"tool_calls": [call("run_command", command="pip install requests")]},
        {"tool_calls": [call("run_command", command="make build")]},
        test,
        submit,
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        seen: set[str] = set()
        install = await _next_wait(f, seen)  # the default ask, still there beside the repository's
        assert "pip install requests" in install.summary
        f.comment(number, f"/shopfloor reject-call {install.call_id} not needed", "maria")
        build = await _next_wait(f, seen)  # the repository's own ask
        assert "make build" in build.summary and "^make build" in build.reason
        f.comment(number, f"/shopfloor reject-call {build.call_id} not needed", "maria")
        outcome = await approve_and_finish(f, number)
        status = await temporal_client.get_workflow_handle(install.workflow_id).query("status", result_type=AgentStatus)

    assert_merged(f, number, outcome)
    by_command = {
        cmd: [e for e in status.events if e.kind == "tool" and cmd in e.summary]
        for cmd in ("make deploy", "pip install", "make build")
    }
    (deploy,) = by_command["make deploy"]
    assert not deploy.ok and deploy.preview.startswith("denied: ") and "deny rule '^make deploy'" in deploy.preview
    for cmd in ("pip install", "make build"):  # asked, rejected, never run
        asked, refused = by_command[cmd]
        assert asked.summary.startswith("rejected: run_command") and not asked.ok
        assert refused.summary.startswith("run_command") and not refused.ok
        assert refused.preview == "rejected: not needed (the call was not run)"
