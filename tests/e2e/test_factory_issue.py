"""The factory end to end: people act on the GitHub simulator, its signed webhooks reach
the real webhook edge, the edge signal-with-starts IssueWorkflow, and a worker with scripted
models triages, fixes, opens the PR, waits for the simulator's CI, reviews and merges.

Each test asserts the final GitHub state (issue, labels, the one PR, its reviews, comments, the
merge on main, exactly one progress comment in its final state) and the workflow's outcome.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_runs import call, record_history
from factory_runs import (
    APPROVE,
    CI_CMD,
    FIX,
    POLICY,
    TEST_CMD,
    TRIAGE,
    TRIAGE_TURNS,
    Factory,
    approve_and_finish,
    assert_merged,
    factory,
    fix_turns,
)
from waiting import DEADLINE_S

from shopfloor.models.factory_run import FactoryState
from shopfloor.models.github_ops import comment_marker
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.models.merge_verify import MAIN_CI_KIND, MergeVerifyOutcome, merge_verify_workflow_id


async def test_bug_issue_becomes_a_merged_fix(simulator, settings, running_worker, temporal_client, tmp_path):
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        await record_history(f.handle, "issue-factory-merged")
        # What the Temporal UI shows: every timer says what it waits for; the runs say what they are.
        timers = [
            e.user_metadata.summary.data.decode()
            async for e in f.handle.fetch_history_events()
            if e.HasField("timer_started_event_attributes")
        ]
        fix = temporal_client.get_workflow_handle(f"{f.handle.id}/fix-1")
        fix_details = await (await fix.describe()).static_details()
        issue_details = await (await f.handle.describe()).static_details()
    pr = assert_merged(f, number, outcome)
    assert outcome.factory.fix_round == 1 and outcome.factory.review_round == 1
    assert outcome.factory.approved_heads == [pr["head"]["sha"]]
    assert outcome.factory.children == [f"{f.handle.id}/triage", f"{f.handle.id}/fix-1", f"{f.handle.id}/review-1"]
    assert timers and all(t.strip() for t in timers), timers  # a summary, JSON-encoded, on each
    assert fix_details and "**fix** agent, round 1" in fix_details and "- model: `scripted:" in fix_details
    assert issue_details and "triage → policy → fix" in issue_details


async def test_ci_fails_on_the_first_push_then_a_second_round_is_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    wrong = {"path": "calc/ops.py", "old": "return a - b", "new": "return b - a"}  # still wrong
    fix = [
        *fix_turns(wrong),  # round 1: CI fails
        {"tool_calls": [call("edit_file", path="calc/ops.py", old="return b - a", new="return a + b")]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    # One cassette serves both fix rounds: round 2 continues where round 1's turns end.
    models["fix-2"] = fix[4:]
    models["fix"] = fix[:4]
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
    pr = assert_merged(f, number, outcome)
    assert outcome.factory.fix_round == 2 and outcome.factory.review_round == 1
    runs = f.get(f"/commits/{pr['head']['sha']}/check-runs")["check_runs"]
    assert [(r["name"], r["conclusion"]) for r in runs] == [("ci", "success")]


async def test_review_requests_changes_once_then_round_two_is_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    changes = {
        "verdict": "request_changes",
        "summary": "Please also cover negative numbers in the tests.",
        "comments": [{"path": "calc/ops.py", "line": 2, "body": "Fine, but add a test."}],
    }
    add_test = {
        "path": "tests/test_ops.py",
        "old": "assert add(2, 3) == 5",
        "new": "assert add(2, 3) == 5\n    assert add(-1, -1) == -2",
    }
    models = {
        "triage": TRIAGE_TURNS,
        "fix": fix_turns(),
        "fix-2": [
            {"tool_calls": [call("edit_file", **add_test)]},
            {"tool_calls": [call("run_command", command=TEST_CMD)]},
            {"tool_calls": [call("submit", **FIX)]},
        ],
        "review": [{"tool_calls": [call("submit", **changes)]}],
        "review-2": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome, reviews=2)
    assert outcome.factory.fix_round == 2 and outcome.factory.review_round == 2
    assert "add(-1, -1) == -2" in f.file("tests/test_ops.py")
    bodies = [r["body"] for r in f.get(f"/pulls/{f.get('/pulls', state='all')[0]['number']}/reviews")]
    assert "request changes" in bodies[0] and "approve" in bodies[1]


async def test_steps_run_out_mid_fix_salvages_a_draft_pr(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY + "budgets:\n  max_steps:\n    fix: 2\n"
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns()}  # step 3 (the tests) never comes
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.result != "", "the run to end")
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=30))
    assert outcome.state == "done" and outcome.factory.result == "salvaged", outcome
    prs = f.get("/pulls", state="all")
    assert len(prs) == 1 and prs[0]["draft"] is True and prs[0]["state"] == "open", prs
    assert "Salvaged by shopfloor" in prs[0]["body"] and "limit_reached" in prs[0]["body"]
    assert "return a + b" in f.file("calc/ops.py", ref=f"shopfloor/issue-{number}")
    assert "return a - b" in f.file("calc/ops.py")  # main untouched
    progress = f.progress_comments(number)
    assert len(progress) == 1 and "Final state: salvaged" in progress[0]["body"], progress
    assert f.get(f"/issues/{number}")["state"] == "open"


async def test_low_fixability_feature_is_parked_until_a_maintainer_asks(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    feature = {**TRIAGE, "kind": "feature", "labels": ["enhancement"], "fixability": 0.3}
    models = {
        "triage": [{"tool_calls": [call("submit", **feature)]}],
        "fix": fix_turns(),
        "review": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("Make add() add", "It would be nice if add() added.")
        parked = await f.state_when(lambda s: s.result == "parked", "the policy gate to park the run")
        assert parked.waiting_for == "fix_command" and "below the threshold" in parked.reason
        await f.progress_when(number, "waiting for a human")  # the query runs ahead of the comment's upsert
        progress = f.progress_comments(number)
        assert len(progress) == 1 and "waiting for a human" in progress[0]["body"]
        labels = [label["name"] for label in f.get(f"/issues/{number}")["labels"]]
        assert "enhancement" in labels
        f.comment(number, "/shopfloor fix", "bob")  # a non-member: refused with one reply
        await asyncio.sleep(2)
        assert (await f.handle.query("factory", result_type=FactoryState)).result == "parked"
        f.comment(number, "/shopfloor fix", "maria")
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome, label="enhancement")
    refusals = [c for c in f.get(f"/issues/{number}/comments") if "needs write access" in c["body"]]
    assert len(refusals) == 1 and "@bob" in refusals[0]["body"]
    assert outcome.commands_refused == 1


async def test_without_a_real_model_an_issue_is_left_for_a_person_saying_why(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """`shopfloor dev` with no model configured: triage runs the built-in no-model script, which
    says on the issue that nobody read it and how to configure a model; the run parks instead of
    failing on the explore agent's script ("cassette explore-demo has 4 turns ...")."""
    from shopfloor.cli.dev import with_no_model_triage

    assert settings.model == "scripted:explore-demo"  # the default: no real model
    as_dev = with_no_model_triage(settings.model_copy(update={"agent_models": {}}))  # what `shopfloor dev` runs
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, models={}, agent_models=as_dev.agent_models
    ) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        parked = await f.state_when(lambda s: s.result in ("parked", "failed"), "triage to end")
        body = await f.progress_when(number, "not triaged: no real model is configured")
    assert parked.result == "parked" and parked.reason.startswith("not triaged: no real model"), parked
    assert "SHOPFLOOR_MODEL" in body and "explore-demo has" not in body and "fixability" not in parked.reason
    assert f.get("/pulls", state="all") == []


