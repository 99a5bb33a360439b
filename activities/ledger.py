"""The ledger's activities: a pipeline's request to start and its spend reports, each a
signal-with-start of LedgerWorkflow `ledger/<task queue>` (the first one creates it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from shopfloor.models.ledger import (
    LEDGER_WORKFLOW,
    REQUEST_SIGNAL,
    SPEND_SIGNAL,
    AdmissionRequest,
    LedgerState,
    Spend,
    ledger_id,
)
from shopfloor.temporal import SignalWithStart, send_signal_with_start


class LedgerActivities:
    def __init__(self, client: Client, *, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue

    def all(self) -> list[Any]:
        return [self.ledger_request, self.ledger_spend]

    async def _send(self, signal: str, arg: BaseModel) -> None:
        start = SignalWithStart(
            workflow=LEDGER_WORKFLOW,
            workflow_id=ledger_id(self._task_queue),
            arg=LedgerState(),
            signal=signal,
            signal_arg=arg,
            restart_closed=True,  # a ledger ended by hand starts again, empty
            static_summary="the spend ledger: runs and cost per repository and in total, and the limits",
        )
        try:
            await send_signal_with_start(self._client, self._task_queue, start)
        except RPCError as exc:
            raise ApplicationError(f"Temporal did not take the ledger's {signal}: {exc.message}") from None

    @activity.defn(name="ledger_request")
    async def ledger_request(self, req: AdmissionRequest) -> bool:
        await self._send(REQUEST_SIGNAL, req)
        return True

    @activity.defn(name="ledger_spend")
    async def ledger_spend(self, spend: Spend) -> bool:
        await self._send(SPEND_SIGNAL, spend)
        return True
