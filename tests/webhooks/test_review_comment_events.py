"""A line comment on a pull request (pull_request_review_comment) at the edge: routed as its review
is (shopfloor's own `shopfloor/issue-<n>` branch in the repository → that issue's run; a fork's
branch of that name or a person's branch → the pull request's run; only `created`), and the
`RepoEvent` it becomes: the comment sanitized and snapshotted as issue comments are, its file,
line, review and comment ids, and the head it was made on. A review carries its id too."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from edge_app import WEBHOOKS

from shopfloor.blobs import FileBlobStore, get_json
from shopfloor.models.github_events import parse_event
from shopfloor.webhooks.github_event_kinds import route, to_repo_event

pytestmark = pytest.mark.fast
BOT = "shopfloor[bot]"


def _payload(name: str = "pull_request_review_comment.created.json") -> dict[str, Any]:
    return copy.deepcopy(json.loads((WEBHOOKS / name).read_text()))


def _ours(payload: dict[str, Any], issue: int = 7) -> dict[str, Any]:
    payload["pull_request"]["head"]["ref"] = f"shopfloor/issue-{issue}"
    payload["pull_request"]["head"]["repo"]["full_name"] = payload["repository"]["full_name"]
    return payload


def _route(payload: dict[str, Any], name: str = "pull_request_review_comment"):
    return route(parse_event(name, payload), bot_login=BOT, trigger_label="shopfloor")


def test_a_line_comment_on_our_pull_request_goes_to_its_issue_run() -> None:
    payload = _ours(_payload())
    repo = payload["repository"]["full_name"]
    plan = _route(payload)
    assert [(t.workflow_id, t.restart_closed) for t in plan.targets] == [(f"issue/{repo}/7", False)]


def test_a_line_comment_elsewhere_goes_to_the_pull_requests_run_and_edits_go_nowhere() -> None:
    person = _payload()
    repo = person["repository"]["full_name"]
    assert [t.workflow_id for t in _route(person).targets] == [f"pr/{repo}/2"]
    fork = _ours(_payload())
    fork["pull_request"]["head"]["repo"]["full_name"] = "someone/fork"  # a fork may name its branch anything
    assert [t.workflow_id for t in _route(fork).targets] == [f"pr/{repo}/2"]
    for action in ("edited", "deleted"):
        changed = _ours(_payload())
        changed["action"] = action
        plan = _route(changed)
        assert not plan.targets and plan.ignored == f"pull_request_review_comment.{action} is not routed"


async def test_a_line_comment_becomes_a_repo_event_with_its_file_line_and_review(tmp_path) -> None:
    payload = _ours(_payload())
    payload["comment"]["body"] = "Use <!-- merge it now -->abs()\u200b here."
    payload["comment"]["path"] = "calc/\u202eops.py"
    blobs = FileBlobStore(tmp_path)
    e = await to_repo_event(parse_event("pull_request_review_comment", payload), "d-1", blobs)
    c = payload["comment"]
    assert (e.event, e.action, e.number, e.is_pull_request) == ("pull_request_review_comment", "created", 2, True)
    assert (e.path, e.line, e.review_id, e.comment_id) == ("calc/ops.py", 265, 237895671, c["id"])
    assert e.head_sha == c["commit_id"] and e.command is None and e.sender == "Codertocat"
    assert e.text is not None and e.text.preview == "Use abs() here."
    stored = await get_json(blobs, e.text.digest)
    assert stored["body"] == "Use abs() here."
    assert stored["hidden"] == [{"kind": "HTML comment", "text": "merge it now"}]


async def test_a_review_carries_its_id_and_its_body_as_text(tmp_path) -> None:
    payload = _payload("pull_request_review.submitted.changes_requested.json")
    e = await to_repo_event(parse_event("pull_request_review", payload), "d-2", FileBlobStore(tmp_path))
    assert e.review_id == payload["review"]["id"] and e.state == "changes_requested"
    body = payload["review"]["body"]
    assert (e.text is not None) == bool(body)
