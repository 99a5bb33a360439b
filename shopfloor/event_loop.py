"""The event loop every shopfloor process runs on: uvloop where it is installed, asyncio's own
otherwise.

A worker spends most of its CPU in event-loop machinery (the Temporal bridge's futures, the
provider SDK's HTTP client, thread hand-offs to the blob store); uvloop does the same work in C.
On the 2-CPU machine the README quotes, a worker running a workflow of 100 no-op activities used
5.3 ms of CPU per activity on asyncio's loop and 3.9 ms on uvloop. Workflow code never sees it: the Temporal SDK runs workflows on
its own deterministic loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None (asyncio's default) where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:  # not built for this platform (Windows): asyncio's loop does the same work
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
