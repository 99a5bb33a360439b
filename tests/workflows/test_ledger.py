"""LedgerWorkflow on a real worker, driven through its own activities and messages: a request
whose pipeline is gone, counted once and its place freed; an operator's change the validator
refuses; the worker's ledger gauges read from the live ledger.
"""

from __future__ import annotations

import asyncio

from prometheus_client import generate_latest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import ActivityEnvironment
from waiting import DEADLINE_S

from shopfloor.activities.ledger import LedgerActivities
from shopfloor.activities.metrics import REGISTRY
from shopfloor.models.ledger import (
    LEDGER_QUERY,
    SET_LIMITS_UPDATE,
    AdmissionRequest,
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
