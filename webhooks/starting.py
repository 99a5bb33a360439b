"""Signal-with-start, de-duplicated: the one way the edge hands a delivery to Temporal.

Answers only after Temporal accepted (docs/design.md, Trust and safety). The same dedupe key (the
GitHub edge uses the body's digest and the target) has one effect per process: concurrent calls
share the one in flight (single-flight), and successes are remembered for a while (bounded TTL
cache). Failures are never remembered, so a retried delivery after a 503 is tried again. Across
restarts and replicas the edge remembers accepted bodies in the blob store
(webhooks/delivered_bodies.py), and workflows de-duplicate by delivery id and body digest too.

What is sent is a `SignalWithStart` built in shopfloor/temporal.py (the same builders shopfloor's
own starters use), with its id policies: a running workflow is always signalled; a closed one is
started again only when the event can start work (`restart_closed`, e.g. an issue reopened or a
`/shopfloor` command). Follow-up events (edits, check results, reviews) never revive a finished
run: the caller gets `WorkflowClosed`. A new run of a finished issue workflow first reads the issue
on GitHub and does nothing if it is closed (workflows/issue.py), so an old event cannot restart it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.errors import TemporalUnreachable
from shopfloor.temporal import SignalWithStart, send_signal_with_start

_UNAVAILABLE = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.CANCELLED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.ABORTED,
    RPCStatusCode.UNKNOWN,
}


class TemporalUnavailable(Exception):
    """Temporal did not accept the start or signal (unreachable, overloaded, timed out): answer 503."""


class WorkflowClosed(Exception):
    """A follow-up event about a workflow that already finished: nothing to signal."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow {workflow_id} has already finished")
        self.workflow_id = workflow_id


@dataclass
class Delivered:
    workflow_id: str
    outcome: Literal["started", "signalled", "duplicate"]


class Starter:
    def __init__(
        self,
        get_client: Callable[[], Awaitable[Client]],
        task_queue: str,
        *,
        ttl_s: float = 3600.0,
        max_entries: int = 50_000,
        rpc_timeout_s: float = 10.0,
    ) -> None:
        self._get_client = get_client
        self.task_queue = task_queue
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._rpc_timeout_s = rpc_timeout_s
        self._done: OrderedDict[str, tuple[float, str]] = OrderedDict()  # key -> (expires, workflow id)
        self._in_flight: dict[str, asyncio.Future[Delivered]] = {}

    def _cached(self, key: str) -> Delivered | None:
        entry = self._done.get(key)
        if entry is None:
            return None
        expires, workflow_id = entry
        if expires < time.monotonic():
            del self._done[key]
            return None
        return Delivered(workflow_id=workflow_id, outcome="duplicate")

    def _remember(self, key: str, workflow_id: str) -> None:
        self._done[key] = (time.monotonic() + self._ttl_s, workflow_id)
        self._done.move_to_end(key)
        while len(self._done) > self._max_entries:
            self._done.popitem(last=False)

    async def signal_with_start(self, start: SignalWithStart, *, dedupe_key: str) -> Delivered:
        """Send `start` once per `dedupe_key`; "started" if this call created the run. Raises
        TemporalUnavailable (→ 503) or WorkflowClosed."""
        cached = self._cached(dedupe_key)
        if cached is not None:
            return cached
        pending = self._in_flight.get(dedupe_key)
        if pending is not None:
            # Another request carries the same delivery: share its answer (or its failure).
            result = await asyncio.shield(pending)
            return Delivered(workflow_id=result.workflow_id, outcome="duplicate")
        future: asyncio.Future[Delivered] = asyncio.get_running_loop().create_future()
        self._in_flight[dedupe_key] = future
        try:
            result = await self._send(start)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc if isinstance(exc, Exception) else TemporalUnavailable("cancelled"))
                future.exception()  # mark retrieved: no "never retrieved" warning when nobody waits
            raise
        else:
            self._remember(dedupe_key, result.workflow_id)
            future.set_result(result)
            return result
        finally:
            self._in_flight.pop(dedupe_key, None)

    async def _send(self, start: SignalWithStart) -> Delivered:
        # asyncio.timeout, not wait_for: the same bounds without a task per await.
        try:
            async with asyncio.timeout(self._rpc_timeout_s):
                client = await self._get_client()
            # The SDK retries unavailable servers internally; bound the whole attempt.
            async with asyncio.timeout(self._rpc_timeout_s * 1.5):
                started = await send_signal_with_start(
                    client, self.task_queue, start, rpc_timeout=timedelta(seconds=self._rpc_timeout_s)
                )
        except WorkflowAlreadyStartedError as exc:
            raise WorkflowClosed(start.workflow_id) from exc
        except RPCError as exc:
            # Anything Temporal refuses (also e.g. unregistered search attributes: run `shopfloor
            # setup`) is answered 503: the delivery was not accepted, so the sender must retry.
            kind = "unavailable" if exc.status in _UNAVAILABLE else "refused the delivery"
            raise TemporalUnavailable(f"Temporal {kind}: {exc.status!r} {exc.message}") from exc
        except (TimeoutError, TemporalUnreachable, RuntimeError, OSError) as exc:
            raise TemporalUnavailable(f"Temporal is unreachable: {type(exc).__name__}: {exc}") from exc
        return Delivered(workflow_id=start.workflow_id, outcome="started" if started else "signalled")
