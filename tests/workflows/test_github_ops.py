"""The GitHub activities against the GitHub simulator, over HTTP.

- Every write is idempotent: run twice, or run once with its response lost (a 502 returned
  *after* the simulator applied the request) and then retried, GitHub holds exactly one branch,
  PR, comment, review, merge, label.
- Through a real Temporal worker: a secondary rate limit waits its Retry-After, a 502 retries on
  the policy's backoff, 404 and 422 end the run after one attempt with a clear, typed cause.
- GitHub App auth mints one installation token for many operations and never shows it.
- Writes through one GitHubClients reach GitHub one at a time per installation.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import BaseModel
from simulator_runs import BOT_TOKEN, SimulatorHandle, app_keys, running_simulator
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.github.operations import GitHubActivities
from shopfloor.models.github_ops import (
    CiStatusInput,
    CloseIssueInput,
    DeleteBranchInput,
    FindOrCreatePrInput,
    IssueRef,
    LabelsInput,
    MergePrInput,
    PermissionInput,
    ReviewComment,
    SubmitReviewInput,
    UpsertCommentInput,
    comment_marker,
)
from shopfloor.models.github_reads import PolicyInput
from shopfloor.settings import Settings
from shopfloor.worker import ProviderCache, activities_for

REPO = "acme/app"
WF = "issue/acme/app/1"


@dataclass
class Sandbox:
    """A simulator with acme/app (main: README.md, .github/shopfloor.yml) and alice's issue #1."""

    sim: SimulatorHandle
    main_sha: str
    issue: int

    def get(self, path: str, **params: Any) -> Any:
        with self.sim.api() as c:
            resp = c.get(path, params=params)
            resp.raise_for_status()
            return resp.json()

    def create_branch(self, branch: str) -> None:
        """`branch` at main's head, as a push would leave it (shopfloor creates branches by pushing)."""
        with self.sim.api() as c:
            c.post(
                f"/repos/{REPO}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": self.main_sha}
            ).raise_for_status()

    def commit_to(self, branch: str, name: str, text: str) -> str:
        """A commit on `branch` through GitHub's contents API; returns the new head sha."""
        with self.sim.api() as c:
            body = {"message": f"add {name}", "content": base64.b64encode(text.encode()).decode(), "branch": branch}
            c.put(f"/repos/{REPO}/contents/{name}", json=body).raise_for_status()
        return self.get(f"/repos/{REPO}/git/ref/heads/{branch}")["object"]["sha"]

    def requests_to(self, method: str, path_suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.sim.requests() if r["method"] == method and r["path"].endswith(path_suffix)]


def seed(sim: SimulatorHandle, tmp_path: Path) -> Sandbox:
    src = tmp_path / "src"
    (src / ".github").mkdir(parents=True)
    (src / "README.md").write_text("# app\n")
    (src / ".github" / "shopfloor.yml").write_text("merge: auto\n")
    sim.create_repo("acme", "app", source_dir=src)
    with sim.api("alice") as c:
        issue = c.post(f"/repos/{REPO}/issues", json={"title": "It breaks", "body": "Steps..."}).json()
    with sim.api() as c:
        main_sha = c.get(f"/repos/{REPO}/git/ref/heads/main").json()["object"]["sha"]
    return Sandbox(sim, main_sha, issue["number"])


@pytest.fixture
def gh(simulator: SimulatorHandle, tmp_path: Path) -> Sandbox:
    return seed(simulator, tmp_path)


def token_settings(sim: SimulatorHandle, **kw: Any) -> Settings:
    return Settings(github_api_url=sim.api_url, github_token=BOT_TOKEN, **kw)


@pytest.fixture
def acts(simulator: SimulatorHandle):
    clients = GitHubClients(token_settings(simulator))
    yield GitHubActivities(clients)
    clients.close()


async def run(activity: Any, inp: BaseModel) -> Any:
    return await ActivityEnvironment().run(activity, inp)


async def lost_then_retried(gh: Sandbox, method: str, path_regex: str, activity: Any, inp: BaseModel) -> Any:
    """The request is applied but its response lost (a 502); the retry must not apply it again."""
    gh.sim.inject_fault(method, path_regex, 502, when="after")
    with pytest.raises(ApplicationError) as first:
        await run(activity, inp)
    assert first.value.non_retryable is False and first.value.type == "GitHubServerError"  # Temporal retries it
    return await run(activity, inp)


