"""The pipeline's older way to call an activity, `act(name, ...)`, kept while its last callers move
to `call` (workflows/activity_catalogue.py): the same command as before, through the catalogue."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models import failure_types
    from shopfloor.workflows.activity_catalogue import (
        GITHUB_RETRY,
        STEADY_RETRY,
        call,
        catalogue,
        failure_message,
        failure_type,
    )

T = TypeVar("T")

GIT_RETRY = STEADY_RETRY
cause = failure_message
cause_type = failure_type
__all__ = ["GITHUB_RETRY", "GIT_RETRY", "act", "cause", "cause_type"]


async def act(
    name: str,
    arg: Any,
    result_type: type[T],
    summary: str,
    *,
    timeout_s: float = 60,
    heartbeat_s: float | None = None,
    retry: RetryPolicy = GITHUB_RETRY,
) -> T:
    """Call the catalogued activity `name` with exactly these timeouts and retries."""
    entry = catalogue().get(name)
    if entry is None:
        raise ApplicationError(
            f"{name!r} is not in the activity catalogue",
            type=failure_types.INCONSISTENT_WORKFLOW_STATE,
            non_retryable=True,
        )
    result: T = await call(
        entry,
        arg,
        summary=summary[:200],
        timeout=timedelta(seconds=timeout_s),
        heartbeat=timedelta(seconds=heartbeat_s) if heartbeat_s else None,
        retry=retry,
    )
    return result
