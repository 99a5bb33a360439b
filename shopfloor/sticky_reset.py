"""A retried activity's workflow takes its next task on any worker, not on the sticky queue of a
worker that may have died holding it.

A worker that runs a workflow task keeps the workflow cached and Temporal offers the workflow's
next task to that worker's own (sticky) queue first, for up to the sticky timeout
(SHOPFLOOR_STICKY_QUEUE_TIMEOUT_SECONDS), before any worker may take it. When a worker is
SIGKILLed mid model call, Temporal retries the call on another worker once its heartbeats stop;
the call's result then waited out that timeout on the dead worker's queue before the run moved
on. An activity attempt after the first is the sign: before it returns, the worker running it
asks Temporal to reset the workflow's sticky queue (ResetStickyTaskQueue), so the result's
workflow task goes to the normal queue at once. Were the first worker alive after all (the
attempt failed for another reason), that costs it one replay of the workflow's history.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import structlog
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

log = structlog.get_logger(__name__)

RESET_TIMEOUT = timedelta(seconds=5)


class ResetStickyOnRetry(Interceptor):
    """The worker interceptor: wraps every activity this worker runs."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self._client)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, client: Client) -> None:
        super().__init__(next)
        self._client = client

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.attempt < 2 or info.is_local or not (info.workflow_id and info.workflow_namespace):
            return await self.next.execute_activity(input)
        # Beside the activity, not before it; awaited before its result goes back, so the
        # workflow task that result schedules is already off the old sticky queue.
        reset = asyncio.create_task(
            _reset(self._client, info.workflow_namespace, info.workflow_id, info.workflow_run_id or "")
        )
        try:
            return await self.next.execute_activity(input)
        finally:
            await reset


async def _reset(client: Client, namespace: str, workflow_id: str, run_id: str) -> None:
    try:
        await client.workflow_service.reset_sticky_task_queue(
            ResetStickyTaskQueueRequest(
                namespace=namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
            ),
            timeout=RESET_TIMEOUT,
        )
    except Exception as exc:  # noqa: BLE001 - an optimisation: the sticky timeout still bounds the wait
        log.info("sticky queue not reset", workflow_id=workflow_id, error=str(exc)[:200])