# --- idempotency ------------------------------------------------------------------------------


async def test_branches_outside_shopfloor_and_the_default_branch_are_refused(gh, acts):
    gh.create_branch("feature/x")
    with pytest.raises(ApplicationError) as outside:
        await run(acts.delete_branch, DeleteBranchInput(repo=REPO, branch="feature/x"))
    assert outside.value.type == "ShopfloorRefused" and outside.value.non_retryable
    with pytest.raises(ApplicationError) as default:
        await run(acts.delete_branch, DeleteBranchInput(repo=REPO, branch="main", allow_any_branch=True))
    assert default.value.type == "ShopfloorRefused" and "default branch" in default.value.message
    assert gh.get(f"/repos/{REPO}/git/ref/heads/main")["object"]["sha"] == gh.main_sha
    assert gh.get(f"/repos/{REPO}/git/ref/heads/feature/x")["object"]["sha"] == gh.main_sha
    assert gh.requests_to("DELETE", "/git/refs/heads/feature/x") == []
    assert gh.requests_to("DELETE", "/git/refs/heads/main") == []


async def test_delete_branch_twice(gh, acts):
    gh.create_branch("shopfloor/old")
    inp = DeleteBranchInput(repo=REPO, branch="shopfloor/old")
    assert (await run(acts.delete_branch, inp)).deleted is True
    assert (await run(acts.delete_branch, inp)).deleted is False  # already gone is fine
    assert gh.get(f"/repos/{REPO}/git/matching-refs/heads/shopfloor/") == []


async def _branch_with_commit(gh: Sandbox, acts: GitHubActivities, branch: str) -> str:
    gh.create_branch(branch)
    return gh.commit_to(branch, f"{branch.rsplit('/', 1)[-1]}.txt", "fix\n")


async def test_find_or_create_pr_twice_and_after_a_lost_response(gh, acts):
    head = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    inp = FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="Fix #1", body="Fixes #1")
    first, again = await run(acts.find_or_create_pr, inp), await run(acts.find_or_create_pr, inp)
    assert (first.created, again.created, again.number, again.head_sha) == (True, False, first.number, head)

    await _branch_with_commit(gh, acts, "shopfloor/issue-2")
    lost = inp.model_copy(update={"head": "shopfloor/issue-2"})
    retried = await lost_then_retried(gh, "POST", r"/repos/acme/app/pulls$", acts.find_or_create_pr, lost)
    assert retried.created is False
    prs = gh.get(f"/repos/{REPO}/pulls", state="all")
    assert sorted(p["head"]["ref"] for p in prs) == ["shopfloor/issue-1", "shopfloor/issue-2"]


async def test_upsert_comment_twice_edits_in_place_and_survives_a_lost_response(gh, acts):
    inp = UpsertCommentInput(repo=REPO, issue_number=gh.issue, workflow_id=WF, kind="progress", body="Working…")
    first = await run(acts.upsert_comment, inp)
    assert first.action == "created"
    assert (await run(acts.upsert_comment, inp)).action == "unchanged"
    done = await run(acts.upsert_comment, inp.model_copy(update={"body": "Done."}))
    assert (done.action, done.id) == ("updated", first.id)
    assert len(gh.requests_to("PATCH", f"/issues/comments/{first.id}")) == 1  # the unchanged run edited nothing

    triage = inp.model_copy(update={"kind": "triage", "body": "Triage: a bug."})
    assert (
        await lost_then_retried(gh, "POST", r"/issues/\d+/comments$", acts.upsert_comment, triage)
    ).action == "unchanged"

    comments = gh.get(f"/repos/{REPO}/issues/{gh.issue}/comments")
    assert [c["body"] for c in comments] == [
        f"{comment_marker(WF, 'progress')}\nDone.",
        f"{comment_marker(WF, 'triage')}\nTriage: a bug.",
    ]


async def test_a_copied_marker_in_someone_elses_comment_is_not_ours(gh, acts):
    marker = comment_marker(WF, "progress")
    with gh.sim.api("mallory") as c:
        c.post(f"/repos/{REPO}/issues/{gh.issue}/comments", json={"body": f"{marker}\nhijacked"}).raise_for_status()
    out = await run(
        acts.upsert_comment,
        UpsertCommentInput(repo=REPO, issue_number=gh.issue, workflow_id=WF, kind="progress", body="ours"),
    )
    assert out.action == "created"
    bodies = {c["user"]["login"]: c["body"] for c in gh.get(f"/repos/{REPO}/issues/{gh.issue}/comments")}
    assert bodies == {"mallory": f"{marker}\nhijacked", "shopfloor[bot]": f"{marker}\nours"}


