"""Serving an ASGI app inside a process that owns its own signal handling (`shopfloor dev`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import uvicorn


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal capture: the process that embeds it decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_until(app: Any, host: str, port: int, stop: asyncio.Event) -> None:
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    stopper.cancel()
    await task


async def serve_as_job(app: Any, host: str, port: int, stop: asyncio.Event) -> None:
    """`serve_until` as one job among several (`run_until`): cancelling the job sets `stop` and lets
    uvicorn finish its own shutdown, lifespan included. Cancelling uvicorn mid-way leaves its
    lifespan task pending and logs a CancelledError traceback on exit."""
    serving = asyncio.ensure_future(serve_until(app, host, port, stop))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        stop.set()
        await serving
        raise
