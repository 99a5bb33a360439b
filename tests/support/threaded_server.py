"""An ASGI app served by uvicorn on a free port in a background thread, for tests that need real
HTTP (the GitHub simulator, the webhook edge) while the test's own event loop stays free."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from shopfloor.devserver import free_port


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass

    @contextmanager
    def capture_signals(self) -> Iterator[None]:  # the test process keeps its own signal handling
        yield


@contextmanager
def serving(app: Any, *, name: str = "app", port: int | None = None) -> Iterator[str]:
    """Serve `app` (lifespan on) and yield its base URL; stop it on exit."""
    port = port or free_port()
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"{name} did not start on port {port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