async def test_submit_review_once_per_round(gh, acts):
    await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    pr = await run(
        acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
    )
    inp = SubmitReviewInput(repo=REPO, pr_number=pr.number, workflow_id=WF, round=1, event="COMMENT", body="Round 1")
    first, again = await run(acts.submit_review, inp), await run(acts.submit_review, inp)
    assert (first.created, again.created, again.id) == (True, False, first.id)
    round2 = inp.model_copy(update={"round": 2, "body": "Round 2"})
    assert (await lost_then_retried(gh, "POST", r"/reviews$", acts.submit_review, round2)).created is False
    reviews = gh.get(f"/repos/{REPO}/pulls/{pr.number}/reviews")
    assert [r["body"] for r in reviews] == [
        f"{comment_marker(WF, 'review-1')}\nRound 1",
        f"{comment_marker(WF, 'review-2')}\nRound 2",
    ]


async def test_a_review_keeps_its_comments_on_the_diff_and_writes_the_others_into_its_body(gh, acts):
    """GitHub refuses a whole review when one line comment is off the diff (the simulator does too):
    the reviewer's lines are the model's choice, so those go into the body and the review is posted."""
    await _branch_with_commit(gh, acts, "shopfloor/issue-1")  # issue-1.txt, one line added
    pr = await run(
        acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
    )
    comments = [
        ReviewComment(path="issue-1.txt", line=1, body="on the diff"),
        ReviewComment(path="issue-1.txt", line=999, body="past the end"),
        ReviewComment(path="README.md", line=1, body="a file this pull request does not change"),
    ]
    inp = SubmitReviewInput(
        repo=REPO, pr_number=pr.number, workflow_id=WF, round=1, event="COMMENT", body="Round 1", comments=comments
    )
    out = await run(acts.submit_review, inp)
    assert out.created is True
    (review,) = gh.get(f"/repos/{REPO}/pulls/{pr.number}/reviews")
    inline = gh.get(f"/repos/{REPO}/pulls/{pr.number}/comments")
    assert [(c["path"], c["line"], c["body"]) for c in inline] == [("issue-1.txt", 1, "on the diff")]
    body = review["body"]
    assert body.startswith(f"{comment_marker(WF, 'review-1')}\nRound 1")
    assert "outside this pull request's diff" in body
    assert "` issue-1.txt ` line 999:\n\npast the end" in body
    assert "` README.md ` line 1:\n\na file this pull request does not change" in body
    assert "on the diff" not in body


async def test_a_review_refused_for_a_moved_head_is_posted_with_every_comment_in_its_body(gh, acts):
    """The diff is read at the current head, the review is about an older one: a comment on a line
    that only the newer commit changed passes the check and GitHub refuses the review (422); it is
    posted again with every comment in its body, once."""
    reviewed = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    pr = await run(
        acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
    )
    gh.commit_to("shopfloor/issue-1", "later.txt", "a\nb\nc\n")  # pushed after the review began
    comments = [
        ReviewComment(path="issue-1.txt", line=1, body="on the reviewed diff"),
        ReviewComment(path="later.txt", line=2, body="only on the newer diff"),
    ]
    inp = SubmitReviewInput(
        repo=REPO,
        pr_number=pr.number,
        workflow_id=WF,
        round=1,
        event="COMMENT",
        body="Round 1",
        comments=comments,
        commit_id=reviewed,
    )
    out = await run(acts.submit_review, inp)
    assert out.created is True
    (review,) = gh.get(f"/repos/{REPO}/pulls/{pr.number}/reviews")
    assert review["commit_id"] == reviewed
    assert gh.get(f"/repos/{REPO}/pulls/{pr.number}/comments") == []
    assert "on the reviewed diff" in review["body"] and "only on the newer diff" in review["body"]
    assert [r["status"] for r in gh.requests_to("POST", f"/pulls/{pr.number}/reviews")] == [422, 200]


