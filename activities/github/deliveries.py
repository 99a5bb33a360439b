"""The reconciler's GitHub activities: failed webhook deliveries, redelivery, labelled open issues.

GitHub keeps every attempt of a repository hook's deliveries for a few days
(`GET /repos/{o}/{r}/hooks/{id}/deliveries`, newest first) and redelivers one on
`POST .../deliveries/{id}/attempts` with the same `X-GitHub-Delivery` guid, so the edge's
de-duplication by guid makes a redelivery harmless. A GitHub App's own webhook, where an App
deployment's events arrive, has the same API under `/app/hook/deliveries`, called as the App
itself (its JWT, `APP_SCOPE`); its redeliveries serialize on the App's own write lock.
Same patterns as operations.py (api.py's `read_github` / `write_github`): blocking PyGithub calls
in a thread, failures mapped by `github_failure`, the redelivery (a write) under the
installation's write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from temporalio import activity

from shopfloor.activities.github.api import GitHubApi, read_github, write_github
from shopfloor.activities.github.clients import APP_SCOPE, GitHubClients
from shopfloor.models.reconcile import (
    APP_HOOK,
    APP_HOOK_ID,
    AppRedeliverInput,
    FailedAppDeliveriesInput,
    FailedDeliveriesInput,
    FailedDeliveriesOutput,
    FailedDelivery,
    LabelledIssuesInput,
    LabelledIssuesOutput,
    RedeliverInput,
    RedeliverOutput,
    Skipped,
)

log = structlog.get_logger(__name__)

_IN_FLIGHT = frozenset({"pending", "queued"})  # an attempt not made yet (our own redelivery, say)


def _when(item: dict[str, Any]) -> datetime | None:
    raw = item.get("delivered_at")
    try:
        return datetime.fromisoformat(str(raw)) if raw else None
    except ValueError:
        return None


def _in_flight(item: dict[str, Any]) -> bool:
    return not item.get("status_code") and str(item.get("status") or "").lower() in _IN_FLIGHT


def _succeeded(item: dict[str, Any]) -> bool:
    code = int(item.get("status_code") or 0)
    return 200 <= code < 300 and str(item.get("status") or "OK").upper() == "OK"


def latest_failures(hook_id: int, items: list[dict[str, Any]]) -> tuple[list[FailedDelivery], list[str]]:
    """Guids whose attempts (newest first) never succeeded and whose latest attempt failed; and the
    guids skipped because their latest attempt is still in flight."""
    latest: dict[str, dict[str, Any]] = {}
    ok: set[str] = set()
    for item in items:
        guid = str(item.get("guid") or "")
        if not guid or item.get("event") == "ping":  # a hook's hello carries no work
            continue
        latest.setdefault(guid, item)
        if _succeeded(item):
            ok.add(guid)
    failed: list[FailedDelivery] = []
    in_flight: list[str] = []
    for guid, item in latest.items():
        if guid in ok:
            continue  # accepted once: the edge has it (a later failed redelivery changes nothing)
        if _in_flight(item):
            in_flight.append(guid)
            continue
        failed.append(
            FailedDelivery(
                hook_id=hook_id,
                delivery_id=int(item["id"]),
                guid=guid,
                event=str(item.get("event") or ""),
                action=item.get("action"),
                status_code=int(item.get("status_code") or 0),
                status=str(item.get("status") or ""),
            )
        )
    return failed, in_flight


def _hook_failures(
    api: GitHubApi, path: str, hook_id: int, since: datetime, scope: str, out: FailedDeliveriesOutput
) -> None:
    """Add the failures (and in-flight redeliveries) of one hook's deliveries listing at `path`."""
    items: list[dict[str, Any]] = []
    for item in api.paginate(path):
        when = _when(item)
        # Newest first: the first settled attempt older than `since` ends the window. An
        # attempt still in flight carries no real time yet (the simulator shows the epoch).
        if when is not None and when < since and not _in_flight(item):
            break
        items.append(item)
    failed, in_flight = latest_failures(hook_id, items)
    out.failed += failed
    out.skipped += [Skipped(repo=scope, what=f"delivery {g}", reason="a redelivery is in flight") for g in in_flight]


