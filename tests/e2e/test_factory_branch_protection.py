"""The factory against a protected default branch, as on github.com.

- A check the branch requires holds the merge even when every check that did report is green:
  the run waits at CI, and goes on once the required check reports.
- A rule shopfloor cannot satisfy itself (an approving review by a writer) refuses the merge;
  the run parks with GitHub's reason on its progress comment, and nothing is merged.
- A push GitHub refuses for the App's permissions (a workflow file) ends the run saying why.

Both need the simulator's branch protection (before it, `PUT …/protection` answered 405).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_runs import call
from factory_runs import APPROVE, TRIAGE_TURNS, Factory, approve_and_finish, assert_merged, factory, fix_turns
from waiting import DEADLINE_S

MODELS = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}


def protect(f: Factory, **rules: Any) -> None:
    body = {
        "required_status_checks": None,
        "enforce_admins": False,
        "required_pull_request_reviews": None,
        "restrictions": None,
        **rules,
    }
    resp = f.gh("acme").put(f"/repos/{f.repo}/branches/main/protection", json=body)
    assert resp.status_code == 200, resp.text


async def test_the_run_waits_for_a_required_check_that_ci_did_not_report(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        protect(f, required_status_checks={"strict": False, "contexts": ["ci", "deploy-preview"]})
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        state = await f.state_when(lambda s: s.pr_number is not None and s.head_sha is not None, "the pull request")
        head = state.head_sha
        assert head is not None

        async def ci_done() -> bool:
            runs = f.get(f"/commits/{head}/check-runs")["check_runs"]
            return [(r["name"], r["conclusion"]) for r in runs] == [("ci", "success")]

        while not await ci_done():
            await asyncio.sleep(0.2)
        f.sim.wait_idle()  # the check_run events are delivered
        seen = len(f.sim.requests())

        def read_again() -> bool:  # shopfloor read CI's state after the check run completed
            later = f.sim.requests()[seen:]
            return any(r["method"] == "GET" and r["path"].endswith(f"/commits/{head}/status") for r in later)

        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while not read_again():
            now = await f.state_when(lambda s: True, "the state")
            assert now.review_round == 0 and now.waiting_for in (None, "ci"), f"the run went past CI: {now}"
            assert asyncio.get_running_loop().time() < deadline, "shopfloor never read CI again"
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # let the workflow act on that read, if it were going to
        state = await f.state_when(lambda s: True, "the state")
        assert (state.waiting_for, state.ci_state, state.review_round) == ("ci", "pending", 0), state

        f.gh("maria").post(
            f"/repos/{f.repo}/statuses/{head}", json={"state": "success", "context": "deploy-preview"}
        ).raise_for_status()
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome)


async def test_a_merge_the_branch_rules_refuse_parks_with_githubs_reason(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, MODELS) as f:
        protect(f, required_pull_request_reviews={"required_approving_review_count": 1})
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.waiting_for == "approval", "the merge stage to wait for approval")
        f.comment(number, "/shopfloor approve", "maria")  # shopfloor's approval; GitHub wants a review
        parked = await f.state_when(lambda s: s.result == "parked", "the refused merge to park the run")
        body = await f.progress_when(number, "At least 1 approving review is required")
    assert parked.reason.startswith("the merge was refused") and "approving review" in parked.reason
    assert "At least 1 approving review is required by reviewers with write access" in body
    (pr,) = f.get("/pulls", state="all")
    assert pr["state"] == "open" and not f.get(f"/pulls/{pr['number']}")["merged"]
    assert "return a - b" in f.file("calc/ops.py")  # main untouched


async def test_a_workflow_change_the_app_may_not_push_ends_the_run_saying_why(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """A repository that unprotects `.github` lets its fix touch CI; GitHub refuses the bot's push
    (the App has no `workflows` permission), and the progress comment says so in plain words.
    On the old simulator the push landed."""
    from factory_runs import FIX, GOOD_EDIT, POLICY, TEST_CMD

    fix = [
        {"tool_calls": [call("edit_file", **GOOD_EDIT)]},
        {"tool_calls": [call("write_file", path=".github/workflows/ci.yml", content="on: push\njobs: {}\n")]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix}
    policy = POLICY + "protected_paths: ['/CODEOWNERS']\n"
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        ended = await f.state_when(lambda s: s.result != "", "the run to end")
        body = await f.progress_when(number, "lacks the Workflows permission")
    assert ended.result == "failed", ended
    assert "GitHub refused the push to 'shopfloor/issue-1' because it changes the workflow file" in body
    branches = [b["name"] for b in f.get("/branches")]
    assert "shopfloor/issue-1" not in branches and f.get("/pulls", state="all") == []