async def test_merge_once_even_when_the_response_is_lost(gh, acts):
    head = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    pr = await run(
        acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
    )
    inp = MergePrInput(repo=REPO, pr_number=pr.number, head_sha=head)
    merged = await lost_then_retried(gh, "PUT", r"/pulls/\d+/merge$", acts.merge_pr, inp)
    assert merged.already_merged is True
    again = await run(acts.merge_pr, inp)
    assert (again.sha, again.already_merged) == (merged.sha, True)
    # Exactly one merge: main moved by one squash commit on top of where it was.
    tip = gh.get(f"/repos/{REPO}/commits/main")
    assert tip["sha"] == merged.sha and [p["sha"] for p in tip["parents"]] == [gh.main_sha]
    assert len(gh.requests_to("PUT", f"/pulls/{pr.number}/merge")) == 1
    assert gh.get(f"/repos/{REPO}/pulls/{pr.number}")["merged"] is True


async def test_merge_refuses_a_head_that_moved(gh, acts):
    reviewed = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    pr = await run(
        acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
    )
    gh.commit_to("shopfloor/issue-1", "late.txt", "pushed after review\n")
    with pytest.raises(ApplicationError) as info:
        await run(acts.merge_pr, MergePrInput(repo=REPO, pr_number=pr.number, head_sha=reviewed))
    assert info.value.type == "GitHubHeadChanged" and info.value.non_retryable
    assert reviewed[:12] in info.value.message
    assert gh.get(f"/repos/{REPO}/pulls/{pr.number}")["merged"] is False


async def test_ci_polls_ask_conditionally_and_an_unchanged_answer_costs_nothing(gh, acts):
    from shopfloor.models.github_ops import CiStatusInput

    asked = CiStatusInput(repo=REPO, sha=gh.main_sha, base_branch="main")
    first = await run(acts.ci_status, asked)
    again = await run(acts.ci_status, asked)
    assert first == again and first.state == "pending"
    for suffix in (f"/commits/{gh.main_sha}/status", f"/commits/{gh.main_sha}/check-runs", "/branches/main"):
        assert [r["status"] for r in gh.requests_to("GET", suffix)] == [200, 304], suffix
    with gh.sim.api() as c:
        c.post(f"/repos/{REPO}/statuses/{gh.main_sha}", json={"state": "success", "context": "ci"}).raise_for_status()
        used = c.get("/rate_limit").json()["resources"]["core"]["used"]
    changed = await run(acts.ci_status, asked)  # a changed answer is a 200 with the new body
    assert changed.state == "success" and [c.name for c in changed.checks] == ["ci"]
    assert [r["status"] for r in gh.requests_to("GET", f"/commits/{gh.main_sha}/status")] == [200, 304, 200]
    await run(acts.ci_status, asked)
    with gh.sim.api() as c:  # the changed read counted; the three 304s after it did not
        assert c.get("/rate_limit").json()["resources"]["core"]["used"] == used + 1


async def test_merge_waits_for_github_to_move_the_pull_requests_head(tmp_path):
    """GitHub moves a pull request's head in the background after a push: a merge asked for in
    that window sees an older head while the branch already holds the reviewed one. That is
    retried (not refused as a moved head), and merges once GitHub caught up."""
    with running_simulator(tmp_path / "sim", pr_sync_delay_s=2.0) as sim:
        gh = seed(sim, tmp_path)
        clients = GitHubClients(token_settings(sim))
        acts = GitHubActivities(clients)
        try:
            first = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
            pr = await run(
                acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t")
            )
            sim.wait_idle()
            reviewed = gh.commit_to("shopfloor/issue-1", "more.txt", "a second commit\n")
            assert gh.get(f"/repos/{REPO}/pulls/{pr.number}")["head"]["sha"] == first  # not moved yet
            with pytest.raises(ApplicationError) as info:
                await run(acts.merge_pr, MergePrInput(repo=REPO, pr_number=pr.number, head_sha=reviewed))
            assert info.value.type == "GitHubPullRequestHeadStale" and not info.value.non_retryable
            assert first[:12] in info.value.message and reviewed[:12] in info.value.message
            assert gh.requests_to("PUT", f"/pulls/{pr.number}/merge") == []  # nothing was asked of GitHub
            sim.wait_idle()  # GitHub moved the head: the retry merges
            merged = await run(acts.merge_pr, MergePrInput(repo=REPO, pr_number=pr.number, head_sha=reviewed))
            assert gh.get(f"/repos/{REPO}/pulls/{pr.number}")["merged"] is True and merged.already_merged is False
        finally:
            clients.close()


