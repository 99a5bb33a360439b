"""A rejected push's output, as git prints GitHub's answers, turned into the refusal a maintainer reads."""

from __future__ import annotations

import pytest

from shopfloor.activities.push_refusal import push_refusal, remote_lines

pytestmark = pytest.mark.fast

PROTECTED = """To https://github.com/acme/app.git
remote: error: GH006: Protected branch update failed for refs/heads/shopfloor/issue-1.
remote: error: Changes must be made through a pull request.
 ! [remote rejected] 0123 -> shopfloor/issue-1 (protected branch hook declined)
error: failed to push some refs to 'https://github.com/acme/app.git'
"""
HOOK = """remote:
remote: secret scanning found a token
 ! [remote rejected] 0123 -> shopfloor/issue-1 (pre-receive hook declined)
"""


def test_a_protected_branch_names_the_rule_and_what_to_do():
    said = push_refusal("acme/app", "shopfloor/issue-1", PROTECTED)
    assert said == (
        "acme/app: GitHub refused the push to 'shopfloor/issue-1': a branch protection rule covers it "
        "(Changes must be made through a pull request.). Let shopfloor's App push to 'shopfloor/issue-1', "
        "or narrow the rule."
    )


def test_any_other_refusal_gives_the_servers_own_lines():
    assert remote_lines(HOOK) == ["secret scanning found a token"]
    assert (
        push_refusal("acme/app", "b", HOOK) == "acme/app: the push to 'b' was rejected: secret scanning found a token"
    )
    assert push_refusal("acme/app", "b", " ! [remote rejected] x -> b (denied)\n") == (
        "acme/app: the push to 'b' was rejected: ! [remote rejected] x -> b (denied)"
    )
