"""An approval names a commit: a push just before a maintainer's `/shopfloor approve` is handled
must not ride on it.

The attack: a member's pull request is reviewed and waits for a maintainer. The maintainer writes
`/shopfloor approve` about the head they read; before that comment is handled (here: its webhook
failed and is redelivered, as GitHub's button or the reconciler do), the author pushes a backdoor.
The review agent approves the new head too (a model can be talked into anything). The comment
must not approve the new head: it is refused with a reply naming the new head, nothing merges; a
stale `/shopfloor approve <old sha>` is refused too; `/shopfloor approve <new sha>` merges exactly
that head. End to end: simulator, webhook edge, a real worker and Temporal.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import pytest
from agent_runs import call, record_history
from approval_runs import comments_when, held_comment, redeliver, refusals
from factory_runs import APPROVE, POLICY, TEST_CMD, TRIAGE_TURNS, Factory, factory, fix_turns
from waiting import DEADLINE_S, query_until

from shopfloor.agents.approvals import decide, record_head, sha_argument
from shopfloor.agents.progress import ProgressView, render_progress
from shopfloor.models.factory_run import FactoryState, HeadSeen
from shopfloor.models.inbox import pr_workflow_id
from shopfloor.models.inbox_state import IssueOutcome, PullRequestOutcome

MERGING = POLICY + "pull_requests:\n  review: members\n  merge: true\n"
FIXED_OPS = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
BACKDOOR_OPS = FIXED_OPS + "\n\ndef is_admin(user):\n    return True  # everyone is an admin now\n"
REVIEW_TURNS = [{"tool_calls": [call("run_tests", command=TEST_CMD)]}, {"tool_calls": [call("submit", **APPROVE)]}]


def _open_pr(f: Factory, author: str, branch: str) -> tuple[int, str]:
    main = f.get("/branches/main")["commit"]["sha"]
    resp = f.gh(author).post(f"/repos/{f.repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main})
    assert resp.status_code == 201, resp.text
    _push_ops(f, author, branch, FIXED_OPS)
    resp = f.gh(author).post(
        f"/repos/{f.repo}/pulls",
        json={"title": "Make add() add", "head": branch, "base": "main", "body": "add(2, 3) returned -1."},
    )
    assert resp.status_code == 201, resp.text
    return resp.json()["number"], resp.json()["head"]["sha"]


def _push_ops(f: Factory, login: str, branch: str, ops: str) -> str:
    old = f.get("/contents/calc/ops.py", ref=branch)["sha"]
    resp = f.gh(login).put(
        f"/repos/{f.repo}/contents/calc/ops.py",
        json={
            "message": "edit ops",
            "content": base64.b64encode(ops.encode()).decode(),
            "sha": old,
            "branch": branch,
        },
    )
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["commit"]["sha"]


async def test_a_push_before_the_approval_is_handled_is_not_approved(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"review": REVIEW_TURNS, "review-2": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, MERGING) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "mallory", "write")
        number, head1 = _open_pr(f, "mallory", "mallory/fix-add")
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))

        def waiting_on(head: str):
            return lambda s: s.head_sha == head and s.verdict_head == head and s.waiting_for == "approval"

        await query_until(handle, "factory", FactoryState, waiting_on(head1), "the merge to wait for approval")
        # The progress comment suggests the form that names the commit.
        await comments_when(
            f,
            number,
            lambda cs: any(f"/shopfloor approve {head1[:12]}" in c["body"] for c in cs),
            "the progress comment to name the head to approve",
        )

        # The maintainer approves what they read; the webhook fails, and meanwhile the author pushes.
        held, _ = held_comment(f, number, "/shopfloor approve", "maria")
        head2 = _push_ops(f, "mallory", "mallory/fix-add", BACKDOOR_OPS)
        await query_until(handle, "factory", FactoryState, waiting_on(head2), "review 2 and the wait for approval")
        redeliver(f, held)

        comments = await comments_when(f, number, lambda cs: len(refusals(cs)) == 1, "the approval to be refused")
        reply = refusals(comments)[0]
        assert "\n@maria `/shopfloor approve` was not applied" in reply, reply
        assert f"/shopfloor approve {head2[:12]}" in reply, reply
        assert head1[:12] in reply  # the head the comment was written about
        state = await handle.query("factory", result_type=FactoryState)
        assert state.approved_heads == [] and state.waiting_for == "approval", state
        assert not f.get(f"/pulls/{number}")["merged"]

        # Naming the old head is refused as well.
        f.comment(number, f"/shopfloor approve {head1[:7]}", "maria")
        comments = await comments_when(f, number, lambda cs: len(refusals(cs)) == 2, "the stale approval to be refused")
        assert f"names `{head1[:7]}`" in refusals(comments)[1] and head2[:12] in refusals(comments)[1]
        assert (await handle.query("factory", result_type=FactoryState)).approved_heads == []
        assert not f.get(f"/pulls/{number}")["merged"]

        # Naming the new head approves exactly that head.
        f.comment(number, f"/shopfloor approve {head2[:12]}", "maria")
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))
        await record_history(handle, "pr-approval-names-commit")

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.approved_heads == [head2]
    pr = f.get(f"/pulls/{number}")
    assert pr["merged"] and pr["head"]["sha"] == head2
    assert f.file("calc/ops.py") == BACKDOOR_OPS  # what was merged is exactly the approved head


async def test_an_issue_runs_own_push_after_the_approval_was_written_is_not_approved(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """The same rule on an issue's pipeline: the maintainer's bare approval was written about the
    first head; by the time it is handled the run has pushed another (main moved, so it merged
    main in, and CI and the review ran again). It approves nothing; naming the new head does."""
    approve = [{"tool_calls": [call("submit", **APPROVE)]}]
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": approve, "review-2": approve}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        first = await f.state_when(lambda s: s.waiting_for == "approval", "the merge to wait for approval")
        head1 = first.head_sha or ""
        await f.progress_when(number, f"/shopfloor approve {head1[:12]}")
        held, _ = held_comment(f, number, "/shopfloor approve", "maria")
        resp = f.gh("maria").put(
            f"/repos/{f.repo}/contents/NOTES.md",
            json={"message": "notes", "content": base64.b64encode(b"notes\n").decode(), "branch": "main"},
        )
        assert resp.status_code == 201, resp.text
        f.comment(number, f"/shopfloor approve {head1[:12]}", "maria")  # merging finds main moved
        second = await f.state_when(
            lambda s: s.head_sha != head1 and s.verdict_head == s.head_sha and s.waiting_for == "approval",
            "the second head to wait for approval",
        )
        head2 = second.head_sha or ""
        assert second.approved_heads == [head1]
        redeliver(f, held)
        comments = await comments_when(f, number, lambda cs: len(refusals(cs)) == 1, "the approval to be refused")
        assert f"/shopfloor approve {head2[:12]}" in refusals(comments)[0]
        state = await f.handle.query("factory", result_type=FactoryState)
        assert state.approved_heads == [head1] and state.waiting_for == "approval" and state.merged_sha is None
        f.comment(number, f"/shopfloor approve {head2[:12]}", "maria")
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=DEADLINE_S))
        await record_history(f.handle, "issue-approval-names-commit")
    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.approved_heads == [head1, head2]
    pr = f.get(f"/pulls/{outcome.factory.pr_number}")
    assert pr["merged"] and pr["head"]["sha"] == head2


# -- the rule itself, on the head record (pure) ---------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
A, B = "a" * 40, "b" * 40


def _heads() -> list[HeadSeen]:
    heads: list[HeadSeen] = []
    record_head(heads, A, T0)
    record_head(heads, B, T0 + timedelta(seconds=10))
    return heads


@pytest.mark.fast
def test_a_bare_approval_names_the_head_at_the_time_it_was_written():
    heads = _heads()
    assert decide(heads, B, "", T0 + timedelta(seconds=11)).sha == B
    # GitHub's times are whole seconds: a push in the comment's own second may have come after it.
    assert decide(heads, B, "", T0 + timedelta(seconds=10)).sha is None
    late = decide(heads, B, "", T0 + timedelta(seconds=9))  # written before B existed, handled after
    assert late.sha is None and f"/shopfloor approve {B[:12]}" in late.reason
    assert decide(heads, B, "", None).sha is None  # no time: no guess
    assert decide(heads, B, "", T0 - timedelta(seconds=1)).sha is None  # before any head


@pytest.mark.fast
def test_an_approval_naming_a_sha_counts_only_for_the_current_head():
    heads = _heads()
    assert decide(heads, B, B[:7], T0).sha == B  # the explicit form works whatever the time
    assert decide(heads, B, B.upper(), None).sha == B
    stale = decide(heads, B, A[:12], T0 + timedelta(seconds=60))
    assert stale.sha is None and A[:12] in stale.reason and B[:12] in stale.reason
    assert decide(heads, None, B[:7], T0).sha is None  # nothing to approve yet
    assert sha_argument("LGTM, ship it") is None and sha_argument("abc12") is None


@pytest.mark.fast
def test_the_head_record_only_moves_forward():
    heads = _heads()
    record_head(heads, B, T0 + timedelta(seconds=5))  # GitHub's time for B, earlier than our read
    assert heads[-1].since == T0 + timedelta(seconds=5)
    record_head(heads, B, T0 - timedelta(seconds=5))  # never before the head that preceded it
    assert heads[-1].since == T0 + timedelta(seconds=5)
    record_head(heads, A, T0)  # a head seen again later starts when it was seen again
    assert [h.sha for h in heads] == [A, B, A] and heads[-1].since == T0 + timedelta(seconds=5)


@pytest.mark.fast
def test_the_progress_comment_asks_for_the_head_by_its_sha():
    view = ProgressView(
        workflow_id="issue/acme/shop/7",
        repo="acme/shop",
        number=7,
        state="waiting",
        stage="merge",
        waiting_for="approval",
        approve_sha=B[:12],
    )
    assert f"comment `/shopfloor approve {B[:12]}` on this issue" in render_progress(view)
    odd = view.model_copy(update={"approve_sha": "`x` @someone"})  # only a sha is ever printed
    assert "@someone" not in render_progress(odd) and "comment `/shopfloor approve` on this issue" in render_progress(
        odd
    )
