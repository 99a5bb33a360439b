"""Tool calls waiting for an operator, as people see them: the progress comment says what waits,
for which agent, since and until when and how to answer; `shopfloor status` says the same; the
id a comment names a call by, and the comment commands that answer it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shopfloor.agents.call_waits import answer_id, parse_answer, status_lines
from shopfloor.agents.comment_commands import parse_command
from shopfloor.agents.progress import ProgressView, render_progress
from shopfloor.models.call_waits import CallWait
from shopfloor.models.github_ops import find_markers
from shopfloor.models.inbox import CommentCommand

pytestmark = pytest.mark.fast

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FIX_RUN = "issue/acme/app/7/fix-1"


def wait(**kw) -> CallWait:
    base = {
        "workflow_id": FIX_RUN,
        "agent": "fix",
        "call_id": "call_2_0",
        "step": 3,
        "summary": 'run_command {"command": "pip install requests"}',
        "reason": "installs Python packages",
        "since": T0,
        "until": T0 + timedelta(minutes=60),
    }
    return CallWait(**{**base, **kw})


def view(**kw) -> ProgressView:
    return ProgressView(workflow_id="issue/acme/app/7", repo="acme/app", number=7, stage="fix", step=3, **kw)


def test_the_comment_says_what_waits_for_whom_since_until_and_how_to_answer():
    body = render_progress(view(waiting_calls=[wait()]))
    assert body.startswith("### shopfloor · acme/app#7 · waiting")
    assert "**Waiting** for an operator to approve or reject a tool call (stage fix, step 3)" in body
    assert '**fix** waits for approval of ` run_command {"command": "pip install requests"} `' in body
    assert "(` installs Python packages `)" in body
    assert "since 2026-03-01 12:00 UTC; refused at 2026-03-01 13:00 UTC if nobody answers" in body
    assert "`/shopfloor approve-call call_2_0`" in body
    assert "`/shopfloor reject-call call_2_0 <why>`" in body
    assert f"`shopfloor approve {FIX_RUN} --call call_2_0`" in body


def test_a_running_comment_with_nothing_waiting_is_unchanged():
    body = render_progress(view())
    assert "**Running** — stage fix, step 3." in body and "approve-call" not in body


def test_a_final_comment_asks_nobody():
    body = render_progress(view(state="failed", reason="boom", waiting_calls=[wait()]))
    assert "Final state: failed" in body and "approve-call" not in body


def test_a_summary_the_model_wrote_cannot_mention_link_or_break_out():
    evil = wait(summary="run_command `@maria` [x](https://evil.example) <!-- shopfloor:issue/x:progress -->")
    body = render_progress(view(waiting_calls=[evil]))
    line = next(x for x in body.splitlines() if "waits for approval" in x)
    assert "`` run_command `@maria` [x](https://evil.example)" in line  # one code span, longer fence
    assert len(find_markers(body)) == 1  # only the comment's own marker


def test_an_id_a_comment_cannot_carry_is_answered_from_the_cli():
    body = render_progress(view(waiting_calls=[wait(call_id="`@` \n")]))
    assert "approve-call" not in body
    assert f"`shopfloor approve {FIX_RUN}`" in body


@pytest.mark.parametrize(
    ("raw", "cut"),
    [("call_2_0", "call_2_0"), ("toolu_01A.b:c-d", "toolu_01A.b:c-d"), ("a b`c@d", "abcd"), ("x" * 100, "x" * 64)],
)
def test_answer_id(raw: str, cut: str):
    assert answer_id(raw) == cut


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        ("call_2_0", ("call_2_0", "")),
        ("call_2_0   no new   dependencies", ("call_2_0", "no new dependencies")),
        ("", ("", "")),
        ("@evil`x", ("evilx", "")),
    ],
)
def test_parse_answer(args: str, parsed: tuple[str, str]):
    assert parse_answer(args) == parsed


def test_the_answer_commands_parse_and_need_write_access():
    approve = parse_command("/shopfloor approve-call call_2_0")
    reject = parse_command("Not that one.\n/shopfloor reject-call call_2_0 no new dependencies")
    assert approve == CommentCommand(name="approve-call", args="call_2_0")
    assert reject == CommentCommand(name="reject-call", args="call_2_0 no new dependencies")
    assert approve.needs_write and reject.needs_write


def test_status_lines_say_the_same():
    lines = status_lines([wait()])
    assert lines[0] == 'waiting   fix · call call_2_0 · step 3 · run_command {"command": "pip install requests"}'
    assert "since 2026-03-01 12:00 UTC · refused at 2026-03-01 13:00 UTC" in lines[1]
    assert f"shopfloor approve {FIX_RUN} --call call_2_0" in lines[2]
    assert f"shopfloor reject {FIX_RUN} --call call_2_0 --reason <why>" in lines[2]


def test_the_policy_docs_examples_parse_as_written():
    # docs/policy.md's Example and its Approvals example: a reader copying them gets no policy error.
    import re
    from pathlib import Path

    from shopfloor.agents.policy import parse_policy

    docs = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.DOTALL)
    approvals = docs[docs.index("## Approvals") :]
    chosen = [blocks[0], next(b for b in blocks if b in approvals)]
    for text in chosen:
        load = parse_policy(text)
        assert load.ok, load.errors
    example = parse_policy(chosen[0]).policy
    assert example.models.review == "anthropic:claude-sonnet-4-5" and example.budgets.max_cost_usd.fix == 2.0
    assert example.commands.ask == ["^make release"] and example.approval_timeout_minutes == 60
    assert parse_policy(chosen[1]).policy.approval_timeout_minutes == 240
