"""A webhook target for tests: records every POST (headers and raw body) in arrival order, and
answers with a status the test can change (to simulate a failing receiver)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

__all__ = ["Received", "Receiver", "git_env", "receiving", "run_git"]


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> str:
        return self.headers.get("x-github-event", "")

    def payload(self) -> dict[str, Any]:
        if self.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return json.loads(parse_qs(self.body.decode())["payload"][0])
        return json.loads(self.body)

    @property
    def action(self) -> str | None:
        return self.payload().get("action")


@dataclass
class Receiver:
    url: str
    status: int = 200
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[str]:
        """`event.action` (or just `event`) for each delivery, in arrival order."""
        with self.lock:
            items = list(self.received)
        return [f"{r.event}.{r.action}" if r.action else r.event for r in items]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with receiver.lock:
                receiver.received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(receiver.status)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def git_env(home: Path) -> dict[str, str]:
    """git with no user or system config and no prompts."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Test Dev",
            "GIT_AUTHOR_EMAIL": "dev@example.test",
            "GIT_COMMITTER_NAME": "Test Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.test",
        }
    )
    return env


def run_git(cwd: Path, *args: str, home: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        check=False,
        cwd=cwd,
        env=git_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout
