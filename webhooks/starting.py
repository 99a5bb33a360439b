"""Signal-with-start, de-duplicated: the one way the edge hands a delivery to Temporal.

Answers only after Temporal accepted (docs/design.md, Trust and safety). The same dedupe key (the
GitHub edge uses the body's digest and the target) has one effect per process: concurrent calls
share the one in flight (single-flight), and successes are remembered for a while (bounded TTL
cache). Failures are never remembered, so a retried delivery after a 503 is tried again. Across
restarts and replicas the edge remembers accepted bodies in the blob store
(webhooks/delivered_bodies.py), and workflows de-duplicate by delivery id and body digest too.

Id policies (why): signal-with-start always signals a *running* workflow of that id (conflict
policy USE_EXISTING), so a second event about the same issue reaches the one run. A *closed*
workflow is started again only when the caller says the event can start work (`restart_closed`,
e.g. an issue reopened or a `/shopfloor` command): reuse policy ALLOW_DUPLICATE. Follow-up events
(edits, check results, reviews) use REJECT_DUPLICATE: they never revive a finished run, and the
caller gets `WorkflowClosed`. A new run of a finished issue workflow first reads the issue on
GitHub and does nothing if it is closed (workflows/issue.py), so an old event cannot restart it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import (
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.errors import TemporalUnreachable

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

    async def signal_with_start(
        self,
        *,
        workflow: str,
        workflow_id: str,
        arg: BaseModel,
        signal: str,
        signal_arg: BaseModel,
        dedupe_key: str,
        search_attributes: TypedSearchAttributes | None = None,
        restart_closed: bool = True,
        static_summary: str | None = None,
    ) -> Delivered:
        """Start `workflow_id` with `arg` if not running, and signal it; "started" if this call
        created it. Raises TemporalUnavailable (→ 503) or WorkflowClosed."""
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
            result = await self._send(
                workflow, workflow_id, arg, signal, signal_arg, search_attributes, restart_closed, static_summary
            )
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

    async def _send(
        self,
        workflow: str,
        workflow_id: str,
        arg: BaseModel,
        signal: str,
        signal_arg: BaseModel,
        search_attributes: TypedSearchAttributes | None,
        restart_closed: bool,
        static_summary: str | None = None,
    ) -> Delivered:
        try:
            client = await asyncio.wait_for(self._get_client(), timeout=self._rpc_timeout_s)
            handle = await asyncio.wait_for(
                client.start_workflow(
                    workflow,
                    arg,
                    id=workflow_id,
                    task_queue=self.task_queue,
                    start_signal=signal,
                    start_signal_args=[signal_arg],
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=(
                        WorkflowIDReusePolicy.ALLOW_DUPLICATE
                        if restart_closed
                        else WorkflowIDReusePolicy.REJECT_DUPLICATE
                    ),
                    search_attributes=search_attributes,
                    # What the Temporal UI shows for the run (only a start sets it; a signal keeps it).
                    static_summary=static_summary,
                    rpc_timeout=timedelta(seconds=self._rpc_timeout_s),
                ),
                # The SDK retries unavailable servers internally; bound the whole attempt.
                timeout=self._rpc_timeout_s * 1.5,
            )
        except WorkflowAlreadyStartedError as exc:
            raise WorkflowClosed(workflow_id) from exc
        except RPCError as exc:
            # Anything Temporal refuses (also e.g. unregistered search attributes: run `shopfloor
            # setup`) is answered 503: the delivery was not accepted, so the sender must retry.
            kind = "unavailable" if exc.status in _UNAVAILABLE else "refused the delivery"
            raise TemporalUnavailable(f"Temporal {kind}: {exc.status!r} {exc.message}") from exc
        except (TimeoutError, TemporalUnreachable, RuntimeError, OSError) as exc:
            raise TemporalUnavailable(f"Temporal is unreachable: {type(exc).__name__}: {exc}") from exc
        # The signal-with-start response says whether this call created the run (private, but the
        # only place the SDK keeps it).
        response = getattr(handle, "_start_workflow_response", None)
        started = bool(getattr(response, "started", False))
        return Delivered(workflow_id=workflow_id, outcome="started" if started else "signalled")
