"""ReconcileWorkflow: redeliver failed webhook deliveries, start missing IssueWorkflows.

Run by the `shopfloor-reconcile` Temporal Schedule every few minutes (shopfloor.reconcile_schedule),
so it must be idempotent: a redelivery keeps its guid (the edge de-duplicates it), a guid whose
latest attempt is still in flight is not redelivered again, and issues with any workflow of their
id are left alone (activities/reconcile.py). First, when the factory runs as a GitHub App, the
App's own webhook: failed deliveries -> redeliver. Then per repository: its hooks' failed
deliveries -> redeliver, then labelled open issues -> start the missing; the redeliveries of a run
share one budget. A failure in one place is recorded in the report and the others go on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.reconcile import (
        APP_HOOK,
        AppRedeliverInput,
        FailedAppDeliveriesInput,
        FailedDeliveriesInput,
        FailedDeliveriesOutput,
        FailedDelivery,
        LabelledIssuesInput,
        ReconcileInput,
        ReconcileReport,
        Redelivered,
        RedeliverInput,
        RedeliverOutput,
        RepoError,
        Skipped,
        StartIssuesInput,
    )
    from shopfloor.workflows.activity_catalogue import (
        GITHUB_FAILED_APP_DELIVERIES,
        GITHUB_FAILED_DELIVERIES,
        GITHUB_OPEN_ISSUES_WITH_LABEL,
        GITHUB_REDELIVER,
        GITHUB_REDELIVER_APP,
        RECONCILE_START_MISSING_ISSUES,
        ActivityEntry,
        call,
    )

Listing = TypeVar("Listing")
Redelivery = TypeVar("Redelivery")


def _message(exc: ActivityError) -> str:
    cause = exc.cause if exc.cause is not None else exc
    return str(getattr(cause, "message", None) or cause).splitlines()[0][:300] if str(cause) else type(cause).__name__


@workflow.defn(name="ReconcileWorkflow")
class ReconcileWorkflow:
    @workflow.run
    async def run(self, inp: ReconcileInput) -> ReconcileReport:
        report = ReconcileReport()
        since = workflow.now() - timedelta(minutes=inp.since_minutes)
        budget = inp.max_redeliveries
        if inp.app_hook:  # a GitHub App's events arrive through its own webhook
            listing = FailedAppDeliveriesInput(since=since, limit=max(budget, 1))
            budget = await self._redeliver_failed(
                APP_HOOK,
                (GITHUB_FAILED_APP_DELIVERIES, listing),
                lambda d: (GITHUB_REDELIVER_APP, AppRedeliverInput(delivery_id=d.delivery_id)),
                budget,
                report,
            )
        for repo in inp.repos:
            budget = await self._redeliver(repo, since, inp, budget, report)
            await self._start_missing(repo, inp.trigger_label, report)
        workflow.set_current_details(
            f"redelivered {len(report.redelivered)}, started {len(report.issues_started)}, "
            f"skipped {len(report.skipped)}, errors {len(report.errors)}"
        )
        return report

    async def _redeliver(
        self, repo: str, since: datetime, inp: ReconcileInput, budget: int, report: ReconcileReport
    ) -> int:
        listing = FailedDeliveriesInput(
            repo=repo, since=since, hook_url_contains=inp.hook_url_contains, limit=max(budget, 1)
        )
        return await self._redeliver_failed(
            repo,
            (GITHUB_FAILED_DELIVERIES, listing),
            lambda d: (GITHUB_REDELIVER, RedeliverInput(repo=repo, hook_id=d.hook_id, delivery_id=d.delivery_id)),
            budget,
            report,
        )

    async def _redeliver_failed(
        self,
        repo: str,
        listing: tuple[ActivityEntry[Listing, FailedDeliveriesOutput], Listing],
        redelivery: Callable[[FailedDelivery], tuple[ActivityEntry[Redelivery, RedeliverOutput], Redelivery]],
        budget: int,
        report: ReconcileReport,
    ) -> int:
        """List one scope's failed deliveries (a repository's hooks, or the App's webhook) and ask
        for each to be redelivered, within the run's budget."""
        try:
            found = await call(listing[0], listing[1], summary=None)
        except ActivityError as exc:
            report.errors.append(RepoError(repo=repo, step="deliveries", message=_message(exc)))
            return budget
        report.skipped += found.skipped
        done: set[tuple[int, str]] = set()  # one redelivery per guid per run
        for d in found.failed:
            if (d.hook_id, d.guid) in done:
                continue
            if budget <= 0:
                report.skipped.append(Skipped(repo=repo, what=f"delivery {d.guid}", reason="over max_redeliveries"))
                continue
            budget -= 1
            done.add((d.hook_id, d.guid))
            try:
                activity, arg = redelivery(d)
                await call(activity, arg, summary=None)
            except ActivityError as exc:
                report.errors.append(RepoError(repo=repo, step="redeliver", message=_message(exc)))
                continue
            report.redelivered.append(
                Redelivered(repo=repo, hook_id=d.hook_id, delivery_id=d.delivery_id, guid=d.guid, event=d.event)
            )
        return budget

    async def _start_missing(self, repo: str, label: str, report: ReconcileReport) -> None:
        try:
            issues = await call(
                GITHUB_OPEN_ISSUES_WITH_LABEL, LabelledIssuesInput(repo=repo, label=label), summary=None
            )
        except ActivityError as exc:
            report.errors.append(RepoError(repo=repo, step="issues", message=_message(exc)))
            return
        if not issues.numbers:
            return
        try:
            started = await call(
                RECONCILE_START_MISSING_ISSUES,
                StartIssuesInput(repo=repo, numbers=issues.numbers, label=label),
                summary=None,
            )
        except ActivityError as exc:
            report.errors.append(RepoError(repo=repo, step="start", message=_message(exc)))
            return
        report.issues_started += started.started
        report.skipped += started.skipped
