"""Waiting on a workflow in tests: query it until a condition holds, with a deadline.

Deadlines only bound a failure (a passing test returns as soon as the condition holds), so they
are generous: two fix rounds with CI in each took over 80 s on a loaded 2-CPU machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")
DEADLINE_S = 240.0
QUERY_RPC_TIMEOUT = timedelta(seconds=30)


async def query_until(
    handle: WorkflowHandle[Any, Any],
    query: str,
    result_type: type[T],
    ok: Callable[[T], bool],
    what: str,
    timeout_s: float = DEADLINE_S,
) -> T:
    """`handle`'s `query` once `ok` holds for it; a workflow not started yet, or a query not answered
    in time, counts as "not yet"."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    last: T | None = None
    while True:
        try:
            # Bounded: a query no worker picks up (a run whose workflow task never comes back) must
            # fail this wait at its deadline, not hang the session.
            last = await handle.query(query, result_type=result_type, rpc_timeout=QUERY_RPC_TIMEOUT)
            if ok(last):
                return last
        except RPCError as exc:
            # Not started yet, or a query the worker did not answer in time (with no workflow
            # cache every query replays the whole history, which a loaded machine can make slow).
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}; last {query}: {last!r}"
        await asyncio.sleep(0.25)


async def result_once_started(handle: WorkflowHandle[Any, Any], timeout_s: float = DEADLINE_S) -> Any:
    """`handle`'s result. A parent lists a child as soon as it asks Temporal to start it, so
    the child may not exist yet for a moment: "not found" counts as "not yet"."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await asyncio.wait_for(handle.result(), timeout=timeout_s)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        assert asyncio.get_running_loop().time() < deadline, f"{handle.id} was never started"
        await asyncio.sleep(0.25)
