"""Exclusive locks on a path, held across coroutines and across processes: a worker's mirror while
it is fetched into, a run's checkout while it is rebuilt, checkpointed or diffed."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator

LOCK_POLL_S = 0.05


class PathLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, lock_path: str) -> AsyncIterator[None]:
        """Exclusive across coroutines (asyncio.Lock) and processes (a polled flock on the file
        `lock_path`: no thread is held while waiting, and a cancelled waiter leaves nothing behind)."""
        async with self._locks.setdefault(lock_path, asyncio.Lock()):
            os.makedirs(os.path.dirname(lock_path), exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(LOCK_POLL_S)
                yield
            finally:
                os.close(fd)  # releases the flock
