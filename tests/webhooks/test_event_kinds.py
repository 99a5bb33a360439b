"""The edge's one table of GitHub event kinds, the two predicates the edge and the inbox share, and
the one signal-with-start builder per workflow that the edge and shopfloor's own starters use."""

from __future__ import annotations

import json

import pytest
from edge_app import WEBHOOKS

from shopfloor.blobs import FileBlobStore
from shopfloor.models.github_events import (
    CI_EVENTS,
    EVENT_MODELS,
    IssuesEvent,
    PullRequestEvent,
    is_bot_sender,
    is_ci_event,
    parse_event,
)
from shopfloor.models.inbox import Alert, RepoEvent
from shopfloor.search_attributes import SHOPFLOOR_ISSUE, SHOPFLOOR_REPO
from shopfloor.temporal import alert_workflow_start, issue_workflow_start, pull_request_workflow_start
from shopfloor.webhooks.github_event_kinds import ROUTED_KINDS, route, to_repo_event
from shopfloor.webhooks.github_routing import NOT_ROUTED
from shopfloor.workflows.inbox import is_bot

pytestmark = pytest.mark.fast


def test_each_routed_kind_is_the_model_its_event_name_parses_to() -> None:
    assert set(ROUTED_KINDS) == {
        "issues",
        "issue_comment",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "check_run",
        "check_suite",
        "workflow_run",
        "status",
    }
    for name, kind in ROUTED_KINDS.items():
        assert kind.model is EVENT_MODELS[name]
    assert not set(NOT_ROUTED) & set(ROUTED_KINDS)


def _fixtures() -> list[tuple[str, str]]:
    """(event name, fixture file) for every routed kind's real deliveries."""
    found = []
    for path in sorted(WEBHOOKS.glob("*.json")):
        name = path.name.split(".")[0]
        if name in ROUTED_KINDS:
            found.append((name, path.name))
    return found


@pytest.mark.parametrize(("name", "fixture"), _fixtures())
async def test_a_routed_delivery_becomes_the_repo_event_of_its_kind(name: str, fixture: str, tmp_path) -> None:
    event = parse_event(name, json.loads((WEBHOOKS / fixture).read_text()))
    plan = route(event, bot_login="shopfloor[bot]", trigger_label="shopfloor")
    assert plan.targets or plan.ignored
    signal = await to_repo_event(event, "d-1", FileBlobStore(tmp_path))
    assert (signal.event, signal.action, signal.repo, signal.delivery_id) == (
        name,
        event.action,
        event.repo_full_name,
        "d-1",
    )


def test_a_kind_without_a_route_says_why() -> None:
    push = parse_event("push", json.loads((WEBHOOKS / "push.json").read_text()))
    assert route(push, bot_login="b", trigger_label="t").ignored == NOT_ROUTED["push"]
    payload = json.loads((WEBHOOKS / "issues.opened.json").read_text())
    other = parse_event("discussion", payload)
    assert route(other, bot_login="b", trigger_label="t").ignored == "discussion events are not routed"


def test_a_check_run_routes_by_its_suite_branch_and_a_labeled_pull_request_keeps_its_label() -> None:
    payload = json.loads((WEBHOOKS / "check_run.completed.json").read_text())
    payload["check_run"]["check_suite"]["head_branch"] = "shopfloor/issue-7"
    plan = route(parse_event("check_run", payload), bot_login="b", trigger_label="t")
    assert [(t.workflow_id, t.number) for t in plan.targets] == [("issue/Codertocat/Hello-World/7", 7)]
    payload["check_run"]["check_suite"] = ["not", "an", "object"]  # read as no branch, as before
    assert parse_event("check_run", payload).check_run.head_branch is None

    pr = json.loads((WEBHOOKS / "pull_request.opened.json").read_text())
    labeled = parse_event("pull_request", {**pr, "action": "labeled", "label": {"name": "shopfloor"}})
    assert isinstance(labeled, PullRequestEvent) and labeled.label_name == "shopfloor"
    assert parse_event("pull_request", {**pr, "label": "bug"}).label_name is None  # not an object: no label


@pytest.mark.parametrize(
    ("login", "sender_type", "bot"),
    [
        ("shopfloor[bot]", "Bot", True),
        ("renovate[bot]", None, True),  # type left out: the login still tells
        ("Dependabot[BOT]", "User", True),
        ("some-app", "Bot", True),
        ("maria", "User", False),
        (None, None, False),
    ],
)
def test_the_edge_and_the_inbox_ask_one_bot_predicate(login: str | None, sender_type: str | None, bot: bool) -> None:
    assert is_bot_sender(login, sender_type) is bot
    event = RepoEvent(
        delivery_id="d", event="issues", repo="acme/shop", sender=login or "", sender_type=sender_type or ""
    )
    assert is_bot(event) is bot
    assert is_bot(event.model_copy(update={"internal": True})) is False  # shopfloor's own starters


def test_ci_events_are_the_four_ci_results() -> None:
    assert CI_EVENTS == {"check_run", "check_suite", "status", "workflow_run"}
    assert all(is_ci_event(name) for name in CI_EVENTS)
    assert not any(is_ci_event(name) for name in ("issues", "issue_comment", "pull_request", "push", ""))


def test_one_builder_per_workflow() -> None:
    event = RepoEvent(delivery_id="d", event="issues", action="opened", repo="acme/shop", number=7, sender="maria")
    issue = issue_workflow_start(event, 7, restart_closed=True, started_by="issues.opened from @maria")
    assert (issue.workflow, issue.workflow_id, issue.arg.model_dump(), issue.signal) == (
        "IssueWorkflow",
        "issue/acme/shop/7",
        {"repo": "acme/shop", "number": 7},
        "github_event",
    )
    assert issue.signal_arg is event and issue.restart_closed
    assert issue.search_attributes is not None
    assert (issue.search_attributes.get(SHOPFLOOR_REPO), issue.search_attributes.get(SHOPFLOOR_ISSUE)) == (
        "acme/shop",
        7,
    )
    assert issue.static_summary == "IssueWorkflow for acme/shop#7, started by issues.opened from @maria"

    pr = pull_request_workflow_start(event, 9, restart_closed=False, started_by="x")
    assert (pr.workflow, pr.workflow_id, pr.arg.model_dump(), pr.restart_closed) == (
        "PullRequestWorkflow",
        "pr/acme/shop/9",
        {"repo": "acme/shop", "number": 9},
        False,
    )

    firing = Alert(source="generic", fingerprint="f-1", status="firing", repo="acme/shop", delivery_id="a")
    start = alert_workflow_start("generic", firing)
    assert (start.workflow, start.workflow_id, start.signal, start.restart_closed, start.static_summary) == (
        "AlertWorkflow",
        "alert/generic/f-1",
        "alert",
        True,
        "alert/generic/f-1 on acme/shop",
    )
    resolved = alert_workflow_start("generic", firing.model_copy(update={"status": "resolved"}))
    assert not resolved.restart_closed  # a late "resolved" never revives a finished run


def test_an_issues_event_label_is_read() -> None:
    payload = json.loads((WEBHOOKS / "issues.labeled.json").read_text())
    event = parse_event("issues", payload)
    assert isinstance(event, IssuesEvent) and event.label_name == payload["label"]["name"]
