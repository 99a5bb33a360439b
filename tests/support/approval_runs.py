"""Approvals in end-to-end tests: a comment whose webhook is handled late, and the replies it gets.

`held_comment` posts a comment while the factory rig's hook signs with a wrong secret, so the edge
refuses that one delivery (GitHub logs it as failed); `redeliver` sends it again later with the
right secret, as GitHub's "Redeliver" button or shopfloor's reconciler would. The comment keeps
the `created_at` it was written at, whatever happened in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from factory_runs import SECRET, Factory
from waiting import DEADLINE_S


def rig_hook(f: Factory) -> int:
    """The id of the hook that delivers `f.repo`'s events to the rig's edge."""
    resp = f.gh("acme").get(f"/repos/{f.repo}/hooks")
    assert resp.status_code == 200, resp.text
    hooks = [h for h in resp.json() if h["config"]["url"] == f"{f.edge_url}/webhooks/github"]
    assert len(hooks) == 1, hooks
    return hooks[0]["id"]


def _set_secret(f: Factory, hook: int, secret: str) -> None:
    resp = f.gh("acme").patch(f"/repos/{f.repo}/hooks/{hook}", json={"config": {"secret": secret}})
    assert resp.status_code == 200, resp.text


def held_comment(f: Factory, number: int, body: str, login: str) -> tuple[int, dict[str, Any]]:
    """Post a comment whose delivery the edge refuses; returns (its failed delivery id, the comment).
    Call it while nothing else is happening: every delivery of that moment fails the same way."""
    hook = rig_hook(f)
    _set_secret(f, hook, "not-the-edge-secret")
    try:
        resp = f.gh(login).post(f"/repos/{f.repo}/issues/{number}/comments", json={"body": body})
        assert resp.status_code == 201, resp.text
        comment = resp.json()
        f.sim.wait_idle()
    finally:
        _set_secret(f, hook, SECRET)
    failed = [
        d
        for d in f.sim.deliveries()
        if d["hook_id"] == hook
        and d["event"] == "issue_comment"
        and (d["payload"].get("comment") or {}).get("id") == comment["id"]
    ]
    assert len(failed) == 1 and failed[0]["status_code"] == 401, failed
    return failed[0]["id"], comment


def redeliver(f: Factory, delivery_id: int) -> None:
    hook = rig_hook(f)
    resp = f.gh("acme").post(f"/repos/{f.repo}/hooks/{hook}/deliveries/{delivery_id}/attempts")
    assert resp.status_code == 202, resp.text


async def comments_when(
    f: Factory, number: int, ok: Callable[[list[dict[str, Any]]], bool], what: str, timeout_s: float = DEADLINE_S
) -> list[dict[str, Any]]:
    """The comments on `number` once `ok` holds for them."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not ok(comments := f.get(f"/issues/{number}/comments")):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: {comments}"
        await asyncio.sleep(0.3)
    return comments


def refusals(comments: list[dict[str, Any]]) -> list[str]:
    """Bodies of shopfloor's replies refusing an approval, oldest first."""
    return [c["body"] for c in comments if "`/shopfloor approve` was not applied" in c["body"]]
