"""PullRequestWorkflow end to end: a person's pull request on the GitHub simulator is
reviewed by a scripted review agent and, where the repository's policy allows, merged.

Each test asserts the final GitHub state (the pull request, its reviews and comments, main, the
author's branch) and the workflow's outcome.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
from agent_runs import call, record_history
from factory_runs import APPROVE, POLICY, TEST_CMD, Factory, factory
from temporalio.client import WorkflowHandle
from waiting import DEADLINE_S, query_until

from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import pr_workflow_id
from shopfloor.models.inbox_state import InboxSummary, PullRequestInboxInput, PullRequestOutcome

MERGING = POLICY + "pull_requests:\n  review: members\n  merge: true\n"
FIXED_OPS = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
REVIEW_TURNS = [
    {"tool_calls": [call("read_file", path="calc/ops.py")]},
    {"tool_calls": [call("run_tests", command=TEST_CMD)]},
    {"tool_calls": [call("submit", **APPROVE)]},
]
CHANGES = {
    "verdict": "request_changes",
    "summary": "mul() now adds; the tests fail.",
    "comments": [{"path": "calc/ops.py", "line": 6, "body": "This should stay `a * b`."}],
}


def open_person_pr(
    f: Factory, author: str, branch: str, ops: str, *, pusher: str | None = None, draft: bool = False
) -> tuple[int, str]:
    """`pusher` (default: the author) makes `branch` from main with `ops` as calc/ops.py; `author`
    opens the pull request (a draft with `draft`). Returns (number, head sha)."""
    gh = f.gh(pusher or author)
    main = f.get("/branches/main")["commit"]["sha"]
    assert gh.post(f"/repos/{f.repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main}).status_code == 201
    push_ops(f, pusher or author, branch, ops)
    resp = f.gh(author).post(
        f"/repos/{f.repo}/pulls",
        json={
            "title": "Make add() add",
            "head": branch,
            "base": "main",
            "body": "add(2, 3) returned -1.",
            "draft": draft,
        },
    )
    assert resp.status_code == 201, resp.text
    pr = resp.json()
    return pr["number"], pr["head"]["sha"]


def push_ops(f: Factory, login: str, branch: str, ops: str) -> str:
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


async def pr_state_when(handle: WorkflowHandle, ok, what: str) -> FactoryState:
    return await query_until(handle, "factory", FactoryState, ok, what)


async def accepted(handle: WorkflowHandle, name: str, sender: str) -> None:
    ok = lambda inbox: any(r.name == name and r.sender == sender for r in inbox.commands_accepted)  # noqa: E731
    await query_until(handle, "inbox", InboxSummary, ok, f"/shopfloor {name} by {sender} to be accepted")


def bot_comments(f: Factory, number: int) -> list[dict[str, Any]]:
    return [c for c in f.get(f"/issues/{number}/comments") if "<!-- shopfloor:" in c["body"]]


async def test_members_pull_request_is_reviewed_approved_by_a_maintainer_and_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"review": REVIEW_TURNS}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, MERGING) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/fix-add", FIXED_OPS)
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(handle, lambda s: s.waiting_for == "approval", "the merge to wait for approval")
        # The author's own approval is not the second pair of eyes the policy asks for.
        f.comment(number, "/shopfloor approve", "carol")
        await accepted(handle, "approve", "carol")
        state = await handle.query("factory", result_type=FactoryState)
        assert state.approved_heads == [] and state.waiting_for == "approval"
        resp = f.gh("maria").post(
            f"/repos/{f.repo}/pulls/{number}/reviews", json={"event": "APPROVE", "commit_id": head}
        )
        assert resp.status_code == 200, resp.text
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))
        await record_history(handle, "pr-reviewed-approved-merged")

    assert outcome.state == "done" and outcome.factory is not None, outcome
    assert outcome.factory.result == "merged" and outcome.factory.approved_heads == [head]
    assert outcome.factory.children == [f"{handle.id}/review-1"]
    pr = f.get(f"/pulls/{number}")
    assert pr["merged"] and pr["merge_commit_sha"] == outcome.factory.merged_sha
    assert "return a + b" in f.file("calc/ops.py")
    assert "carol/fix-add" in [b["name"] for b in f.get("/branches")]  # a person's branch is theirs
    reviews = f.get(f"/pulls/{number}/reviews")
    bot = [r for r in reviews if r["user"]["login"] != "maria"]
    assert len(bot) == 1 and bot[0]["state"] == "COMMENTED" and bot[0]["commit_id"] == head
    progress = [c for c in bot_comments(f, number) if ":progress -->" in c["body"]]
    assert len(progress) == 1 and "Final state: merged." in progress[0]["body"], progress


async def test_strangers_pull_request_waits_for_a_maintainer_then_is_reviewed_per_push_until_closed(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    broken = FIXED_OPS.replace("return a * b", "return a + b")  # add() fixed, mul() broken
    models = {
        "review": [
            {"tool_calls": [call("run_tests", command=TEST_CMD)]},
            {"tool_calls": [call("submit", **CHANGES)]},
        ],
        "review-2": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, MERGING) as f:
        number, head = open_person_pr(f, "eve", "eve-patch", broken, pusher="maria")
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(
            handle,
            lambda s: s.head_sha == head and s.waiting_for == "review_command",
            "the run to decide not to review a stranger's PR",
        )
        assert bot_comments(f, number) == [] and f.get(f"/pulls/{number}/reviews") == []

        f.comment(number, "/shopfloor review", "eve")  # refused: eve has no write access
        f.comment(number, "/shopfloor review", "maria")
        state = await pr_state_when(handle, lambda s: s.verdict == "request_changes", "the first review")
        assert state.verdict_head == head and state.review_round == 1
        reviews = f.get(f"/pulls/{number}/reviews")
        assert len(reviews) == 1 and reviews[0]["state"] == "COMMENTED" and "request changes" in reviews[0]["body"]
        lines = f.get(f"/pulls/{number}/comments")
        assert [(c["path"], c["line"]) for c in lines] == [("calc/ops.py", 6)]

        # A new push is not reviewed by itself (the author is a stranger); a maintainer asks again.
        head2 = push_ops(f, "maria", "eve-patch", FIXED_OPS)
        await pr_state_when(handle, lambda s: s.head_sha == head2, "the push to be seen")
        f.comment(number, "/shopfloor review", "maria")
        state = await pr_state_when(handle, lambda s: s.verdict == "approve" and s.verdict_head == head2, "review 2")
        f.comment(number, "/shopfloor approve", "maria")
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert outcome.factory.children == [f"{handle.id}/review-1", f"{handle.id}/review-2"]
    assert outcome.commands_refused == 1
    refusals = [c for c in bot_comments(f, number) if ":refused-" in c["body"]]
    assert len(refusals) == 1 and "needs write access" in refusals[0]["body"]
    assert len(f.get(f"/pulls/{number}/reviews")) == 2
    assert f.file("calc/ops.py") == FIXED_OPS


async def test_review_only_policy_never_merges_and_the_run_ends_when_the_pull_request_closes(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/fix", FIXED_OPS)
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(handle, lambda s: s.verdict == "approve" and s.waiting_for == "push", "the review")
        f.comment(number, "/shopfloor approve", "maria")  # approval alone never merges under merge: false
        await pr_state_when(handle, lambda s: s.approved_heads == [head], "the approval to be recorded")
        resp = f.gh("carol").patch(f"/repos/{f.repo}/pulls/{number}", json={"state": "closed"})
        assert resp.status_code == 200, resp.text
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))

    assert outcome.state == "closed" and outcome.factory is not None and outcome.factory.result == "closed"
    pr = f.get(f"/pulls/{number}")
    assert not pr["merged"] and "return a - b" in f.file("calc/ops.py")
    progress = [c for c in bot_comments(f, number) if ":progress -->" in c["body"]]
    assert len(progress) == 1 and "Final state: closed." in progress[0]["body"], progress


async def test_a_review_with_comments_off_the_diff_is_posted_with_them_in_its_body(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """The reviewer's model chose an unchanged line outside the diff's hunk (line 6: the change is
    on line 2), a line past the end of the file and a file the pull request does not change.
    GitHub (and now the simulator) refuse a whole review with such a comment; the old simulator
    took it, so the review failed only on GitHub, until those comments went into its body."""
    off_diff = {
        **CHANGES,
        "comments": [
            {"path": "calc/ops.py", "line": 2, "body": "Right: `a + b`."},
            *CHANGES["comments"],
            {"path": "calc/ops.py", "line": 999, "body": "Past the end of the file."},
            {"path": "README.md", "line": 1, "body": "Mention the fix here."},
        ],
    }
    models = {"review": [{"tool_calls": [call("submit", **off_diff)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, _ = open_person_pr(f, "carol", "carol/fix", FIXED_OPS)
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(handle, lambda s: s.verdict == "request_changes" and s.waiting_for == "push", "the review")
        (review,) = f.get(f"/pulls/{number}/reviews")
        inline = f.get(f"/pulls/{number}/comments")
        f.gh("carol").patch(f"/repos/{f.repo}/pulls/{number}", json={"state": "closed"})

    assert "review (round 1): request changes" in review["body"]
    assert [(c["path"], c["line"], c["body"]) for c in inline] == [("calc/ops.py", 2, "Right: `a + b`.")]
    assert inline[0]["diff_hunk"].startswith("@@")
    assert "outside this pull request's diff" in review["body"]
    assert "ops.py ` line 6:\n\nThis should stay `a * b`." in review["body"]
    assert "line 999:\n\nPast the end of the file." in review["body"]
    assert "README.md ` line 1:\n\nMention the fix here." in review["body"]


async def test_the_review_run_is_carried_across_continue_as_new(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {
        "review": [{"tool_calls": [call("submit", **CHANGES)]}],
        "review-2": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        # The run exists before the webhook (the PR will be #1) and continues as new every 3 events.
        handle = await temporal_client.start_workflow(
            "PullRequestWorkflow",
            PullRequestInboxInput(repo=f.repo, number=1, continue_after_events=3),
            id=pr_workflow_id(f.repo, 1),
            task_queue=settings.task_queue,
        )
        number, head = open_person_pr(f, "carol", "carol/fix", FIXED_OPS)
        assert number == 1
        await pr_state_when(handle, lambda s: s.verdict == "request_changes" and s.waiting_for == "push", "review 1")
        for i in range(3):  # events that change nothing: the run continues as new between reviews
            f.comment(number, f"thinking about it ({i})", "carol")
        await query_until(handle, "inbox", InboxSummary, lambda s: s.runs >= 1 and s.events_seen >= 2, "a new run")
        f.comment(number, "/shopfloor review", "maria")
        state = await pr_state_when(handle, lambda s: s.verdict == "approve" and s.waiting_for == "push", "review 2")
        inbox = await handle.query("inbox", result_type=InboxSummary)

    assert inbox.runs >= 1 and state.review_round == 2 and state.verdict_head == head
    assert state.children == [f"{handle.id}/review-1", f"{handle.id}/review-2"]  # carried, not restarted
    reviews = f.get(f"/pulls/{number}/reviews")
    assert len(reviews) == 2 and "review (round 1): request changes" in reviews[0]["body"]
    assert "review (round 2): approve" in reviews[1]["body"]
    progress = [c for c in bot_comments(f, number) if ":progress -->" in c["body"]]
    assert len(progress) == 1, progress  # the same comment, updated in place by both runs


async def test_a_members_pushes_are_reviewed_again_until_the_automatic_reviews_are_used_up(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {
        "review": [{"tool_calls": [call("submit", **CHANGES)]}],
        "review-2": [{"tool_calls": [call("submit", **CHANGES)]}],
        "review-3": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    policy = POLICY.replace("ci_timeout_minutes: 10", "ci_timeout_minutes: 10\nmax_review_rounds: 2")
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/fix", FIXED_OPS.replace("a * b", "a ** b"))
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(handle, lambda s: s.review_round == 1 and s.verdict_head == head, "review 1")
        head2 = push_ops(f, "carol", "carol/fix", FIXED_OPS.replace("a * b", "b * a * 1"))
        await pr_state_when(handle, lambda s: s.review_round == 2 and s.verdict_head == head2, "review 2, by itself")
        head3 = push_ops(f, "carol", "carol/fix", FIXED_OPS)
        body = await f.progress_when(number, "automatic reviews of this run are used up")
        assert "/shopfloor review" in body
        state = await handle.query("factory", result_type=FactoryState)
        assert state.head_sha == head3 and state.review_round == 2  # no third review by itself
        f.comment(number, "/shopfloor review", "maria")
        state = await pr_state_when(handle, lambda s: s.review_round == 3 and s.verdict_head == head3, "review 3")

    assert state.verdict == "approve" and len(state.children) == 3
    assert len(f.get(f"/pulls/{number}/reviews")) == 3


def open_fork_pr(f: Factory, author: str, branch: str, ops: str) -> tuple[int, str]:
    """`author` forks the repository, commits `ops` as calc/ops.py on `branch` of the fork and opens
    a pull request from it (head `author:branch`). Returns (number, head sha)."""
    gh, name = f.gh(author), f.repo.split("/")[1]
    fork = gh.post(f"/repos/{f.repo}/forks")
    assert fork.status_code == 202, fork.text
    fork_repo = fork.json()["full_name"]
    main = gh.get(f"/repos/{fork_repo}/branches/main").json()["commit"]["sha"]
    assert gh.post(f"/repos/{fork_repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main}).status_code == 201
    old = gh.get(f"/repos/{fork_repo}/contents/calc/ops.py", params={"ref": branch}).json()["sha"]
    put = gh.put(
        f"/repos/{fork_repo}/contents/calc/ops.py",
        json={
            "message": "Make add() add",
            "content": base64.b64encode(ops.encode()).decode(),
            "sha": old,
            "branch": branch,
        },
    )
    assert put.status_code == 200, put.text
    resp = gh.post(
        f"/repos/{f.repo}/pulls",
        json={
            "title": "Make add() add",
            "head": f"{author}:{branch}",
            "base": "main",
            "body": "From my fork.",
        },
    )
    assert resp.status_code == 201, resp.text
    pr = resp.json()
    assert pr["head"]["repo"]["full_name"] == f"{author}/{name}"
    return pr["number"], pr["head"]["sha"]


async def test_a_strangers_pull_request_from_a_fork_is_reviewed_on_request_and_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    """The head lives only in eve's fork: the reviewer reads it through the base repository's
    `refs/pull/<n>/head`, and the merge leaves eve's fork alone."""
    models = {"review": REVIEW_TURNS}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, MERGING) as f:
        number, head = open_fork_pr(f, "eve", "fix-add", FIXED_OPS)
        assert "fix-add" not in [b["name"] for b in f.get("/branches")]
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(
            handle,
            lambda s: s.head_sha == head and s.waiting_for == "review_command",
            "the run to wait for a maintainer to ask for a review",
        )
        assert f.get(f"/pulls/{number}/reviews") == []

        f.comment(number, "/shopfloor review", "maria")
        state = await pr_state_when(handle, lambda s: s.verdict == "approve", "the review of the fork's head")
        assert state.verdict_head == head
        f.comment(number, "/shopfloor approve", "maria")
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    reviews = f.get(f"/pulls/{number}/reviews")
    assert [(r["user"]["login"], r["state"], r["commit_id"]) for r in reviews] == [
        ("shopfloor[bot]", "COMMENTED", head)
    ]
    assert f.get(f"/pulls/{number}")["merged"] and "return a + b" in f.file("calc/ops.py")
    fork_branch = f.gh("eve").get(f"/repos/eve/{f.repo.split('/')[1]}/branches/fix-add").json()
    assert fork_branch["commit"]["sha"] == head  # the contributor's branch is untouched


