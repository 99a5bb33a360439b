"""The issue pipeline's less travelled paths end to end, on the same rig as test_factory_issue.py
(the GitHub simulator with real git and CI, the real webhook edge, Temporal, scripted models):
CI that never reports, a base branch that moves into a conflict, a refused merge, approval by
review, stop and close mid-pipeline, `auto_fix: label`, pause and resume.

Each test drives the run the way people would (comments, reviews, pushes, labels on the
simulator), waits on the workflow's `factory`/`inbox` queries with deadlines, and asserts the
final GitHub state and the one progress comment's final text.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from agent_runs import call
from factory_runs import (
    APPROVE,
    DEADLINE_S,
    FIX,
    POLICY,
    TEST_CMD,
    TRIAGE_TURNS,
    Factory,
    approve_and_finish,
    assert_merged,
    factory,
    fix_turns,
)
from waiting import query_until

from shopfloor.models.inbox import issue_workflow_id
from shopfloor.models.inbox_state import InboxSummary, IssueOutcome

REVIEW_APPROVES = [{"tool_calls": [call("submit", **APPROVE)]}]
MODELS = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": REVIEW_APPROVES}
ISSUE = ("add() subtracts", "add(2, 3) returns -1, expected 5.")


# -- small helpers ---------------------------------------------------------------------------------


class NoCiSimulator:
    """The test's simulator, except that the repositories the rig creates through it run no CI:
    a repository whose CI never reports (nothing else differs)."""

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def create_repo(self, owner: str, name: str, **kw: Any) -> dict[str, Any]:
        return self._sim.create_repo(owner, name, **{**kw, "ci_command": None})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)


async def finished(f: Factory) -> IssueOutcome:
    return IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=DEADLINE_S))


async def inbox_when(f: Factory, ok, what: str) -> InboxSummary:
    assert f.handle is not None
    return await query_until(f.handle, "inbox", InboxSummary, ok, what)


def handled(inbox: InboxSummary, event: str, sender: str, action: str | None = None) -> bool:
    return any(
        e.event == event and e.sender == sender and (action is None or e.action == action) for e in inbox.last_events
    )


def the_pr(f: Factory, number: int) -> dict[str, Any]:
    prs = [p for p in f.get("/pulls", state="all") if p["head"]["ref"] == f"shopfloor/issue-{number}"]
    assert len(prs) == 1, prs
    return f.get(f"/pulls/{prs[0]['number']}")


def put_file(f: Factory, path: str, content: str, *, branch: str = "main", login: str = "maria") -> str:
    """A person commits `content` to `path` on `branch` through the contents API; the new head."""
    sha = f.get(f"/contents/{path}", ref=branch)["sha"]
    resp = f.gh(login).put(
        f"/repos/{f.repo}/contents/{path}",
        json={
            "message": f"edit {path}",
            "content": base64.b64encode(content.encode()).decode(),
            "sha": sha,
            "branch": branch,
        },
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["commit"]["sha"]


def review(f: Factory, pr: int, login: str, event: str = "APPROVE") -> None:
    resp = f.gh(login).post(f"/repos/{f.repo}/pulls/{pr}/reviews", json={"event": event, "body": "LGTM"})
    assert resp.status_code == 200, resp.text


# -- 1. CI never reports ------------------------------------------------------------------------


async def test_ci_that_never_reports_parks_the_run_until_a_retry_after_a_result(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY.replace("ci_timeout_minutes: 10", "ci_timeout_minutes: 1")  # the least the policy allows
    sim = NoCiSimulator(simulator)
    async with factory(sim, settings, running_worker, temporal_client, tmp_path, MODELS, policy) as f:
        number = f.open_issue(*ISSUE)
        parked = await f.state_when(
            lambda s: s.result == "parked", "the CI wait to time out", timeout_s=DEADLINE_S + 60
        )
        assert parked.waiting_for == "retry" and parked.ci_state == "pending", parked
        assert parked.reason == f"no CI result for {parked.head_sha[:12]} within 1 minutes", parked
        body = await f.progress_when(number, "Final state: waiting for a human")
        assert "comment `/shopfloor retry`" in body, body
        assert f"no CI result for {parked.head_sha[:12]} within 1 minutes" in body, body
        assert not the_pr(f, number)["merged"]

        # An external CI reports at last (as a person with write access would through the API);
        # a maintainer then retries.
        simulator.set_permission("acme", f.repo.split("/")[1], "ci-runner", "write")
        resp = f.gh("ci-runner").post(
            f"/repos/{f.repo}/statuses/{parked.head_sha}", json={"state": "success", "context": "external-ci"}
        )
        assert resp.status_code == 201, resp.text
        f.comment(number, "/shopfloor retry", "maria")
        outcome = await approve_and_finish(f, number)
    pr = assert_merged(f, number, outcome)
    assert outcome.factory.ci_state == "success" and outcome.factory.approved_heads == [pr["head"]["sha"]]
    assert f.get(f"/commits/{pr['head']['sha']}/check-runs")["check_runs"] == []  # no CI ran: the status decided


# -- 2. the base branch moves into a conflict -----------------------------------------------------

MAIN_MOVED = (
    "def add(a, b):\n    return a - b  # callers rely on this\n\n\ndef mul(a, b):\n    return a * b\n\n\n"
    "def sub(a, b):\n    return a - b\n"
)
RESOLVED = MAIN_MOVED.replace("return a - b  # callers rely on this", "return a + b")


async def test_base_branch_conflict_before_the_merge_goes_through_a_fix_round(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    resolve = [
        {"tool_calls": [call("read_file", path="calc/ops.py")]},
        {"tool_calls": [call("write_file", path="calc/ops.py", content=RESOLVED)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **{**FIX, "summary": "Merged main in; add() adds."})]},
    ]
    models = {**MODELS, "fix-2": resolve}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue(*ISSUE)
        first = await f.state_when(lambda s: s.waiting_for == "approval", "the first approval wait")
        put_file(f, "calc/ops.py", MAIN_MOVED)  # a person changes the same line on main
        f.comment(number, "/shopfloor approve", "maria")
        second = await f.state_when(
            lambda s: s.waiting_for == "approval" and s.fix_round == 2,
            "a conflict fix round and the approval wait after it",
        )
        assert second.head_sha != first.head_sha and second.review_round == 2
        await f.progress_when(number, "conflicts with main: calc/ops.py")
        f.comment(number, "/shopfloor approve", "maria")
        outcome = await finished(f)
    pr = assert_merged(f, number, outcome, reviews=2)
    assert outcome.factory.approved_heads == [first.head_sha, second.head_sha]
    main = f.file("calc/ops.py")
    assert "return a + b" in main and "def sub(a, b)" in main and "<<<<<<<" not in main
    # The pushed resolution sits on main's new tip: one commit, no conflict markers.
    head = f.get(f"/commits/{pr['head']['sha']}")
    main_tip_before_merge = head["parents"][0]["sha"]
    assert "callers rely on this" in f.file("calc/ops.py", ref=main_tip_before_merge)


# -- 3. a refused merge ---------------------------------------------------------------------------


async def test_merge_refused_after_a_push_to_the_branch_parks_the_run(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        number = f.open_issue(*ISSUE)
        reviewed = await f.state_when(lambda s: s.waiting_for == "approval", "the approval wait")
        branch = f"shopfloor/issue-{number}"
        pushed = put_file(f, "calc/ops.py", f.file("calc/ops.py", ref=branch) + "# a person's note\n", branch=branch)
        f.comment(number, "/shopfloor approve", "maria")  # approves the head shopfloor reviewed
        parked = await f.state_when(lambda s: s.result == "parked", "the merge to be refused")
        assert parked.reason.startswith("the merge was refused") and pushed[:12] in parked.reason, parked
        assert parked.waiting_for == "a maintainer to merge or close the pull request"
        assert parked.merged_sha is None and parked.approved_heads == [reviewed.head_sha]
        pr = the_pr(f, number)
        assert pr["state"] == "open" and not pr["merged"] and pr["head"]["sha"] == pushed
        assert "return a - b" in f.file("calc/ops.py")  # main untouched
        assert f.get(f"/issues/{number}")["state"] == "open"
        body = await f.progress_when(number, "Final state: waiting for a human")
        assert "the merge was refused" in body, body
        assert "merge or close the pull request" in body, body
        # The workflow stays up for the human; their merge closes the issue, which ends it.
        resp = f.gh("maria").put(f"/repos/{f.repo}/pulls/{pr['number']}/merge", json={"merge_method": "squash"})
        assert resp.status_code == 200, resp.text
        outcome = await finished(f)
    # Nobody waits any more: the comment says so instead of still asking for a human.
    assert outcome.state == "closed" and outcome.factory.result == "cancelled", outcome
    assert outcome.factory.reason.startswith("the issue was closed while the run was parked (the merge was refused")
    final = f.progress(number)
    assert "Final state: cancelled" in final and "while the run was parked" in final, final


# -- 4. approval by an APPROVED review -------------------------------------------------------------


async def test_a_writers_approved_review_approves_a_strangers_does_not(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        number = f.open_issue(*ISSUE)
        waiting = await f.state_when(lambda s: s.waiting_for == "approval", "the approval wait")
        pr = the_pr(f, number)
        review(f, pr["number"], "bob")  # a non-member: GitHub takes the review, shopfloor must not
        f.comment(number, "thanks!", "bob")  # handled after the review, in order
        await inbox_when(f, lambda i: handled(i, "issue_comment", "bob"), "bob's review and comment")
        state = await f.state_when(lambda s: True, "the factory state")
        assert state.approved_heads == [] and state.waiting_for == "approval" and state.result == "", state
        assert not the_pr(f, number)["merged"]
        review(f, pr["number"], "maria")
        outcome = await finished(f)
    assert outcome.state == "done" and outcome.factory.result == "merged", outcome
    merged = the_pr(f, number)
    assert merged["merged"] and f.get(f"/issues/{number}")["state"] == "closed"
    assert "return a + b" in f.file("calc/ops.py")
    assert "Final state: merged." in f.progress(number)
    assert outcome.factory.approved_heads == [waiting.head_sha] == [merged["head"]["sha"]]
    states = sorted((r["user"]["login"], r["state"]) for r in f.get(f"/pulls/{pr['number']}/reviews"))
    assert states == [("bob", "APPROVED"), ("maria", "APPROVED"), ("shopfloor[bot]", "COMMENTED")], states
    assert outcome.commands_accepted == 0  # no command: the review alone approved


# -- 5. stop and close mid-pipeline ----------------------------------------------------------------


async def test_stop_and_close_mid_pipeline_cancel_without_merging(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        stopped = f.open_issue(*ISSUE)
        stopped_handle = f.handle
        closed = f.open_issue("add() is wrong too", "add(1, 1) returns 0.")
        closed_handle = f.handle
        f.handle = stopped_handle
        await f.state_when(lambda s: s.waiting_for == "approval", "the first run's approval wait")
        f.handle = closed_handle
        await f.state_when(lambda s: s.waiting_for == "approval", "the second run's approval wait")
        f.comment(stopped, "/shopfloor stop", "maria")
        resp = f.gh("bob").patch(f"/repos/{f.repo}/issues/{closed}", json={"state": "closed"})
        assert resp.status_code == 200, resp.text
        f.handle = stopped_handle
        by_stop = await finished(f)
        f.handle = closed_handle
        by_close = await finished(f)
    assert by_stop.state == "stopped" and by_stop.stopped_by == "maria", by_stop
    assert by_stop.factory.result == "cancelled" and by_stop.factory.reason == "stopped by @maria", by_stop
    assert by_close.state == "closed" and by_close.factory.result == "cancelled", by_close
    assert by_close.factory.reason == "the issue was closed", by_close
    for number, why in ((stopped, "stopped by @maria"), (closed, "the issue was closed")):
        body = f.progress(number)
        assert "Final state: cancelled" in body and why in body, body
        pr = the_pr(f, number)
        assert not pr["merged"], pr
    assert f.get(f"/issues/{stopped}")["state"] == "open"
    assert f.get(f"/issues/{closed}")["state"] == "closed"
    assert "return a - b" in f.file("calc/ops.py")  # nothing merged


# -- 6. auto_fix: label ----------------------------------------------------------------------------

LABEL_POLICY = POLICY.replace("auto_fix: always", "auto_fix: label")


async def test_auto_fix_label_parks_without_the_label_and_the_label_resumes_it(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS, LABEL_POLICY) as f:
        number = f.open_issue(*ISSUE)
        parked = await f.state_when(lambda s: s.result == "parked", "the policy gate to park the run")
        assert parked.waiting_for == "fix_command" and parked.fix_round == 0, parked
        assert parked.reason == "auto_fix is label and the issue has no `shopfloor` label", parked
        body = await f.progress_when(number, "Final state: waiting for a human")
        assert "comment `/shopfloor fix`" in body and "has no `shopfloor` label" in body, body
        assert f.get("/pulls", state="all") == []
        resp = f.gh("maria").post(f"/repos/{f.repo}/issues/{number}/labels", json={"labels": ["shopfloor"]})
        assert resp.status_code == 200, resp.text
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome)
    assert "shopfloor" in [x["name"] for x in f.get(f"/issues/{number}")["labels"]]


async def test_auto_fix_label_with_the_label_on_the_issue_goes_on_to_a_fix(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS, LABEL_POLICY) as f:
        resp = f.gh("maria").post(
            f"/repos/{f.repo}/issues", json={"title": ISSUE[0], "body": ISSUE[1], "labels": ["shopfloor"]}
        )
        assert resp.status_code == 201, resp.text
        number = resp.json()["number"]
        f.handle = f.client.get_workflow_handle(issue_workflow_id(f.repo, number))
        passed = await f.state_when(lambda s: s.fix_round >= 1 or s.result != "", "the policy gate")
        assert passed.result == "" and passed.fix_round == 1, passed
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome)
    assert outcome.commands_accepted == 1  # the approval only: no `/shopfloor fix` was needed


# -- 7. pause and resume ---------------------------------------------------------------------------


async def test_pause_holds_the_rounds_and_the_merge_until_resume(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        number = f.open_issue(*ISSUE)
        # Paused while triage runs: the rounds wait before their next step (whichever it is).
        f.comment(number, "/shopfloor pause", "maria")
        paused = await f.state_when(lambda s: s.waiting_for == "resume", "the rounds to wait for resume")
        assert paused.result == "" and paused.merged_sha is None, paused
        assert (await f.handle.query("inbox", result_type=InboxSummary)).paused
        await f.progress_when(number, "**Waiting** for someone to resume the run: comment `/shopfloor resume`")
        f.comment(number, "/shopfloor resume", "maria")
        # Paused again while waiting for the approval: an approval given meanwhile must not merge.
        waiting = await f.state_when(lambda s: s.waiting_for == "approval", "the approval wait")
        f.comment(number, "/shopfloor pause", "maria")
        await inbox_when(f, lambda i: i.paused, "the second pause")
        f.comment(number, "/shopfloor approve", "maria")
        held = await f.state_when(lambda s: s.waiting_for == "resume" or s.result != "", "the merge to wait for resume")
        assert held.approved_heads == [waiting.head_sha] and held.merged_sha is None, held
        assert not the_pr(f, number)["merged"]
        await f.progress_when(number, "**Waiting** for someone to resume the run")
        f.comment(number, "/shopfloor resume", "maria")
        outcome = await finished(f)
    assert_merged(f, number, outcome)
    assert outcome.commands_accepted == 5  # pause, resume, pause, approve, resume