async def test_close_issue_and_labels_twice_and_after_lost_responses(gh, acts):
    labels = LabelsInput(repo=REPO, issue_number=gh.issue, labels=["shopfloor", "bug"])
    assert (await run(acts.add_labels, labels)).labels == ["shopfloor", "bug"]
    assert (await run(acts.add_labels, labels)).labels == ["shopfloor", "bug"]
    more = labels.model_copy(update={"labels": ["triaged"]})
    out = await lost_then_retried(gh, "POST", r"/issues/\d+/labels$", acts.add_labels, more)
    assert sorted(out.labels) == ["bug", "shopfloor", "triaged"]

    close = CloseIssueInput(repo=REPO, issue_number=gh.issue, state_reason="completed")
    closed = await lost_then_retried(gh, "PATCH", rf"/issues/{gh.issue}$", acts.close_issue, close)
    assert (closed.already_closed, closed.state_reason) == (True, "completed")
    assert (await run(acts.close_issue, close)).already_closed is True
    issue = await run(acts.get_issue, IssueRef(repo=REPO, number=gh.issue))
    assert (issue.state, issue.state_reason, issue.author) == ("closed", "completed", "alice")
    assert sorted(issue.labels) == ["bug", "shopfloor", "triaged"]
    assert len(gh.requests_to("PATCH", f"/issues/{gh.issue}")) == 1


async def test_reads(gh, acts):
    from shopfloor.models.github_ops import (
        CiStatusInput,
    )

    gh.sim.set_permission("acme", "app", "bob", "maintain")
    perms = {
        login: (await run(acts.permission, PermissionInput(repo=REPO, login=login))).permission
        for login in ("acme", "bob", "alice")
    }
    assert perms == {"acme": "admin", "bob": "maintain", "alice": "read"}
    ci = await run(acts.ci_status, CiStatusInput(repo=REPO, sha=gh.main_sha))
    assert (ci.state, ci.total) == ("pending", 0)  # nothing reported yet
    with gh.sim.api() as c:
        for context, state in (("lint", "success"), ("build", "failure")):
            c.post(
                f"/repos/{REPO}/statuses/{gh.main_sha}", json={"state": state, "context": context}
            ).raise_for_status()
    ci = await run(acts.ci_status, CiStatusInput(repo=REPO, sha=gh.main_sha))
    assert (ci.state, ci.failing, ci.total) == ("failure", ["build"], 2)


async def test_ci_waits_for_the_checks_the_base_branch_requires(gh, acts):
    """A quick check's green is not CI's verdict while a check the base branch's protection
    requires has not reported: it counts as pending, named, until it does."""
    from shopfloor.models.github_ops import CiCheck, CiStatusInput

    rules = {
        "required_status_checks": {"strict": False, "contexts": ["tests"]},
        "enforce_admins": False,
        "required_pull_request_reviews": None,
        "restrictions": None,
    }
    with gh.sim.api("acme") as owner:
        owner.put(f"/repos/{REPO}/branches/main/protection", json=rules).raise_for_status()
    with gh.sim.api() as c:
        c.post(f"/repos/{REPO}/statuses/{gh.main_sha}", json={"state": "success", "context": "lint"}).raise_for_status()
    asked = CiStatusInput(repo=REPO, sha=gh.main_sha, base_branch="main")
    ci = await run(acts.ci_status, asked)
    assert ci.state == "pending" and ci.pending == ["tests"]
    assert ci.checks[-1] == CiCheck(name="tests", kind="required", state="pending")
    # Without the base branch (a read for a reviewer), the reported checks alone decide.
    assert (await run(acts.ci_status, CiStatusInput(repo=REPO, sha=gh.main_sha))).state == "success"
    with gh.sim.api() as c:
        c.post(
            f"/repos/{REPO}/statuses/{gh.main_sha}", json={"state": "success", "context": "tests"}
        ).raise_for_status()
    ci = await run(acts.ci_status, asked)
    assert (ci.state, ci.total) == ("success", 2)
    # A base branch that is gone, or has no protection, adds nothing.
    gone = await run(acts.ci_status, asked.model_copy(update={"base_branch": "no-such-branch"}))
    assert (gone.state, gone.total) == ("success", 2)


# --- faults through a real Temporal worker ----------------------------------------------------


class Call(BaseModel):
    activity: str
    input: dict[str, Any]


