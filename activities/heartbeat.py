"""Heartbeats for long awaits, so a dead worker's activity is retried elsewhere quickly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")


async def heartbeating(awaitable: Awaitable[T], *, detail: str = "") -> T:
    """Await `awaitable` while heartbeating at a third of the heartbeat timeout (at most every 10 s)."""
    timeout = activity.info().heartbeat_timeout
    interval = min(10.0, timeout.total_seconds() / 3) if timeout else 10.0

    async def beat() -> None:
        while True:
            activity.heartbeat(detail)
            await asyncio.sleep(interval)

    beater = asyncio.create_task(beat())
    try:
        return await awaitable
    finally:
        beater.cancel()
