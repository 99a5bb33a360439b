"""LedgerWorkflow on a real worker, driven through its own activities and messages: a request
whose pipeline is gone, counted once and its place freed; an operator's change the validator
refuses; the worker's ledger gauges read from the live ledger.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from prometheus_client import generate_latest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import ActivityEnvironment
from waiting import DEADLINE_S

from shopfloor.activities.ledger import LedgerActivities
from shopfloor.activities.metrics import REGISTRY
from shopfloor.models.ledger import (
    LEDGER_QUERY,
    LEDGER_WORKFLOW,
    SET_LIMITS_UPDATE,
    AdmissionRequest,
    LedgerState,
    LedgerView,
    LimitChange,
    Limits,
    ledger_id,
)
from shopfloor.worker_metrics import poll_ledger


async def test_a_gone_pipeline_is_counted_once_and_frees_its_place_and_the_gauges_show_it(
    settings, running_worker, temporal_client
):
    activities = LedgerActivities(temporal_client, task_queue=settings.task_queue)
    handle = temporal_client.get_workflow_handle(ledger_id(settings.task_queue))
    async with running_worker(settings):
        # No such workflows: the ledger's answer cannot reach them, so each is counted (it was
        # admitted) and its place freed. (One told to wait would be dropped without a count.)
        for n in (1, 2):
            req = AdmissionRequest(
                key=f"issue/acme/gone/{n}#r", workflow_id=f"issue/acme/gone/{n}", repo="acme/gone"
            )  # fmt: skip
            await ActivityEnvironment().run(activities.ledger_request, req)
            await ActivityEnvironment().run(activities.ledger_request, req)  # a retried activity

        async def settled() -> LedgerView | None:
            view = await handle.query(LEDGER_QUERY, result_type=LedgerView)
            (repo,) = view.repos
            return view if repo.today.runs == 2 and repo.running == 0 and not repo.queued else None

        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while (view := await settled()) is None:
            assert asyncio.get_running_loop().time() < deadline, await handle.query(
                LEDGER_QUERY, result_type=LedgerView
            )
            await asyncio.sleep(1)  # a worker without a cache replays the run for each query
        assert view.total.today.runs == 2  # each once, though each asked twice

        try:
            await handle.execute_update(SET_LIMITS_UPDATE, LimitChange(repo="acme/gone"), result_type=LedgerView)
            raise AssertionError("an empty change was accepted")
        except WorkflowUpdateFailedError as exc:
            assert "nothing to change" in str(exc.cause)
        changed = await handle.execute_update(
            SET_LIMITS_UPDATE, LimitChange(repo="acme/gone", limits=Limits(max_running=4)), result_type=LedgerView
        )
        assert changed.repos[0].limits.max_running == 4

        poller = asyncio.create_task(poll_ledger(temporal_client, settings.task_queue, every_s=0.1))
        try:
            for _ in range(100):
                text = generate_latest(REGISTRY).decode()
                if 'shopfloor_ledger_runs{period="day",repo="acme/gone"} 2.0' in text:
                    break
                await asyncio.sleep(0.1)
        finally:
            poller.cancel()
    assert 'shopfloor_ledger_runs{period="day",repo="acme/gone"} 2.0' in text
    assert 'shopfloor_ledger_runs{period="day",repo="*"}' in text
    assert 'shopfloor_ledger_running{repo="acme/gone"} 0.0' in text


async def test_a_run_held_by_a_daily_limit_starts_when_the_utc_day_rolls_over(
    time_skipping_env, time_skipping_settings, time_skipping_worker
):
    client, s = time_skipping_env.client, time_skipping_settings
    activities = LedgerActivities(client, task_queue=s.task_queue)
    handle = client.get_workflow_handle(ledger_id(s.task_queue))

    async def view_when(ok, what: str) -> LedgerView:
        for _ in range(200):
            view = await handle.query(LEDGER_QUERY, result_type=LedgerView)
            if ok(view):
                return view
            await asyncio.sleep(0.2)
        raise AssertionError(f"the ledger never showed {what}: {view}")

    async with time_skipping_worker(s):
        for n in (1, 2):  # the pipelines: running workflows that take the ledger's answers
            await client.start_workflow(LEDGER_WORKFLOW, LedgerState(), id=f"pipeline-{n}", task_queue=s.task_queue)
            req = AdmissionRequest(
                key=f"pipeline-{n}#r", workflow_id=f"pipeline-{n}", repo="acme/r", operator=Limits(runs_per_day=1)
            )
            await ActivityEnvironment().run(activities.ledger_request, req)
        held = await view_when(lambda v: v.repos and v.repos[0].queued == ["pipeline-2"], "the second held")
        assert "daily limit of 1 run(s) is reached" in held.repos[0].waiting["pipeline-2"]
        await time_skipping_env.sleep(timedelta(days=1))  # past UTC midnight: the ledger's timer fires
        rolled = await view_when(lambda v: v.repos[0].running == 2, "the second admitted on the new day")
    (repo,) = rolled.repos
    assert rolled.day != held.day and repo.today.runs == 1 and repo.queued == []