@workflow.defn(name="GitHubOpTest")
class GitHubOpWorkflow:
    """One GitHub activity with a short retry policy, as a factory workflow would call it."""

    @workflow.run
    async def run(self, call: Call) -> dict[str, Any]:
        return await workflow.execute_activity(
            call.activity,
            call.input,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.5), maximum_attempts=5),
        )


@pytest.fixture
async def through_worker(temporal_client, settings, blobs, simulator):
    """Runs a Call on a worker whose activities come from the composition root (activities_for)."""
    s = settings.model_copy(update={"github_api_url": simulator.api_url, "github_token": BOT_TOKEN})
    s = Settings.model_validate(s.model_dump())  # secrets as SecretStr again
    worker = Worker(
        temporal_client,
        task_queue=s.task_queue,
        workflows=[GitHubOpWorkflow],
        activities=activities_for(s, blobs, ProviderCache(s).get),
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=0,
    )

    async def call(activity: str, inp: BaseModel):
        handle = await temporal_client.start_workflow(
            GitHubOpWorkflow.run,
            Call(activity=activity, input=inp.model_dump(mode="json")),
            id=f"github-op-{uuid.uuid4().hex[:8]}",
            task_queue=s.task_queue,
        )
        try:
            return await handle.result(), handle
        except WorkflowFailureError as exc:
            return exc, handle

    async with worker:
        yield call


async def activity_attempts(handle) -> tuple[Any, Any]:
    """(ActivityTaskScheduled event, ActivityTaskStarted event): Temporal writes the started
    event once, for the last attempt, with that attempt's number and the previous failure."""
    events = [e async for e in handle.fetch_history_events()]
    scheduled = next(e for e in events if e.HasField("activity_task_scheduled_event_attributes"))
    started = next(e for e in events if e.HasField("activity_task_started_event_attributes"))
    return scheduled, started


def seconds_between(a, b) -> float:
    return (b.event_time.ToDatetime() - a.event_time.ToDatetime()).total_seconds()


def comment(gh: Sandbox, issue: int | None = None) -> UpsertCommentInput:
    return UpsertCommentInput(repo=REPO, issue_number=issue or gh.issue, workflow_id=WF, kind="progress", body="hi")


async def test_a_secondary_rate_limit_waits_retry_after(gh, through_worker):
    gh.sim.inject_fault("POST", r"/issues/\d+/comments$", 403, retry_after=2)
    result, handle = await through_worker("github_upsert_comment", comment(gh))
    assert result["action"] == "created"
    scheduled, started = await activity_attempts(handle)
    attrs = started.activity_task_started_event_attributes
    assert attrs.attempt == 2
    assert attrs.last_failure.application_failure_info.type == "GitHubRateLimited"
    assert attrs.last_failure.application_failure_info.next_retry_delay.ToTimedelta() == timedelta(seconds=2)
    assert seconds_between(scheduled, started) >= 2.0  # GitHub's Retry-After, not the 0.5 s backoff
    assert [r["status"] for r in gh.requests_to("POST", "/comments")] == [403, 201]
    assert len(gh.get(f"/repos/{REPO}/issues/{gh.issue}/comments")) == 1


@pytest.mark.simulator_config(secondary_writes_per_minute=3, secondary_retry_after_s=2)
async def test_a_burst_of_writes_waits_out_githubs_secondary_limit(gh, through_worker):
    """No fault injected: the fourth comment within a minute meets the simulator's secondary
    limit, as a burst would on GitHub; the write waits its Retry-After and then lands, once."""
    for n in range(3):
        result, _ = await through_worker("github_upsert_comment", comment(gh).model_copy(update={"kind": f"k{n}"}))
        assert result["action"] == "created"
    result, handle = await through_worker("github_upsert_comment", comment(gh))
    assert result["action"] == "created"
    scheduled, started = await activity_attempts(handle)
    attrs = started.activity_task_started_event_attributes
    assert attrs.attempt == 2 and attrs.last_failure.application_failure_info.type == "GitHubRateLimited"
    assert attrs.last_failure.application_failure_info.next_retry_delay.ToTimedelta() == timedelta(seconds=2)
    assert seconds_between(scheduled, started) >= 2.0
    assert [r["status"] for r in gh.requests_to("POST", "/comments")] == [201, 201, 201, 403, 201]
    assert len(gh.get(f"/repos/{REPO}/issues/{gh.issue}/comments")) == 4


