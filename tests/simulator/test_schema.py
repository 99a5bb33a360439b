"""Every response and every webhook body the simulator produces validates against GitHub's
published schemas (githubkit's generated models), and every delivery is correctly signed."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import githubkit_schemas.latest.models as m
import pytest
from fixture_files import fixture
from githubkit.webhooks import parse_obj
from pydantic import TypeAdapter
from simulator_runs import SimulatorHandle
from webhook_receiver import receiving

from shopfloor.github_signature import verify

SECRET = "schema-secret"


def check(model: Any, resp, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    body = resp.json()
    TypeAdapter(model).validate_python(body)
    return body


@pytest.mark.simulator_config(search_index_delay_s=0)  # search results to validate, at once
def test_rest_responses_and_webhooks_match_githubs_schemas(simulator: SimulatorHandle, tmp_path: Path):
    with receiving() as receiver:
        simulator.create_repo("alice", "demo", ci_command="true")
        simulator.set_permission("alice", "demo", "carol", "write")
        alice, bot, carol = simulator.api("alice"), simulator.api(), simulator.api("carol")
        api = "/repos/alice/demo"
        hook = check(
            m.Hook,
            alice.post(f"{api}/hooks", json={"config": {"url": receiver.url, "secret": SECRET}, "events": ["*"]}),
            201,
        )
        check(list[m.Hook], alice.get(f"{api}/hooks"))
        check(m.PrivateUser, alice.get("/user"))
        check(m.PublicUser, bot.get("/users/alice"))
        check(m.RateLimitOverview, bot.get("/rate_limit"))
        check(m.FullRepository, bot.get(api))
        main = check(m.BranchWithProtection, bot.get(f"{api}/branches/main"))["commit"]["sha"]
        check(m.Commit, bot.get(f"{api}/commits/main"))
        check(list[m.ShortBranch], bot.get(f"{api}/branches"))
        check(m.ContentFile, bot.get(f"{api}/contents/README.md"))
        check(m.GitRef, bot.get(f"{api}/git/ref/heads/main"))
        check(list[m.GitRef], bot.get(f"{api}/git/matching-refs/heads"))
        check(m.GitRef, bot.post(f"{api}/git/refs", json={"ref": "refs/heads/feature", "sha": main}), 201)
        put = {"message": "add app", "content": base64.b64encode(b"print('hi')\n").decode(), "branch": "feature"}
        check(m.FileCommit, bot.put(f"{api}/contents/app.py", json=put), 201)

        issue = check(m.Issue, carol.post(f"{api}/issues", json={"title": "Crash", "body": "boom"}), 201)
        check(m.Issue, alice.patch(f"{api}/issues/1", json={"title": "Crash on start", "body": "boom!"}))
        check(list[m.Label], bot.post(f"{api}/issues/1/labels", json={"labels": ["bug"]}))
        check(list[m.Label], bot.get(f"{api}/labels"))
        check(m.Label, bot.post(f"{api}/labels", json={"name": "triaged", "color": "00ff00"}), 201)
        check(list[m.Label], bot.delete(f"{api}/issues/1/labels/bug"))
        comment = check(m.IssueComment, bot.post(f"{api}/issues/1/comments", json={"body": "on it"}), 201)
        check(m.IssueComment, bot.patch(f"{api}/issues/comments/{comment['id']}", json={"body": "on it!"}))
        check(m.IssueComment, bot.get(f"{api}/issues/comments/{comment['id']}"))
        check(list[m.IssueComment], bot.get(f"{api}/issues/1/comments"))

        pr = check(
            m.PullRequest,
            bot.post(
                f"{api}/pulls",
                json={"title": "Add app", "head": "feature", "base": "main", "body": f"Fixes #{issue['number']}"},
            ),
            201,
        )
        number, head = pr["number"], pr["head"]["sha"]
        check(list[m.Issue], bot.get(f"{api}/issues", params={"state": "all"}))
        check(list[m.PullRequestSimple], bot.get(f"{api}/pulls"))
        check(list[m.DiffEntry], bot.get(f"{api}/pulls/{number}/files"))
        check(list[m.Commit], bot.get(f"{api}/pulls/{number}/commits"))
        check(list[m.Label], alice.post(f"{api}/issues/{number}/labels", json=["enhancement"]))
        check(m.PullRequest, bot.patch(f"{api}/pulls/{number}", json={"body": "Fixes #1 properly"}))
        check(m.Status, bot.post(f"{api}/statuses/{head}", json={"state": "success", "context": "lint"}), 201)
        check(m.CombinedCommitStatus, bot.get(f"{api}/commits/{head}/status"))
        check(list[m.Status], bot.get(f"{api}/commits/{head}/statuses"))
        run = check(
            m.CheckRun,
            bot.post(f"{api}/check-runs", json={"name": "agent", "head_sha": head, "status": "in_progress"}),
            201,
        )
        check(
            m.CheckRun,
            bot.patch(
                f"{api}/check-runs/{run['id']}",
                json={"conclusion": "success", "output": {"title": "ok", "summary": "all good"}},
            ),
        )
        check(m.CheckRun, bot.get(f"{api}/check-runs/{run['id']}"))
        simulator.wait_idle()
        check(m.ReposOwnerRepoCommitsRefCheckRunsGetResponse200, bot.get(f"{api}/commits/{head}/check-runs"))
        check(m.ReposOwnerRepoCommitsRefCheckSuitesGetResponse200, bot.get(f"{api}/commits/{head}/check-suites"))
        check(
            m.PullRequestReview,
            alice.post(
                f"{api}/pulls/{number}/reviews",
                json={"event": "APPROVE", "body": "ok", "comments": [{"path": "app.py", "line": 1, "body": "nice"}]},
            ),
        )
        check(list[m.PullRequestReview], bot.get(f"{api}/pulls/{number}/reviews"))
        inline = check(list[m.PullRequestReviewComment], bot.get(f"{api}/pulls/{number}/comments"))
        check(m.PullRequestReviewComment, bot.get(f"{api}/pulls/comments/{inline[0]['id']}"))
        found = check(m.SearchIssuesGetResponse200, bot.get("/search/issues", params={"q": "repo:alice/demo crash"}))
        assert found["items"], "the search should find the issue above, so its shape is checked"
        check(m.RepositoryCollaboratorPermission, bot.get(f"{api}/collaborators/carol/permission"))
        check(m.PullRequestMergeResult, bot.put(f"{api}/pulls/{number}/merge", json={"merge_method": "merge"}))
        check(m.PullRequest, bot.get(f"{api}/pulls/{number}"))
        check(m.Issue, bot.patch(f"{api}/issues/1", json={"state": "open"}))
        simulator.wait_idle()

        items = check(
            list[m.HookDeliveryItem], alice.get(f"{api}/hooks/{hook['id']}/deliveries", params={"per_page": 100})
        )
        check(m.HookDelivery, alice.get(f"{api}/hooks/{hook['id']}/deliveries/{items[0]['id']}"))

    seen = set()
    for delivery in receiver.received:
        assert verify(SECRET.encode(), delivery.body, delivery.headers["x-hub-signature-256"])
        payload = delivery.payload()
        try:
            parse_obj(delivery.event, payload)
        except Exception as exc:  # noqa: BLE001 - report which event failed
            pytest.fail(f"{delivery.event}.{payload.get('action')} does not validate: {exc}")
        seen.add(f"{delivery.event}.{payload['action']}" if "action" in payload else delivery.event)
    assert {
        "ping",
        "push",
        "issues.opened",
        "issues.edited",
        "issues.labeled",
        "issues.unlabeled",
        "issues.closed",
        "issues.reopened",
        "issue_comment.created",
        "issue_comment.edited",
        "pull_request.opened",
        "pull_request.edited",
        "pull_request.labeled",
        "pull_request.closed",
        "pull_request_review.submitted",
        "status",
        "check_run.created",
        "check_run.completed",
        "check_suite.completed",
    } <= seen, seen


@pytest.mark.fast
def test_real_fixture_payloads_still_parse():
    """A guard for the validator itself: GitHub's real payloads pass the same check."""
    for name in ("issues.opened.json", "pull_request.synchronize.json", "check_run.completed.json", "push.json"):
        parse_obj(name.split(".")[0], json.loads(fixture("github", "webhooks", name).read_text()))