# CI that passes on the fix's pull request but fails on the squash commit it becomes on main
# (its title ends with `(#<pr>)`): a merge that turns the default branch red.
RED_ON_MAIN = f"{CI_CMD} && ! git log -1 --format=%s | grep -q '(#[0-9]*)$'"


RED_MODELS = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
RED_REPO: dict[str, Any] = {"ci_command": RED_ON_MAIN, "ci_on_default_branch": True}


async def merged_into_red_main(f: Factory) -> tuple[int, dict[str, Any], str, Any, MergeVerifyOutcome]:
    """Open the issue, approve and merge its fix, and wait for the verification of the merge
    commit: (issue, pull request, merge sha, the verification's handle, its outcome)."""
    number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
    outcome = await approve_and_finish(f, number)
    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    (pr,) = f.get("/pulls", state="all")
    sha = f.get(f"/pulls/{pr['number']}")["merge_commit_sha"]
    verify = f.client.get_workflow_handle(merge_verify_workflow_id(f.repo, number, sha))
    verified = MergeVerifyOutcome.model_validate(await asyncio.wait_for(verify.result(), timeout=DEADLINE_S))
    return number, pr, sha, verify, verified


async def test_a_merge_that_turns_the_default_branch_red_reopens_the_issue_naming_the_check(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, RED_MODELS, **RED_REPO) as f:
        number, pr, sha, verify, verified = await merged_into_red_main(f)
        queried = await verify.query("merge_verify", result_type=MergeVerifyOutcome)
        await record_history(f.handle, "issue-merged-then-verified")
        await record_history(verify, "merge-verify-default-branch-red")
    # The pull request's own CI was green; main's is red after the squash.
    assert [(r["name"], r["conclusion"]) for r in f.get(f"/commits/{pr['head']['sha']}/check-runs")["check_runs"]] == [
        ("ci", "success")
    ]
    assert [(r["name"], r["conclusion"]) for r in f.get(f"/commits/{sha}/check-runs")["check_runs"]] == [
        ("ci", "failure")
    ]
    assert (verified.state, verified.failing, verified.reopened, verified.reported) == ("failure", ["ci"], True, True)
    assert (queried.state, queried.failing, queried.sha) == ("failure", ["ci"], sha), queried
    issue = f.get(f"/issues/{number}")
    assert issue["state"] == "open", issue  # reopened: the fix broke the default branch
    marker = comment_marker(verify.id, MAIN_CI_KIND)
    (report,) = [c for c in f.get(f"/issues/{number}/comments") if marker in c["body"]]
    assert "**CI failed** on `main`" in report["body"] and "Failing: `ci`." in report["body"], report["body"]
    assert f"(commit `{sha[:12]}`)" in report["body"] and "reopened this issue" in report["body"]
    assert report["user"]["login"] == "shopfloor[bot]"
    assert "return a + b" in f.file("calc/ops.py")  # the merge was not reverted


