"""Which webhook deliveries the reconciler redelivers: per guid, judged by all its attempts."""

from __future__ import annotations

import pytest

from shopfloor.activities.github.deliveries import latest_failures

pytestmark = pytest.mark.fast


def attempt(id_: int, guid: str, code: int, status: str | None = None, event: str = "issues") -> dict:
    status = status if status is not None else ("OK" if 200 <= code < 300 else f"Invalid HTTP Response: {code}")
    return {"id": id_, "guid": guid, "status_code": code, "status": status, "event": event, "action": "opened"}


def test_a_guid_that_never_succeeded_is_redelivered_from_its_latest_attempt():
    failed, in_flight = latest_failures(7, [attempt(3, "a", 503), attempt(1, "a", 0, "timed out")])
    assert [(f.hook_id, f.delivery_id, f.guid, f.status_code) for f in failed] == [(7, 3, "a", 503)]
    assert in_flight == []


def test_one_success_is_enough_whatever_came_after():
    failed, _ = latest_failures(7, [attempt(5, "a", 502), attempt(4, "a", 202), attempt(2, "a", 503)])
    assert failed == []


def test_a_pending_redelivery_is_not_redelivered_again():
    failed, in_flight = latest_failures(7, [attempt(6, "a", 0, "pending"), attempt(2, "a", 503)])
    assert failed == [] and in_flight == ["a"]


def test_pings_and_redirects():
    failed, _ = latest_failures(7, [attempt(9, "p", 503, event="ping"), attempt(8, "r", 302)])
    assert [f.guid for f in failed] == ["r"]  # a ping carries no work; a 3xx is not delivered
