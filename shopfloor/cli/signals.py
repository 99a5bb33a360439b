"""Long-running commands: stop on SIGINT/SIGTERM, and stop everything when one part ends."""

from __future__ import annotations

import asyncio
import signal
from contextlib import suppress


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_until(stop: asyncio.Event, *jobs: asyncio.Task[None]) -> None:
    """Run jobs until a signal or until one of them ends (a crash stops the rest too)."""
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({waiter, *jobs}, return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    for job in jobs:
        job.cancel()
    for job in jobs:
        with suppress(asyncio.CancelledError):
            await job
    waiter.cancel()
