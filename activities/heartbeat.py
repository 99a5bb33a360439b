"""Heartbeats for long awaits, so a dead worker's activity is retried elsewhere quickly; and, for a
model call, the text the model has written so far as the heartbeat's details (the live view)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

from shopfloor.models.model_progress import TEXT_TAIL_CHARS, ModelProgress

T = TypeVar("T")

# After new text, wait this long before the next heartbeat so a burst of deltas goes as one
# (Temporal throttles what reaches the server further: the worker's heartbeat throttle interval).
TEXT_BATCH_S = 0.25

# The first heartbeat waits this long (or a third of the heartbeat timeout, if shorter): most calls
# end sooner and then cost no heartbeat at all, one RPC less a step; a dead worker is still
# noticed within the heartbeat timeout, which counts from the attempt's start.
FIRST_BEAT_S = 2.0


class TextProgress:
    """The text a model call has written so far, kept bounded for its heartbeats."""

    def __init__(self, detail: str, attempt: int = 1) -> None:
        self.detail = detail
        self.attempt = attempt
        self.tail = ""
        self.chars = 0
        self.changed = asyncio.Event()

    def add(self, text: str) -> None:
        """The provider's `on_text`: one more piece of the reply."""
        self.chars += len(text)
        self.tail = (self.tail + text)[-TEXT_TAIL_CHARS:]
        self.changed.set()

    def details(self) -> ModelProgress:
        return ModelProgress(detail=self.detail, attempt=self.attempt, text=self.tail, chars=self.chars)


async def heartbeating(awaitable: Awaitable[T], *, detail: str = "", progress: TextProgress | None = None) -> T:
    """Await `awaitable` while heartbeating at a third of the heartbeat timeout (at most every 10 s),
    the first beat after `FIRST_BEAT_S` at most; with `progress`, also soon after each new piece of
    text, its details being the text so far."""
    timeout = activity.info().heartbeat_timeout
    interval = min(10.0, timeout.total_seconds() / 3) if timeout else 10.0

    async def beat() -> None:
        await asyncio.sleep(min(interval, FIRST_BEAT_S))
        while True:
            if progress is None:
                activity.heartbeat(detail)
                await asyncio.sleep(interval)
                continue
            progress.changed.clear()
            activity.heartbeat(progress.details())
            try:
                await asyncio.wait_for(progress.changed.wait(), interval)
            except TimeoutError:
                continue
            await asyncio.sleep(TEXT_BATCH_S)

    beater = asyncio.create_task(beat())
    try:
        return await awaitable
    finally:
        beater.cancel()
