"""A cancel that came with the outcome: awaiting a Temporal operation (an activity, a child run)
so that a cancel of the awaiting task is never lost.

When a task is cancelled in the same workflow activation that also brings its activity's (or
child's) result, the SDK requests the cancel and then hands the task the result: the cancel is
gone. And a cancelled activity comes back as an ActivityError, which code that treats a failed
call as harmless (a progress comment, a label) catches and goes on. Either way a pipeline whose
issue was just closed went on to its next step (triage, a push, a pull request) or waited for
people forever. Task.cancelling() still counts the request, so the await below raises
CancelledError, whatever the operation did, when a cancel was asked for while it ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import workflow

# Histories recorded before a cancel was kept went on with the result (or the error).
LATE_CANCEL_PATCH = "late-cancel-kept"

T = TypeVar("T")


async def unless_cancelled(operation: Awaitable[T]) -> T:
    """`operation`'s result, or CancelledError if this task was cancelled while it ran."""
    task = asyncio.current_task()
    asked = task.cancelling() if task is not None else 0

    def cancelled_meanwhile() -> bool:
        return task is not None and task.cancelling() > asked and workflow.patched(LATE_CANCEL_PATCH)

    try:
        result = await operation
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if cancelled_meanwhile():
            raise asyncio.CancelledError("cancelled while it ran") from exc
        raise
    if cancelled_meanwhile():
        raise asyncio.CancelledError("cancelled in the activation that brought its result")
    return result
