"""How the factory pipeline calls activities and agents: by name, with timeouts, bounded retries
and a human summary on every call (docs/design.md, The agent loop)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

T = TypeVar("T")

GITHUB_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=6,
)
GIT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=60), maximum_attempts=5
)


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
    args = [] if arg is None else [arg]
    return await workflow.execute_activity(
        name,
        args=args,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=timeout_s),
        heartbeat_timeout=timedelta(seconds=heartbeat_s) if heartbeat_s else None,
        retry_policy=retry,
        summary=summary[:200],
    )


def cause(exc: BaseException) -> str:
    """The first ApplicationError's message in the chain (what the activity or child said)."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.message
        current = current.__cause__
    return str(exc) or type(exc).__name__


def cause_type(exc: BaseException) -> str | None:
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.type
        current = current.__cause__
    return None
