"""The `shopfloor-reconcile` Temporal Schedule: ReconcileWorkflow every few minutes.

Created or updated in place by `shopfloor setup` and `shopfloor dev` (idempotent: calling it
again with the same settings leaves one schedule with the same spec). Overlap policy SKIP: a run
still going when the next is due means GitHub is slow, and a second reconciler would only race it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

import structlog
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.models.reconcile import ReconcileInput
from shopfloor.settings import Settings

log = structlog.get_logger(__name__)

SCHEDULE_ID = "shopfloor-reconcile"
RECONCILE_WORKFLOW = "ReconcileWorkflow"
RUN_TIMEOUT = timedelta(minutes=15)  # a stuck run must not block the schedule (SKIP) for long

Outcome = Literal["created", "updated", "not configured"]


def reconcile_schedule(settings: Settings, repos: list[str]) -> Schedule:
    every = timedelta(minutes=settings.reconcile_every_minutes)
    inp = ReconcileInput(
        repos=repos,
        # Look back a bit further than the interval, so a run that was skipped or failed is covered.
        since_minutes=max(60, 3 * settings.reconcile_every_minutes),
        trigger_label=settings.trigger_label,
        app_hook=settings.github_app_id is not None,  # an App's events come through its own webhook
    )
    return Schedule(
        action=ScheduleActionStartWorkflow(
            RECONCILE_WORKFLOW,
            inp,
            id=f"{SCHEDULE_ID}-run",  # Temporal appends the scheduled time
            task_queue=settings.task_queue,
            execution_timeout=RUN_TIMEOUT,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_reconcile_schedule(client: Client, settings: Settings, repos: list[str] | None = None) -> Outcome:
    """Create the schedule, or update it to the current settings; nothing without repositories
    (or, for a GitHub App, its webhook) to reconcile."""
    repos = list(settings.repos if repos is None else repos)
    if not repos and settings.github_app_id is None:
        # An existing schedule is left as it is: a missing SHOPFLOOR_REPOS on one machine must not
        # silently switch reconciling off for everyone. `temporal schedule delete` removes it.
        log.info(
            "no repositories configured (SHOPFLOOR_REPOS): the reconcile schedule is not created",
            schedule_id=SCHEDULE_ID,
        )
        return "not configured"
    schedule = reconcile_schedule(settings, repos)
    try:
        await client.create_schedule(SCHEDULE_ID, schedule)
        log.info(
            "reconcile schedule created",
            schedule_id=SCHEDULE_ID,
            every_minutes=settings.reconcile_every_minutes,
            repos=repos,
        )
        return "created"
    except ScheduleAlreadyRunningError:
        pass
    except RPCError as exc:  # some servers report the duplicate as ALREADY_EXISTS
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise

    def replace(current: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule.state = current.description.schedule.state  # an operator's pause (and note) stays
        return ScheduleUpdate(schedule=schedule)

    await client.get_schedule_handle(SCHEDULE_ID).update(replace)
    log.info(
        "reconcile schedule updated",
        schedule_id=SCHEDULE_ID,
        every_minutes=settings.reconcile_every_minutes,
        repos=repos,
    )
    return "updated"