async def test_a_members_draft_is_reviewed_only_once_it_is_marked_ready(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"review": REVIEW_TURNS}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, MERGING) as f:
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/wip", FIXED_OPS, draft=True)
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, number))
        await pr_state_when(
            handle,
            lambda s: s.head_sha == head and s.waiting_for == "review_command",
            "the run to leave the draft alone",
        )
        assert f.get(f"/pulls/{number}/reviews") == [] and bot_comments(f, number) == []

        # "Ready for review" (GitHub's button; the simulator's /_sim stand-in for it).
        ready = httpx.post(
            f"{simulator.base_url}/_sim/repos/{f.repo}/pulls/{number}/draft",
            json={"login": "carol", "draft": False},
            timeout=60,
        )
        assert ready.status_code == 200, ready.text
        state = await pr_state_when(handle, lambda s: s.verdict == "approve", "the review once the PR is ready")
        assert state.verdict_head == head and state.review_round == 1
        approve = f.gh("maria").post(
            f"/repos/{f.repo}/pulls/{number}/reviews", json={"event": "APPROVE", "commit_id": head}
        )
        assert approve.status_code == 200, approve.text
        outcome = PullRequestOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))

    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    reviews = [r for r in f.get(f"/pulls/{number}/reviews") if r["user"]["login"] == "shopfloor[bot]"]
    assert [(r["state"], r["commit_id"]) for r in reviews] == [("COMMENTED", head)]
