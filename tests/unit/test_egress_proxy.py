"""The egress proxy (activities/egress_proxy.py) on its own unix socket: what it answers to
requests that are not proxy requests, its bound on connections, and that closing it ends the
tunnels it opened. What it lets through from a sandbox is in tests/security/test_sandbox_network.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from netns_hosts import NetnsHost, netns_http_host

from shopfloor.activities.egress_destinations import ProtectedHosts
from shopfloor.activities.egress_proxy import EgressProxy
from shopfloor.agents.host_patterns import allow_list


@pytest.fixture
def host(tmp_path: Path):
    with netns_http_host(tmp_path / "host") as h:
        yield h


async def started(tmp_path: Path, allow: list[str], **kw) -> tuple[EgressProxy, Path]:
    proxy = EgressProxy(allow_list(allow, allow), ProtectedHosts(), **kw)
    path = tmp_path / "proxy.sock"
    await proxy.start(path)
    return proxy, path


@pytest_asyncio.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[tuple[EgressProxy, Path]]:
    p, path = await started(tmp_path, [])
    yield p, path
    await p.close()


async def ask(path: Path, request: bytes) -> str:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer.decode()


async def test_what_is_not_a_proxy_request_gets_a_400_with_a_reason(proxy):
    answer = await ask(proxy[1], b"HELLO\r\n\r\n")
    assert answer.startswith("HTTP/1.1 400 ") and "not an HTTP proxy request" in answer


@pytest.mark.parametrize(
    ("request_line", "reason"),
    [
        (b"GET https://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", "only http:// URLs"),
        (b"GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", "only http:// URLs"),
        (b"CONNECT pypi.org HTTP/1.1\r\nHost: pypi.org\r\n\r\n", "CONNECT needs host:port"),
        (b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n", "not on this command's network allow-list"),
    ],
)
async def test_requests_it_cannot_check_are_refused_with_a_sentence(proxy, request_line, reason):
    answer = await ask(proxy[1], request_line)
    assert answer.startswith("HTTP/1.1 403 ") and reason in answer, answer
    assert proxy[0].refused == 1 and reason in proxy[0].refusals[0]


async def test_connections_past_the_bound_get_a_503(tmp_path):
    proxy, path = await started(tmp_path, [], max_connections=2)
    try:
        idle = [await asyncio.open_unix_connection(str(path)) for _ in range(2)]  # they send nothing yet
        await asyncio.sleep(0.2)
        answer = await ask(path, b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\n\r\n")
        assert answer.startswith("HTTP/1.1 503 ") and "more than 2 connections" in answer, answer
        for _, writer in idle:
            writer.close()
    finally:
        await proxy.close()


async def test_closing_the_proxy_ends_its_tunnels(tmp_path, host: NetnsHost):
    proxy, path = await started(tmp_path, [host.pattern])
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(f"CONNECT {host.pattern} HTTP/1.1\r\nHost: {host.pattern}\r\n\r\n".encode())
    status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert status.startswith(b"HTTP/1.1 200 "), status
    await proxy.close()  # the command ended: nothing it opened stays open
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
