"""The `fast` test tier's rule, enforced rather than trusted: a fast test starts no server and no
process.

A test marked `pytest.mark.fast` fails at setup if it asks (directly or through another fixture)
for a fixture that starts a server, and fails if, while it runs, anything in this process spawns a
process (subprocess, asyncio subprocess, os.system/fork/exec/posix_spawn) or binds a socket (a
listening server, even an in-process one). Spawning and binding are seen through Python's audit
hooks, so no library function is patched and nothing can slip past by calling a lower layer.
Tests that run git are therefore not fast: git is a process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import Any

__all__ = [
    "FORBIDDEN_EVENTS",
    "SERVER_FIXTURES",
    "ForbiddenInFastTest",
    "FastTierGuard",
    "guard",
    "server_fixtures_in",
]

# Fixtures (tests/conftest.py and the suite's shared rigs) that start a Temporal dev server, a
# worker on it, or a GitHub simulator. `settings` and `blobs` are here because they hang off the
# session's Temporal server.
SERVER_FIXTURES: frozenset[str] = frozenset(
    {
        "temporal_server",
        "temporal_client",
        "settings",
        "blobs",
        "running_worker",
        "simulator",
        "time_skipping_env",
        "time_skipping_settings",
        "time_skipping_worker",
    }
)

# Audit events (https://docs.python.org/3/library/audit_events.html) that mean "a process is
# being started" or "a socket is being bound to serve".
FORBIDDEN_EVENTS: dict[str, str] = {
    "subprocess.Popen": "started a subprocess",
    "os.system": "ran os.system",
    "os.posix_spawn": "spawned a process",
    "os.spawn": "spawned a process",
    "os.exec": "exec'd a program",
    "os.fork": "forked the process",
    "os.forkpty": "forked the process",
    "socket.bind": "bound a socket (a server)",
}


class ForbiddenInFastTest(RuntimeError):
    """Raised inside a fast test at the call that starts a process or binds a socket."""


def server_fixtures_in(fixturenames: Iterable[str]) -> list[str]:
    """The server-starting fixtures among a test's fixtures (its whole fixture closure)."""
    return sorted(SERVER_FIXTURES.intersection(fixturenames))


class FastTierGuard:
    """Watches audit events while a fast test is armed and records what it must not do."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._test: str | None = None
        self._seen: list[str] = []
        self._installed = False

    def install(self) -> None:
        # An audit hook cannot be removed, so it is installed once and stays idle unless armed.
        if not self._installed:
            sys.addaudithook(self._on_event)
            self._installed = True

    def arm(self, test: str) -> None:
        with self._lock:
            self._test = test
            self._seen = []

    def disarm(self) -> list[str]:
        """Stop watching; what the armed test did that a fast test must not do."""
        with self._lock:
            seen, self._test, self._seen = self._seen, None, []
        return seen

    def forget(self) -> None:
        """Drop what was seen so far: the refusal raised for it already failed the test."""
        with self._lock:
            self._seen = []

    @property
    def armed(self) -> bool:
        return self._test is not None

    def _on_event(self, event: str, args: tuple[Any, ...]) -> None:
        if self._test is None or event not in FORBIDDEN_EVENTS:
            return
        what = f"{FORBIDDEN_EVENTS[event]} ({event}: {_preview(args)})"
        with self._lock:
            if self._test is None:
                return
            self._seen.append(what)
            test = self._test
        raise ForbiddenInFastTest(
            f"{test} is marked fast but {what}; a fast test starts no process and no server. "
            "Remove its fast marker or take the process/server out of it."
        )


def _preview(args: tuple[Any, ...]) -> str:
    text = " ".join(repr(a) for a in args[:2])
    return text if len(text) <= 120 else text[:117] + "..."


guard = FastTierGuard()