async def test_a_policy_that_asks_for_it_gets_a_pull_request_reverting_the_red_merge(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = POLICY + "revert_on_red_default_branch: true\n"
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, RED_MODELS, policy, **RED_REPO
    ) as f:
        number, pr, sha, verify, verified = await merged_into_red_main(f)
        await record_history(verify, "merge-verify-red-reverted")
        revert = f.get(f"/pulls/{verified.revert_pr}") if verified.revert_pr else None
        files = f.get(f"/pulls/{verified.revert_pr}/files") if verified.revert_pr else []
    assert (verified.state, verified.reopened, verified.reported) == ("failure", True, True), verified
    assert revert is not None and revert["base"]["ref"] == "main" and revert["merged"] is False, revert
    assert revert["head"]["ref"] == f"shopfloor/revert-{number}-{sha[:12]}"
    assert revert["title"] == f"Revert #{pr['number']}: CI failed on main"
    # The revert undoes exactly the fix; nothing was pushed to main (the fix is still there).
    assert [x["filename"] for x in files] == ["calc/ops.py"]
    assert "-    return a + b" in files[0]["patch"] and "+    return a - b" in files[0]["patch"], files[0]["patch"]
    assert "return a + b" in f.file("calc/ops.py")
    marker = comment_marker(verify.id, MAIN_CI_KIND)
    (report,) = [c for c in f.get(f"/issues/{number}/comments") if marker in c["body"]]
    assert f"#{verified.revert_pr} reverts the merge" in report["body"], report["body"]
