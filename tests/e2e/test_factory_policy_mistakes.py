"""Mistakes in the keys a repository uses to set up, teach and check the agents (`setup`, `hooks`,
`commands`, `approval_timeout_minutes`) are reported the way every policy mistake is: one reply on
the issue listing each, the run parked, and nothing of the file used — no setup command runs and
no agent starts. The simulator, the webhook edge, the worker and Temporal are real.
"""

from __future__ import annotations

from factory_runs import POLICY, TRIAGE_TURNS, factory, fix_turns

MISTAKES = (
    "setup: python -m pip install -r requirements.txt\n"  # a string, not a list
    "hooks:\n"
    "  after_edit:\n"
    "    - run: python tools/fmt.py\n"
    "      file: ['*.py']\n"  # `files`
    "  before_submit:\n"
    "    - run: ruff check .\n"
    "      timeout_seconds: 0\n"
    "commands:\n"
    "  deny: ['curl (']\n"
    "approval_timeout_minutes: '30'\n"
)


async def test_mistakes_in_the_new_keys_get_one_reply_and_nothing_runs(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns()}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY + MISTAKES) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        state = await f.state_when(lambda s: s.result == "parked", "the policy's mistakes to park the run")
        body = await f.progress_when(number, "Final state: waiting for a human")
        comments = f.get(f"/issues/{number}/comments")

    assert state.waiting_for == "policy" and state.children == [], state  # no agent ran
    for problem in (
        '`setup`: must be a list (got "python -m pip install -r requirements.tx…")',
        "unknown key `hooks.after_edit.0.file` (did you mean `hooks.after_edit.0.files`?)",
        "`hooks.before_submit.0.timeout_seconds`: must be between 1 and 600 (got 0)",
        '`commands.deny.0`: "curl (" is not a valid regular expression',
        '`approval_timeout_minutes`: must be a whole number (got "30")',
    ):
        assert problem in state.reason, (problem, state.reason)
        assert f"\n- `` {problem}" in body, (problem, body)  # each mistake on its own line, whole
    assert "Why: 5 problems, listed below." in body
    assert "| setup |" not in body  # not even the part of the file that parsed was used
    assert len(comments) == 1, [c["body"] for c in comments]  # the progress comment is the one reply
    assert f.get("/pulls", state="all") == []