def failed_deliveries(api: GitHubApi, inp: FailedDeliveriesInput) -> FailedDeliveriesOutput:
    out = FailedDeliveriesOutput()
    hooks_path = f"/repos/{inp.repo}/hooks"
    for hook in list(api.paginate(hooks_path)):
        hook_id = int(hook["id"])
        url = str((hook.get("config") or {}).get("url") or "")
        if inp.hook_url_contains and inp.hook_url_contains not in url:
            out.skipped.append(Skipped(repo=inp.repo, what=f"hook {hook_id}", reason="not a shopfloor hook"))
            continue
        if hook.get("active") is False:
            out.skipped.append(Skipped(repo=inp.repo, what=f"hook {hook_id}", reason="hook is inactive"))
            continue
        _hook_failures(api, f"{hooks_path}/{hook_id}/deliveries", hook_id, inp.since, inp.repo, out)
    return _bounded(inp.repo, inp.limit, out)


def failed_app_deliveries(api: GitHubApi, inp: FailedAppDeliveriesInput) -> FailedDeliveriesOutput:
    """The GitHub App's own webhook: every delivery is shopfloor's (the App is)."""
    out = FailedDeliveriesOutput()
    _hook_failures(api, "/app/hook/deliveries", APP_HOOK_ID, inp.since, APP_HOOK, out)
    return _bounded(APP_HOOK, inp.limit, out)


_MAX_SKIPPED = 50


def _bounded(scope: str, limit: int, out: FailedDeliveriesOutput) -> FailedDeliveriesOutput:
    """At most `limit` failures (oldest first: they are closest to leaving GitHub's retention)
    and a bounded skip list, so the result stays small in history."""
    failed = sorted(out.failed, key=lambda d: d.delivery_id)
    skipped = out.skipped[:_MAX_SKIPPED]
    if len(failed) > limit:
        what = f"{len(failed) - limit} deliveries"
        skipped.append(Skipped(repo=scope, what=what, reason="over max_redeliveries; left for the next run"))
    if len(out.skipped) > _MAX_SKIPPED:
        skipped.append(Skipped(repo=scope, what=f"{len(out.skipped) - _MAX_SKIPPED} more", reason="not listed"))
    return FailedDeliveriesOutput(failed=failed[:limit], skipped=skipped)


def redeliver(api: GitHubApi, inp: RedeliverInput) -> RedeliverOutput:
    api.post(f"/repos/{inp.repo}/hooks/{inp.hook_id}/deliveries/{inp.delivery_id}/attempts", {})
    return RedeliverOutput(accepted=True)


def redeliver_app(api: GitHubApi, inp: AppRedeliverInput) -> RedeliverOutput:
    api.post(f"/app/hook/deliveries/{inp.delivery_id}/attempts", {})
    return RedeliverOutput(accepted=True)


def open_issues_with_label(api: GitHubApi, inp: LabelledIssuesInput) -> LabelledIssuesOutput:
    numbers = [
        int(item["number"])
        for item in api.paginate(f"/repos/{inp.repo}/issues", state="open", labels=inp.label)
        if "pull_request" not in item  # the issues listing includes pull requests
    ]
    return LabelledIssuesOutput(numbers=sorted(set(numbers)))


class DeliveryActivities:
    def __init__(self, clients: GitHubClients) -> None:
        self._clients = clients

    @activity.defn(name="github_failed_deliveries")
    async def failed_deliveries(self, inp: FailedDeliveriesInput) -> FailedDeliveriesOutput:
        return await read_github(self._clients, inp.repo, failed_deliveries, inp)

    @activity.defn(name="github_redeliver")
    async def redeliver(self, inp: RedeliverInput) -> RedeliverOutput:
        out = await write_github(self._clients, inp.repo, redeliver, inp)
        log.info("github redelivery requested", repo=inp.repo, hook_id=inp.hook_id, delivery_id=inp.delivery_id)
        return out

    @activity.defn(name="github_failed_app_deliveries")
    async def failed_app_deliveries(self, inp: FailedAppDeliveriesInput) -> FailedDeliveriesOutput:
        return await read_github(self._clients, APP_SCOPE, failed_app_deliveries, inp)

    @activity.defn(name="github_redeliver_app")
    async def redeliver_app(self, inp: AppRedeliverInput) -> RedeliverOutput:
        out = await write_github(self._clients, APP_SCOPE, redeliver_app, inp)
        log.info("github redelivery requested", hook="app", delivery_id=inp.delivery_id)
        return out

    @activity.defn(name="github_open_issues_with_label")
    async def open_issues_with_label(self, inp: LabelledIssuesInput) -> LabelledIssuesOutput:
        return await read_github(self._clients, inp.repo, open_issues_with_label, inp)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.failed_deliveries,
            self.redeliver,
            self.failed_app_deliveries,
            self.redeliver_app,
            self.open_issues_with_label,
        ]
