"""The operator's internal mirrors (SHOPFLOOR_SANDBOX_MIRRORS) open exactly what is listed.

A mirror may live on a private or loopback address, which the egress proxy otherwise never
connects to; listing one must not open anything else: not the same host on another port, not an
endpoint that is one of the worker's own services (listed by mistake, or on purpose to smuggle it
in), and not a loopback address a repository names in its own `network_allow`. Each test runs a
real command in the bubblewrap sandbox against real servers on this machine's loopback, with the
egress rules a worker builds from its settings.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from egress_probe import probe_command, results

from shopfloor.activities.sandbox import resolve_mode, run_command
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import CommandPolicy
from shopfloor.settings import Settings


class Index:
    """An HTTP server on the worker's loopback that answers every GET and counts them."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "6")
                self.end_headers()
                self.wfile.write(b"mirror")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def index() -> Iterator[Index]:
    server = Index()
    yield server
    server.close()


@pytest.fixture
def other() -> Iterator[Index]:
    server = Index()
    yield server
    server.close()


def worker_rules(settings: Settings, **update: Any) -> SandboxNetwork:
    return SandboxNetwork.from_settings(settings.model_copy(update=update))


async def probe(ws: Path, rules: SandboxNetwork, allow: list[str], *checks: str) -> dict[str, tuple[bool, str]]:
    policy = CommandPolicy(timeout_s=120, network=True, network_allow=allow)
    out = await run_command(ws, probe_command(*checks), mode="bwrap", policy=policy, network=rules)
    found = results(out.output)
    assert set(found) == set(checks), out.output
    return found


async def test_a_listed_mirror_on_loopback_is_reached_at_its_own_address(bwrap, ws, settings, index):
    rules = worker_rules(settings, sandbox_mirrors=[index.endpoint])
    url = f"http://{index.endpoint}/simple/pkg/"
    got = await probe(ws, rules, [], f"get={url}", f"tunnel={index.endpoint}")
    assert got[f"get={url}"] == (True, "mirror"), got  # pip's way: a plain URL on 127.0.0.1
    assert got[f"tunnel={index.endpoint}"][0], got  # through the proxy, as HTTPS would
    assert "/simple/pkg/" in index.hits


async def test_the_same_host_on_another_port_is_not_reached(bwrap, ws, settings, index, other):
    rules = worker_rules(settings, sandbox_mirrors=[index.endpoint])
    url = f"http://{other.endpoint}/secret"
    got = await probe(ws, rules, [], f"get={url}", f"tunnel={other.endpoint}")
    assert not got[f"get={url}"][0], got
    reached, detail = got[f"tunnel={other.endpoint}"]
    assert not reached and "may never reach" in detail, detail
    assert other.hits == []


async def test_a_listed_mirror_that_is_a_worker_service_is_still_refused(
    bwrap, ws, settings, simulator, temporal_server
):
    api = simulator.api_url.split("//", 1)[1].split("/", 1)[0]  # 127.0.0.1:<port>
    temporal = temporal_server.address
    rules = worker_rules(settings, github_api_url=simulator.api_url, sandbox_mirrors=[api, temporal])
    got = await probe(ws, rules, [], f"tunnel={api}", f"tunnel={temporal}", f"get={simulator.api_url}/repos/acme/x")
    for check, (reached, detail) in got.items():
        assert not reached, f"{check} reached a worker service listed as a mirror: {detail}"
    assert "listed as a mirror, but it is GitHub's API" in got[f"tunnel={api}"][1]
    assert "the Temporal frontend" in got[f"tunnel={temporal}"][1]


async def test_a_repository_cannot_name_loopback_in_its_network_allow(bwrap, ws, settings, index):
    # Even with an operator's bound that covers it: only the operator's mirror list opens loopback.
    rules = worker_rules(settings, sandbox_network_allow=[index.endpoint, "*"])
    got = await probe(ws, rules, [index.endpoint], f"tunnel={index.endpoint}")
    reached, detail = got[f"tunnel={index.endpoint}"]
    assert not reached and "may never reach" in detail, detail
    assert index.hits == []


@pytest.mark.parametrize("bad", ["127.0.0.1", "http://10.0.0.5:3141", "*.corp.example:443", "mirror:99999"])
def test_a_mirror_is_an_exact_endpoint(settings, bad):
    with pytest.raises(UsageError, match="SHOPFLOOR_SANDBOX_MIRRORS"):
        worker_rules(settings, sandbox_mirrors=[bad])
