"""Which tool calls the worker judges itself and which go to a judging child process: a call that
none of the repository's rules apply to (a read-only tool's; an edit when the repository protects
no paths), with arguments of bounded size, is judged in the worker with the very same judgment,
so the common step starts no process; everything the repository's regexes or globs could read
(run_command, run_tests, edits under protected paths), and anything oversized, still goes to a
child. The fast tier's guard (tests/support/fast_tier.py) fails a fast test that starts a process,
so the fast tests here show no child was used."""

from __future__ import annotations

import asyncio

import pytest

from shopfloor.activities.judging import (
    INLINE_ARGUMENT_CHARS,
    CallToJudge,
    _judge_in_child,
    judge,
    judge_calls,
    judged_here,
)
from shopfloor.agents.permissions import PermissionPolicy

DEFAULT = PermissionPolicy().model_dump()
PROTECTING = PermissionPolicy(protected_paths=["ci/**"], deny_commands=[r"^(a+)+$"]).model_dump()


def call(tool: str, policy: dict = DEFAULT, **arguments: object) -> CallToJudge:
    return CallToJudge(tool=tool, arguments=arguments, policy=policy, required_command="pytest -q")


INLINE = [
    call("read_file", path="README.md"),
    call("read_file", path="~/.ssh/id_rsa"),
    call("glob", pattern="/home/me/.aws/**"),
    call("grep", pattern="(a+)+$", path="src"),  # never matched by Python's re: ripgrep runs it
    call("list_dir", path="."),
    call("git_diff"),
    call("read_output", digest="0" * 64),
    call("read_file", path="x" * 5000),  # over the path cap: refused by its size
    call("read_file", path=123),  # invalid arguments: refused with the reason
    call("edit_file", path="src/app.py", old="a", new="b"),
    call("write_file", path=".git/config", content="x"),
    call("write_file", path="../outside", content="x"),
    call("read_file", PROTECTING, path="ci/deploy.sh"),  # reading is not editing
]
TO_A_CHILD = [
    call("run_command", command="ls"),
    call("run_command", command="pytest -q"),
    call("run_tests", args="-k x"),
    call("edit_file", PROTECTING, path="ci/deploy.sh", old="a", new="b"),
    call("write_file", PROTECTING, path="src/app.py", content="x"),
    call("read_file", path="a" * (INLINE_ARGUMENT_CHARS + 1)),
    call("submit", summary="x"),  # no such tool to permit: the child says so
]


@pytest.mark.fast
def test_only_calls_no_repository_rule_applies_to_are_judged_here() -> None:
    assert all(judged_here(c) for c in INLINE)
    assert not any(judged_here(c) for c in TO_A_CHILD)


@pytest.mark.fast
async def test_calls_judged_here_get_the_judgment_and_start_no_process() -> None:
    judged = await judge_calls(INLINE)
    assert judged == [judge(c) for c in INLINE]
    assert [j.decision for j in judged] == [
        "allow",
        "deny",
        "deny",
        "allow",
        "allow",
        "allow",
        "allow",
        "deny",
        "deny",
        "allow",
        "deny",
        "deny",
        "allow",
    ]
    assert "SSH" in judged[1].reason and "limited to 4096 bytes" in judged[7].reason


async def test_a_child_judges_the_same_and_a_mixed_reply_keeps_its_order() -> None:
    # What the worker judges itself is what a judging child says about it.
    in_child = await asyncio.gather(*(asyncio.to_thread(_judge_in_child, c) for c in INLINE))
    assert list(in_child) == [judge(c) for c in INLINE]
    mixed = [INLINE[1], TO_A_CHILD[1], INLINE[0], TO_A_CHILD[3], INLINE[9], TO_A_CHILD[0]]
    judged = await judge_calls(mixed)
    assert [(j.decision, j.runs_required) for j in judged] == [
        ("deny", False),
        ("allow", True),
        ("allow", False),
        ("deny", False),
        ("allow", False),
        ("allow", False),
    ]
    assert "protected by the repository's policy" in judged[3].reason
