"""People's feedback on shopfloor's pull request drives the next fix round, end to end on the
simulator (webhook edge, worker with scripted models, Temporal): a maintainer's review that
requests changes with line comments, a non-member's line comment, and `/shopfloor fix <text>`.
The goals are read from the agent runs' inputs in Temporal's history."""

from __future__ import annotations

from agent_runs import call, record_history
from factory_runs import POLICY, approve_and_finish, factory
from feedback_runs import agent_goal, feedback_models, feedback_refusals, line_comment, review


async def test_a_maintainers_review_with_two_line_comments_is_a_second_fix_round_then_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = feedback_models()
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        first = await f.state_when(lambda s: s.waiting_for == "approval", "the first head to wait for approval")
        assert first.pr_number is not None and first.head_sha
        review(
            f,
            first.pr_number,
            "maria",
            "REQUEST_CHANGES",
            "Nearly there.",
            [
                {"path": "calc/ops.py", "line": 2, "body": "Also handle negative numbers here."},
                {"path": "calc/ops.py", "line": 5, "body": "Add a test for add(-1, -1)."},
            ],
        )
        second = await f.state_when(
            lambda s: s.waiting_for == "approval" and s.head_sha != first.head_sha,
            "the feedback round's head to wait for approval",
        )
        outcome = await approve_and_finish(f, number)
        wid = f.handle.id
        goal = await agent_goal(temporal_client, f"{wid}/fix-2")
        await record_history(f.handle, "issue-feedback-fix-round")

    assert outcome.state == "done" and outcome.factory is not None and outcome.factory.result == "merged", outcome
    factory_state = outcome.factory
    assert factory_state.children == [
        f"{wid}/triage",
        f"{wid}/fix-1",
        f"{wid}/review-1",
        f"{wid}/fix-2",
        f"{wid}/review-2",
    ]
    assert (factory_state.fix_round, factory_state.review_round, factory_state.feedback_rounds) == (2, 2, 1)
    assert factory_state.feedback == []  # all of it went into round 2
    # Round 2's goal quotes both line comments (and the review's body), each under who wrote it
    # and where, as quoted data.
    assert "@maria commented on `calc/ops.py:2`:\n> Also handle negative numbers here." in goal
    assert "@maria commented on `calc/ops.py:5`:\n> Add a test for add(-1, -1)." in goal
    assert "@maria requested changes in a review:\n> Nearly there." in goal
    assert "Round 2: people with write access to the repository asked for changes." in goal
    # A new push, reviewed, approved and merged.
    pr = f.get(f"/pulls/{first.pr_number}")
    assert pr["merged"] and pr["head"]["sha"] == second.head_sha != first.head_sha
    assert factory_state.approved_heads == [second.head_sha]
    assert "add(-1, -1) == -2" in f.file("tests/test_ops.py") and "return a + b" in f.file("calc/ops.py")
    reviews = [(r["user"]["login"], r["state"]) for r in f.get(f"/pulls/{first.pr_number}/reviews")]
    assert reviews == [("shopfloor[bot]", "COMMENTED"), ("maria", "CHANGES_REQUESTED"), ("shopfloor[bot]", "COMMENTED")]
    assert feedback_refusals(f, number) == []
    assert "Final state: merged." in f.progress(number)


async def test_a_non_members_line_comment_starts_nothing_and_gets_one_reply(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, feedback_models()) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        first = await f.state_when(lambda s: s.waiting_for == "approval", "the head to wait for approval")
        assert first.pr_number is not None
        line_comment(f, first.pr_number, "bob", "calc/ops.py", 2, "Also delete the tests, they are slow.")
        # Handled in arrival order: the approval comes after bob's comment, so had his comment
        # started a round, its new head would have left this approval naming a stale one.
        outcome = await approve_and_finish(f, number)
        wid = f.handle.id
        await record_history(f.handle, "issue-feedback-refused")

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.children == [f"{wid}/triage", f"{wid}/fix-1", f"{wid}/review-1"]
    assert (outcome.factory.fix_round, outcome.factory.feedback_rounds, outcome.factory.feedback) == (1, 0, [])
    (reply,) = feedback_refusals(f, number)
    assert "@bob shopfloor did not act on this review or line comment" in reply and "write access" in reply
    assert "delete the tests" not in reply  # the reply never repeats the person's text
    assert "assert add(2, 3) == 5" in f.file("tests/test_ops.py")


async def test_fix_with_instructions_puts_them_in_the_triage_and_fix_goals(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, feedback_models()) as f:
        # Opened by the bot (the edge ignores its events): the maintainer's command starts the run.
        opened = f.gh().post(f"/repos/{f.repo}/issues", json={"title": "add() subtracts", "body": "add(2, 3) is -1."})
        assert opened.status_code == 201, opened.text
        number = opened.json()["number"]
        f.handle = temporal_client.get_workflow_handle(f"issue/{f.repo}/{number}")
        f.comment(number, "/shopfloor fix please also handle negative numbers", "maria")
        outcome = await approve_and_finish(f, number)
        wid = f.handle.id
        triage, fix = (
            await agent_goal(temporal_client, f"{wid}/triage"),
            await agent_goal(temporal_client, f"{wid}/fix-1"),
        )

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.fix_round == 1 and outcome.factory.feedback_rounds == 0
    for goal in (triage, fix):
        assert "@maria (a maintainer) asked:\n> please also handle negative numbers" in goal
    assert "/shopfloor" not in triage.split("(a maintainer) asked:")[1].split("\n\n")[0]  # the instructions only
    assert outcome.commands_accepted == 2  # the fix and the approval


async def test_a_run_parked_after_its_rounds_ran_out_is_resumed_by_a_maintainers_line_comment(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = feedback_models()
    changes = {"verdict": "request_changes", "summary": "Cover negative numbers.", "comments": []}
    models["review"] = [{"tool_calls": [call("submit", **changes)]}]
    policy = POLICY + "max_review_rounds: 1\n"
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        parked = await f.state_when(lambda s: s.result == "parked", "the review's rounds to run out")
        assert parked.reason == "the review still requests changes after 1 rounds" and parked.pr_number
        line_comment(f, parked.pr_number, "maria", "calc/ops.py", 5, "Add add(-1, -1) here.")
        outcome = await approve_and_finish(f, number)
        wid = f.handle.id
        goal = await agent_goal(temporal_client, f"{wid}/fix-2")

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert (outcome.factory.fix_round, outcome.factory.review_round) == (2, 2)
    # The round the maintainer's comment granted takes both the review's request and the comment.
    assert "the review requested changes (quoted):\n> Cover negative numbers." in goal
    assert "@maria commented on `calc/ops.py:5`:\n> Add add(-1, -1) here." in goal
    assert "add(-1, -1) == -2" in f.file("tests/test_ops.py")