async def test_a_bad_gateway_retries_on_the_policy_backoff(gh, through_worker):
    gh.sim.inject_fault("POST", r"/issues/\d+/comments$", 502)
    result, handle = await through_worker("github_upsert_comment", comment(gh))
    assert result["action"] == "created"
    scheduled, started = await activity_attempts(handle)
    attrs = started.activity_task_started_event_attributes
    assert attrs.attempt == 2 and attrs.last_failure.application_failure_info.type == "GitHubServerError"
    assert not attrs.last_failure.application_failure_info.HasField("next_retry_delay")
    assert 0.5 <= seconds_between(scheduled, started) < 5


async def _assert_failed_once(result, handle, type_: str) -> ApplicationError:
    assert isinstance(result, WorkflowFailureError)
    assert isinstance(result.cause, ActivityError)
    cause = result.cause.cause
    assert isinstance(cause, ApplicationError) and cause.type == type_ and cause.non_retryable
    _, started = await activity_attempts(handle)
    assert started.activity_task_started_event_attributes.attempt == 1
    return cause


async def test_not_found_fails_at_once_with_a_clear_cause(gh, through_worker):
    result, handle = await through_worker("github_upsert_comment", comment(gh, issue=999))
    cause = await _assert_failed_once(result, handle, "GitHubNotFound")
    assert cause.message == (
        f"GET /repos/{REPO}/issues/999/comments: 404 Not Found: "
        "the repository or number is wrong, or the credentials cannot see it"
    )
    assert len(gh.requests_to("GET", "/issues/999/comments")) == 1


async def test_validation_failure_fails_at_once_with_githubs_errors(gh, through_worker):
    inp = FindOrCreatePrInput(repo=REPO, head="shopfloor/none", base="main", title="t")  # no such branch
    result, handle = await through_worker("github_find_or_create_pr", inp)
    cause = await _assert_failed_once(result, handle, "GitHubValidation")
    assert cause.message.startswith(f"POST /repos/{REPO}/pulls: 422 Validation Failed")
    assert len(gh.requests_to("POST", f"/repos/{REPO}/pulls")) == 1


# --- GitHub App auth --------------------------------------------------------------------------


async def test_app_auth_mints_one_installation_token_and_never_shows_it(tmp_path, caplog):
    private, public = app_keys()
    with running_simulator(tmp_path / "sim", app_id=4242, app_public_keys={4242: public}) as sim:
        gh = seed(sim, tmp_path)
        clients = GitHubClients(
            Settings(github_api_url=sim.api_url, github_app_id=4242, github_app_private_key=private)
        )
        acts = GitHubActivities(clients)
        seeded = len(sim.requests())
        caplog.set_level(logging.DEBUG)
        caplog.set_level(logging.DEBUG, logger="github")  # PyGithub sets itself to INFO on import
        with structlog.testing.capture_logs() as logs:
            results = [
                await run(acts.upsert_comment, comment(gh)),
                await run(acts.upsert_comment, comment(gh).model_copy(update={"body": "edited"})),
                await run(acts.add_labels, LabelsInput(repo=REPO, issue_number=gh.issue, labels=["shopfloor"])),
                await run(acts.get_issue, IssueRef(repo=REPO, number=gh.issue)),
                await run(acts.load_policy, PolicyInput(repo=REPO)),
            ]
        key = clients.write_key(REPO)
        token = clients._auths[key].token  # the cached token (no new mint: it is far from expiry)
        requests = sim.requests()[seeded:]
        authors = [c["user"]["login"] for c in gh.get(f"/repos/{REPO}/issues/{gh.issue}/comments")]
        clients.close()

    assert token.startswith("ghs_")
    assert results[0].action == "created" and results[1].action == "updated"
    assert authors == ["shopfloor[bot]"]
    mints = [r for r in requests if r["method"] == "POST" and r["path"].endswith("/access_tokens")]
    lookups = [r for r in requests if r["path"].endswith(f"/repos/{REPO}/installation")]
    assert len(mints) == 1 and len(lookups) == 1
    assert {r["login"] for r in requests if "/repos/acme/app/issues" in r["path"]} == {"shopfloor[bot]"}
    shown = json.dumps([r.model_dump() for r in results]) + caplog.text + json.dumps(logs, default=str)
    # PyGithub logged the minting response (its DEBUG lines hold whole bodies), token scrubbed.
    assert "/access_tokens {" in caplog.text and '"token":"[redacted]"' in caplog.text
    assert token not in shown and "PRIVATE KEY" not in shown


