"""A real host on a real network for egress tests, without the internet: a network namespace
joined to this machine by a veth pair, with addresses from 198.18.0.0/15 (the benchmarking
range: routable, and outside every range the egress proxy refuses), and an HTTP server in it
that serves one file holding a token.

Needs root (CI runs as root) and iproute2 (`.ci/run` installs it). Each test host gets its own
namespace, interface names and /30, so concurrent test runs on one machine do not collide.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

TEST_RANGE = ipaddress.ip_network("198.18.0.0/15")
PORT = 8080
READY_S = 30.0


@dataclass(frozen=True)
class NetnsHost:
    namespace: str
    address: str  # the server's address, inside the namespace
    port: int
    token: str  # the body of GET /token.txt

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/token.txt"

    @property
    def pattern(self) -> str:
        """The allow-list entry naming exactly this server."""
        return f"{self.address}:{self.port}"


def netns_problem() -> str | None:
    """Why a test host cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing; .ci/run installs it"
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _free_subnet() -> ipaddress.IPv4Network:
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, timeout=30).stdout
    for _ in range(100):
        subnet = random.choice(list(TEST_RANGE.subnets(new_prefix=24))).subnets(new_prefix=30)
        net = next(iter(subnet))
        if str(net.network_address).rsplit(".", 1)[0] + "." not in taken:
            return net
    raise RuntimeError("no free /30 in 198.18.0.0/15")


@contextmanager
def netns_http_host(root: Path) -> Iterator[NetnsHost]:
    """A namespace with an HTTP server on <address>:8080 serving `root`/token.txt."""
    problem = netns_problem()
    if problem is not None:
        raise RuntimeError(f"cannot make a test host in a network namespace: {problem}")
    tag = uuid.uuid4().hex[:8]
    namespace, outer, inner = f"sftest-{tag}", f"sfo{tag}", f"sfi{tag}"
    net = _free_subnet()
    gateway, address = (str(a) for a in list(net.hosts())[:2])
    token = f"egress-token-{uuid.uuid4().hex}"
    root.mkdir(parents=True, exist_ok=True)
    (root / "token.txt").write_text(token)
    server: subprocess.Popen[bytes] | None = None
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", namespace)
        _ip("addr", "add", f"{gateway}/30", "dev", outer)
        _ip("link", "set", outer, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/30", "dev", inner)
        _ip("-n", namespace, "link", "set", inner, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        server = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                namespace,
                sys.executable,
                "-m",
                "http.server",
                str(PORT),
                "--bind",
                address,
                "--directory",
                str(root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(address, PORT, server)
        yield NetnsHost(namespace, address, PORT, token)
    finally:
        if server is not None:
            server.kill()
            server.wait(10)
        with suppress(RuntimeError):
            _ip("netns", "del", namespace)
        with suppress(RuntimeError):
            _ip("link", "del", outer)


def _wait_listening(address: str, port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_S
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"the test host's HTTP server exited ({server.returncode})") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test host's HTTP server did not listen within {READY_S:g} s") from None
            time.sleep(0.1)
