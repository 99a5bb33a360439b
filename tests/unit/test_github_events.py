"""Real GitHub webhook bodies (tests/fixtures) parse into shopfloor's event models with the
values routing needs; malformed bodies fail with a message that names the problem."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fixture_files import GITHUB_WEBHOOKS, webhook_names
from pydantic import TypeAdapter

from shopfloor.models.github_events import (
    CheckRunEvent,
    CheckSuiteEvent,
    GitHubEvent,
    InstallationEvent,
    IssueCommentEvent,
    IssuesEvent,
    MalformedEvent,
    OtherEvent,
    PingEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
    PullRequestReviewEvent,
    PushEvent,
    StatusEvent,
    WorkflowRunEvent,
    parse_event,
)

pytestmark = pytest.mark.fast

WEBHOOKS = GITHUB_WEBHOOKS
FILES = webhook_names()
HELLO = "Codertocat/Hello-World"
SHA_EC26 = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def load(name: str):
    path = WEBHOOKS / name
    return parse_event(name.split(".", 1)[0], json.loads(path.read_text()))


def test_the_fixtures_are_there():
    assert len(FILES) >= 24  # a guard: an empty glob would make the parametrized test vacuous


@pytest.mark.parametrize("name", FILES)
def test_every_fixture_parses_and_round_trips_as_its_own_type(name):
    event = load(name)
    assert event.event == name.split(".", 1)[0]
    assert not isinstance(event, OtherEvent)
    # Through Temporal's pydantic converter a GitHubEvent comes back as the same class.
    back = TypeAdapter(GitHubEvent).validate_python(event.model_dump(mode="json"))
    assert type(back) is type(event) and back == event


def test_issues_opened():
    e = load("issues.opened.json")
    assert isinstance(e, IssuesEvent) and e.action == "opened"
    assert (e.repository.id, e.repo_full_name, e.repository.owner.login) == (186853002, HELLO, "Codertocat")
    assert e.repository.name == "Hello-World" and e.repository.default_branch == "master"
    assert e.repository.clone_url == "https://github.com/Codertocat/Hello-World.git" and e.repository.private is False
    assert (e.sender.login, e.sender.type, e.sender.id, e.sender_is_bot) == ("Codertocat", "User", 21031067, False)
    assert e.installation_id is None
    i = e.issue
    assert (i.number, i.title, i.state, i.labels) == (1, "Spelling error in the README file", "open", ["bug"])
    assert i.body == "It looks like you accidently spelled 'commit' with two 't's."
    assert (i.user.login, i.author_association, i.is_pull_request) == ("Codertocat", "OWNER", False)
    assert i.html_url == "https://github.com/Codertocat/Hello-World/issues/1"
    assert i.created_at == datetime(2019, 5, 15, 15, 20, 18, tzinfo=UTC)


def test_issues_labeled_and_edited():
    labeled = load("issues.labeled.json")
    assert labeled.action == "labeled" and labeled.label_name == "bug" and labeled.issue.labels == ["bug"]
    edited = load("issues.edited.json")
    assert edited.action == "edited" and edited.label_name is None and edited.issue.number == 1


def test_issues_closed_has_a_state_reason_and_an_installation():
    e = load("issues.closed.json")
    assert e.action == "closed" and e.issue.state == "closed" and e.issue.state_reason == "completed"
    assert e.issue.labels == ["triage", "team"] and e.issue.author_association == "COLLABORATOR"
    assert e.installation_id == 27216354 and e.repository.private is True
    assert e.repo_full_name == "codinasion/codinasion-bot"


def test_issue_comment_on_an_issue_and_on_a_pull_request():
    e = load("issue_comment.created.json")
    assert isinstance(e, IssueCommentEvent) and e.action == "created"
    assert (e.comment.id, e.comment.user.login, e.comment.author_association) == (492700400, "Codertocat", "OWNER")
    assert e.comment.body == "You are totally right! I'll get this fixed right away."
    assert e.comment.html_url.endswith("#issuecomment-492700400")
    assert e.issue.is_pull_request is False

    pr = load("issue_comment.created.on-pull-request.json")
    assert pr.issue.is_pull_request is True and pr.issue.number == 3 and pr.comment.body == "/build"
    assert pr.repo_full_name == "chhsia0/knative-route-demo" and pr.issue.body == ""


def test_pull_request_opened_and_synchronize():
    e = load("pull_request.opened.json")
    assert isinstance(e, PullRequestEvent) and e.action == "opened" and e.number == 2
    p = e.pull_request
    assert (p.number, p.state, p.draft, p.merged, p.merged_at, p.merge_commit_sha) == (
        2,
        "open",
        False,
        False,
        None,
        None,
    )
    assert (p.head.ref, p.head.sha, p.head.repo_full_name) == ("changes", SHA_EC26, HELLO)
    assert (p.base.ref, p.base.sha) == ("master", "f95f852bd8fca8fcc58a9a2d6c842781e32a215e")
    assert p.user.login == "Codertocat" and p.labels == ["bug"] and p.html_url.endswith("/pull/2")
    assert p.title == "Update the README with new information."
    assert e.installation_id == 1

    sync = load("pull_request.synchronize.json")
    assert sync.action == "synchronize" and sync.pull_request.head.sha == SHA_EC26


def test_pull_request_closed_with_and_without_merge():
    unmerged = load("pull_request.closed.json").pull_request
    assert unmerged.state == "closed" and unmerged.merged is False and unmerged.merged_at is None
    merged = load("pull_request.closed.merged.json").pull_request
    assert merged.merged is True and merged.merged_at == datetime(2022, 7, 9, 2, 55, 19, tzinfo=UTC)
    assert merged.merge_commit_sha == "bcb954310e04baa5a7974eb201a433be35488351" and merged.number == 14


@pytest.mark.parametrize(
    ("name", "state", "body", "commit"),
    [
        ("pull_request_review.submitted.json", "commented", None, SHA_EC26),
        ("pull_request_review.submitted.approved.json", "approved", "", "9272f18514cbd3fa935b3ced62ae1c2bf6efa76d"),
        (
            "pull_request_review.submitted.changes_requested.json",
            "changes_requested",
            "test2",
            "812f646c59f9fa550a4eb271373776f33111cf63",
        ),
    ],
)
def test_pull_request_reviews(name, state, body, commit):
    e = load(name)
    assert isinstance(e, PullRequestReviewEvent) and e.action == "submitted"
    assert (e.review.state, e.review.body, e.review.commit_id) == (state, body, commit)
    assert e.review.user.login == e.sender_login
    # Review deliveries omit `merged`: an open PR reads as not merged.
    assert e.pull_request.state == "open" and e.pull_request.merged is False


def test_review_state_is_lowercased_as_in_webhooks():
    e = load("pull_request_review.submitted.approved.json")
    payload = e.model_dump(mode="json")
    payload["review"]["state"] = "APPROVED"  # the REST API's spelling
    assert parse_event("pull_request_review", payload).review.state == "approved"


def test_pull_request_review_comment():
    e = load("pull_request_review_comment.created.json")
    assert isinstance(e, PullRequestReviewCommentEvent)
    assert e.comment.id == 284312630 and e.comment.body == "Maybe you should use more emoji on this line."
    assert e.comment.path == "README.md" and e.pull_request.number == 2


def test_push_deleting_a_tag():
    e = load("push.json")
    assert isinstance(e, PushEvent) and e.action is None
    assert (e.ref, e.branch, e.deleted, e.created, e.forced) == ("refs/tags/simple-tag", None, True, False, False)
    assert e.before == "6113728f27ae82c7b1a177c8d03f9e96e0adf246" and e.after == "0" * 40
    assert (e.commit_count, e.commit_ids, e.head_commit) == (0, [], None)
    assert e.pusher.name == "Codertocat"


def test_push_to_a_branch_with_commits():
    payload = json.loads((WEBHOOKS / "push.json").read_text())
    payload.update(
        ref="refs/heads/shopfloor/issue-7",
        deleted=False,
        commits=[{"id": "a" * 40, "message": "one"}, {"id": "b" * 40, "message": "two"}],
        head_commit={"id": "b" * 40, "message": "two"},
    )
    e = parse_event("push", payload)
    assert e.branch == "shopfloor/issue-7" and e.commit_count == 2 and e.commit_ids == ["a" * 40, "b" * 40]
    assert e.head_commit.id == "b" * 40 and e.head_commit.message == "two"


def test_status():
    e = load("status.json")
    assert isinstance(e, StatusEvent)
    assert (e.sha, e.state, e.context, e.description) == (
        "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "success",
        "default",
        None,
    )
    assert e.branches == ["master", "changes", "gh-pages"]


def test_check_runs_success_and_failure():
    ok = load("check_run.completed.json")
    assert isinstance(ok, CheckRunEvent)
    r = ok.check_run
    assert (r.id, r.name, r.status, r.conclusion, r.head_sha) == (
        128620228,
        "Octocoders-linter",
        "completed",
        "success",
        SHA_EC26,
    )
    assert r.pull_requests == [2] and r.app.slug is None and r.app.id == 29310  # that delivery predates slugs
    failed = load("check_run.completed.failure.json").check_run
    assert failed.conclusion == "failure" and failed.app.slug == "github-actions" and failed.pull_requests == [2]


def test_check_suite():
    e = load("check_suite.completed.json")
    assert isinstance(e, CheckSuiteEvent)
    s = e.check_suite
    assert (s.id, s.status, s.conclusion, s.head_sha, s.head_branch, s.pull_requests) == (
        118578147,
        "completed",
        "success",
        SHA_EC26,
        "changes",
        [2],
    )


def test_workflow_runs():
    plain = load("workflow_run.completed.json")
    assert isinstance(plain, WorkflowRunEvent) and plain.repo_full_name == "octo-org/octo-repo"
    w = plain.workflow_run
    assert (w.id, w.status, w.conclusion, w.head_branch, w.pull_requests) == (
        289782451,
        "completed",
        "success",
        "master",
        [],
    )
    assert w.head_sha == "3484a3fb816e0859fd6e1cea078d76385ff50625"
    assert load("workflow_run.completed.with-pull-requests.json").workflow_run.pull_requests == [2]


def test_installation_created_has_no_repository():
    e = load("installation.created.json")
    assert isinstance(e, InstallationEvent) and e.action == "created"
    assert e.repository is None and e.repo_full_name is None
    assert (e.installation_id, e.installation.app_id, e.installation.account.login) == (957387, 29310, "Codertocat")
    assert e.repositories == [HELLO]


def test_pings():
    e = load("ping.json")
    assert isinstance(e, PingEvent) and e.action is None
    assert (e.hook_id, e.zen, e.repo_full_name) == (
        109948940,
        "Anything added dilutes everything else.",
        "Octocoders/Hello-World",
    )
    assert e.hook.app_id is None
    assert load("ping.with-app_id.json").hook.app_id == 29310


def test_a_bot_sender_is_recognized():
    payload = json.loads((WEBHOOKS / "issue_comment.created.json").read_text())
    payload["sender"] = {"login": "shopfloor[bot]", "id": 9, "type": "Bot"}
    assert parse_event("issue_comment", payload).sender_is_bot is True
    payload["sender"] = {"login": "renovate[bot]", "id": 10}  # type left out: the login still tells
    assert parse_event("issue_comment", payload).sender_is_bot is True


def test_an_unknown_event_keeps_the_common_fields():
    payload = json.loads((WEBHOOKS / "issues.opened.json").read_text())
    payload["action"] = "created"
    e = parse_event("discussion", payload)
    assert isinstance(e, OtherEvent) and e.event == "discussion" and e.action == "created"
    assert e.repo_full_name == HELLO and e.sender_login == "Codertocat"
    org_level = parse_event("organization", {"action": "member_added", "sender": {"login": "o"}})
    assert isinstance(org_level, OtherEvent) and org_level.repository is None
    back = TypeAdapter(GitHubEvent).validate_python(org_level.model_dump(mode="json"))
    assert isinstance(back, OtherEvent) and back.event == "organization"


def test_a_body_that_is_not_an_object_is_refused():
    with pytest.raises(MalformedEvent, match=r"'issues' webhook: the body must be a JSON object, not list"):
        parse_event("issues", [1, 2])
    with pytest.raises(ValueError, match="not str"):
        parse_event("push", "ref=refs/heads/main")


def test_a_missing_repository_is_named():
    payload = json.loads((WEBHOOKS / "issues.opened.json").read_text())
    del payload["repository"]
    with pytest.raises(MalformedEvent) as info:
        parse_event("issues", payload)
    assert str(info.value) == "malformed GitHub 'issues.opened' webhook: repository: Field required"


def test_wrong_types_are_named_with_their_path():
    payload = json.loads((WEBHOOKS / "pull_request.opened.json").read_text())
    payload["pull_request"]["number"] = "two"
    payload["pull_request"]["head"]["sha"] = None
    with pytest.raises(MalformedEvent) as info:
        parse_event("pull_request", payload)
    message = str(info.value)
    assert message.startswith("malformed GitHub 'pull_request.opened' webhook: ")
    assert "pull_request.number: Input should be a valid integer" in message
    assert "pull_request.head.sha: Input should be a valid string" in message


def test_a_missing_event_name_is_refused():
    with pytest.raises(MalformedEvent, match="X-GitHub-Event"):
        parse_event("", {"action": "opened"})