async def test_an_app_not_installed_on_the_repo_says_so(tmp_path):
    private, public = app_keys()
    with running_simulator(tmp_path / "sim", app_id=7, app_public_keys={7: public}) as sim:
        clients = GitHubClients(Settings(github_api_url=sim.api_url, github_app_id=7, github_app_private_key=private))
        with pytest.raises(ApplicationError) as info:
            await run(GitHubActivities(clients).get_issue, IssueRef(repo="nobody/nothing", number=1))
    assert info.value.type == "GitHubNotFound" and info.value.non_retryable
    assert "GitHub App 7 is not installed on nobody/nothing" in info.value.message


async def test_no_credentials_fail_clearly(simulator, gh):
    acts = GitHubActivities(GitHubClients(Settings(github_api_url=simulator.api_url)))
    with pytest.raises(ApplicationError) as info:
        await run(acts.get_issue, IssueRef(repo=REPO, number=gh.issue))
    assert info.value.type == "GitHubBadCredentials" and info.value.non_retryable
    assert "no GitHub credentials are configured" in info.value.message


# --- write serialization ----------------------------------------------------------------------


async def test_concurrent_writes_reach_github_one_at_a_time(gh, acts):
    """Eight upserts at once, each a read-then-write (GET comments, POST comment). Serialized,
    the simulator sees them strictly one after another: GET, POST, GET, POST... Interleaved,
    a second GET would come before the first POST and both might miss each other's comment."""
    await run(acts.upsert_comment, comment(gh))  # settles who we are (GET /user) first
    before = len(gh.sim.requests())
    kinds = [f"k{i}" for i in range(8)]
    env = ActivityEnvironment()
    outs = await asyncio.gather(
        *(env.run(acts.upsert_comment, comment(gh).model_copy(update={"kind": k, "body": k})) for k in kinds)
    )
    assert {o.action for o in outs} == {"created"}
    seq = [(r["method"], r["path"].rsplit("/", 1)[-1]) for r in gh.sim.requests()[before:]]
    assert seq == [("GET", "comments"), ("POST", "comments")] * len(kinds)


async def test_an_installation_token_is_minted_again_only_near_its_expiry(tmp_path):
    # PyGithub renews a token 20 s before it expires: a 24 s token is good for about 4 s here.
    private, public = app_keys()
    with running_simulator(tmp_path / "sim", app_id=5, app_public_keys={5: public}, installation_token_ttl_s=24) as sim:
        gh = seed(sim, tmp_path)
        acts = GitHubActivities(
            GitHubClients(Settings(github_api_url=sim.api_url, github_app_id=5, github_app_private_key=private))
        )
        issue = IssueRef(repo=REPO, number=gh.issue)

        def mints() -> int:
            return len([r for r in sim.requests() if r["path"].endswith("/access_tokens")])

        await run(acts.get_issue, issue)
        await run(acts.get_issue, issue)
        assert mints() == 1
        await asyncio.sleep(4.5)
        await run(acts.get_issue, issue)
        assert mints() == 2


@pytest.mark.parametrize(("exit_code", "state"), [(0, "success"), (1, "failure")])
async def test_ci_status_follows_the_simulated_ci_check_run(tmp_path, simulator, exit_code, state):
    src = tmp_path / "src"
    src.mkdir()
    (src / "check.py").write_text(f"import sys\nsys.exit({exit_code})\n")
    simulator.create_repo("acme", "app", source_dir=src, ci_command="python check.py")
    gh = Sandbox(simulator, main_sha="", issue=0)
    gh.main_sha = gh.get(f"/repos/{REPO}/git/ref/heads/main")["object"]["sha"]
    clients = GitHubClients(token_settings(simulator))
    acts = GitHubActivities(clients)
    head = await _branch_with_commit(gh, acts, "shopfloor/issue-1")
    await run(acts.find_or_create_pr, FindOrCreatePrInput(repo=REPO, head="shopfloor/issue-1", base="main", title="t"))
    simulator.wait_idle()  # the simulated CI ran on the PR's head
    ci = await run(acts.ci_status, CiStatusInput(repo=REPO, sha=head))
    clients.close()
    assert ci.state == state and [(c.name, c.kind, c.state) for c in ci.checks] == [("ci", "check_run", state)]
