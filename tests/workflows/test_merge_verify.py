"""MergeVerifyWorkflow on its own (docs/architecture.md, step 11), on the dev server with GitHub
being the simulator: a merge commit whose CI never decides within the timeout is reported as such
on the issue, naming the check still running, and the issue stays closed (nothing was red)."""

from __future__ import annotations

import asyncio
import uuid

from pydantic import SecretStr
from simulator_runs import BOT_TOKEN
from waiting import DEADLINE_S

from shopfloor.models.github_ops import comment_marker
from shopfloor.models.merge_verify import (
    MAIN_CI_KIND,
    MERGE_VERIFY_WORKFLOW,
    MergeVerifyInput,
    MergeVerifyOutcome,
    merge_verify_workflow_id,
)


async def test_no_ci_result_within_the_timeout_is_reported_and_the_issue_stays_closed(
    temporal_client, settings, running_worker, simulator
):
    name = f"calc{uuid.uuid4().hex[:6]}"
    repo = f"acme/{name}"
    simulator.create_repo("acme", name)
    bot = simulator.api()
    number = bot.post(f"/repos/{repo}/issues", json={"title": "t", "body": "b"}).json()["number"]
    bot.patch(f"/repos/{repo}/issues/{number}", json={"state": "closed", "state_reason": "completed"})
    sha = bot.get(f"/repos/{repo}/branches/main").json()["commit"]["sha"]
    # A deployment check that starts and never finishes.
    posted = bot.post(f"/repos/{repo}/statuses/{sha}", json={"state": "pending", "context": "deploy"})
    assert posted.status_code == 201, posted.text
    s = settings.model_copy(update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN)})
    inp = MergeVerifyInput(
        repo=repo, number=number, pr_number=None, sha=sha, branch="main", timeout_minutes=1, poll_seconds=10
    )
    wf_id = merge_verify_workflow_id(repo, number, sha)
    async with running_worker(s):
        handle = await temporal_client.start_workflow(MERGE_VERIFY_WORKFLOW, inp, id=wf_id, task_queue=s.task_queue)
        out = MergeVerifyOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))
    assert (out.state, out.waiting, out.failing, out.reopened, out.reported) == ("timeout", ["deploy"], [], False, True)
    issue = bot.get(f"/repos/{repo}/issues/{number}").json()
    assert issue["state"] == "closed", issue
    marker = comment_marker(wf_id, MAIN_CI_KIND)
    (report,) = [c for c in bot.get(f"/repos/{repo}/issues/{number}/comments").json() if marker in c["body"]]
    assert "**No CI result** on `main` for the merge" in report["body"] and "within 1 minute." in report["body"]
    assert "Still waiting for: `deploy`." in report["body"], report["body"]


async def test_a_merge_commit_no_check_ever_shows_on_is_not_reported(
    temporal_client, settings, running_worker, simulator
):
    # CI that runs on pull requests only: nothing ever reports on the default branch's commits, and
    # a comment saying so on every merged fix would be noise.
    name = f"calc{uuid.uuid4().hex[:6]}"
    repo = f"acme/{name}"
    simulator.create_repo("acme", name)
    bot = simulator.api()
    number = bot.post(f"/repos/{repo}/issues", json={"title": "t", "body": "b"}).json()["number"]
    bot.patch(f"/repos/{repo}/issues/{number}", json={"state": "closed", "state_reason": "completed"})
    sha = bot.get(f"/repos/{repo}/branches/main").json()["commit"]["sha"]
    s = settings.model_copy(update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN)})
    inp = MergeVerifyInput(
        repo=repo, number=number, pr_number=None, sha=sha, branch="main", timeout_minutes=1, poll_seconds=10
    )
    async with running_worker(s):
        handle = await temporal_client.start_workflow(
            MERGE_VERIFY_WORKFLOW, inp, id=merge_verify_workflow_id(repo, number, sha), task_queue=s.task_queue
        )
        out = MergeVerifyOutcome.model_validate(await asyncio.wait_for(handle.result(), timeout=DEADLINE_S))
    assert (out.state, out.reported, out.reopened) == ("no_ci", False, False), out
    assert bot.get(f"/repos/{repo}/issues/{number}/comments").json() == []
    assert bot.get(f"/repos/{repo}/issues/{number}").json()["state"] == "closed"
