"""A command allowed the network must not reach the worker's network: the attack was a command,
under `network_for_commands: true`, talking to the Temporal frontend (listing every workflow,
reading other runs, signalling a forged approval) because the sandbox shared the worker's
network namespace.

Every sandbox now has a network namespace of its own; a command that may use the network gets
only the worker's egress proxy, through a unix socket. The allowed host is real and not on
loopback: a network namespace joined to this machine by a veth pair, at an address from
198.18.0.0/15, serving a token over HTTP (tests/support/netns_hosts.py). The worker's own
services are the session's real Temporal server and a real GitHub simulator. Component tests
drive activities/sandbox.py with the egress rules a worker builds from its settings; the last
test runs the whole factory (simulator, webhook edge, worker with bubblewrap) with a fix agent
whose command tries all of it.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_runs import call
from egress_probe import probe_command, results
from factory_runs import (
    APPROVE,
    FIX,
    GOOD_EDIT,
    POLICY,
    TEST_CMD,
    TRIAGE_TURNS,
    approve_and_finish,
    assert_merged,
    factory,
)
from netns_hosts import NetnsHost, netns_http_host
from portable_repos import load_messages, tool_results

from shopfloor.activities.sandbox import resolve_mode, run_command
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.blobs import FileBlobStore
from shopfloor.errors import ToolError, UsageError
from shopfloor.models.agent_run import AgentResult, CommandPolicy
from shopfloor.settings import Settings


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


@pytest.fixture
def host(tmp_path: Path) -> Iterator[NetnsHost]:
    with netns_http_host(tmp_path / "host") as h:
        yield h


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


class Trap:
    """An HTTP server on this machine's loopback that counts the requests it gets."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "7")
                self.end_headers()
                self.wfile.write(b"trapped")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.server.shutdown()
    t.server.server_close()


def worker_rules(settings: Settings, **update: Any) -> SandboxNetwork:
    """The egress rules a worker with these settings gives its commands."""
    return SandboxNetwork.from_settings(settings.model_copy(update=update))


async def probe(ws: Path, rules: SandboxNetwork, allow: list[str], *checks: str) -> dict[str, tuple[bool, str]]:
    policy = CommandPolicy(timeout_s=120, network=True, network_allow=allow)
    out = await run_command(ws, probe_command(*checks), mode="bwrap", policy=policy, network=rules)
    found = results(out.output)
    assert set(found) == set(checks), out.output  # every check ran and answered
    return found | {"output": (False, out.output)}


def host_port(address: str) -> tuple[str, int]:
    h, _, p = address.rpartition(":")
    return h, int(p)


# --- the allowed host is reached, through the proxy only ------------------------------------------


async def test_an_allowed_host_is_reached_through_the_proxy_and_only_through_it(bwrap, ws, host, settings):
    rules = worker_rules(settings, sandbox_network_allow=[host.pattern])
    got = await probe(ws, rules, [host.pattern], f"get={host.url}", f"tunnel={host.pattern}", f"direct={host.pattern}")
    assert got[f"get={host.url}"] == (True, host.token)  # plain HTTP, absolute form
    assert got[f"tunnel={host.pattern}"][0], got  # CONNECT (what HTTPS uses)
    # The same host without the proxy: there is no route out of the sandbox's namespace.
    reached, detail = got[f"direct={host.pattern}"]
    assert not reached and "unreachable" in detail.lower(), detail


async def test_the_sandbox_has_only_its_own_loopback(bwrap, ws, settings):
    policy = CommandPolicy(timeout_s=60, network=True)
    out = await run_command(ws, "cat /proc/net/dev", mode="bwrap", policy=policy, network=worker_rules(settings))
    interfaces = [line.split(":")[0].strip() for line in out.output.splitlines() if ":" in line]
    assert out.exit_code == 0 and interfaces == ["lo"], out.output


async def test_the_sandboxs_own_loopback_is_reached_directly(bwrap, ws, settings):
    # A test suite's own server inside the sandbox: its loopback is the sandbox's, not the worker's.
    script = (
        "import http.server, threading, urllib.request; "
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler); "
        "threading.Thread(target=s.serve_forever, daemon=True).start(); open('here.txt', 'w').write('own'); "
        "print(urllib.request.urlopen(f'http://localhost:{s.server_port}/here.txt', timeout=10).read().decode())"
    )
    policy = CommandPolicy(timeout_s=60, network=True)
    out = await run_command(ws, f'python3 -c "{script}"', mode="bwrap", policy=policy, network=worker_rules(settings))
    assert out.exit_code == 0 and out.output.strip().splitlines()[-1] == "own", out.output


# --- the worker's own services ------------------------------------------------------------------


async def test_the_temporal_server_is_out_of_reach_even_when_allow_listed(bwrap, ws, settings, temporal_server):
    address = temporal_server.address  # the session's real frontend, which the worker uses
    h, port = host_port(address)
    named = [address, f"localhost:{port}"]  # the repository and the operator both name it
    rules = worker_rules(settings, sandbox_network_allow=named)
    got = await probe(
        ws, rules, named, f"temporal={address}", f"direct={address}", f"tunnel={address}", f"tunnel=localhost:{port}"
    )
    for check in (f"temporal={address}", f"direct={address}", f"tunnel={address}", f"tunnel=localhost:{port}"):
        reached, detail = got[check]
        assert not reached, f"{check} reached the Temporal server: {detail}"
    assert "the Temporal frontend, which commands may never reach" in got[f"tunnel={address}"][1]
    assert "loopback" in got[f"tunnel=localhost:{port}"][1]
    assert "listed workflows" not in got["output"][1]


async def test_the_simulator_is_out_of_reach(bwrap, ws, settings, simulator):
    api = simulator.api_url.split("//", 1)[1].split("/", 1)[0]  # 127.0.0.1:<port>
    rules = worker_rules(settings, github_api_url=simulator.api_url, sandbox_network_allow=[api])
    got = await probe(ws, rules, [api], f"get={simulator.api_url}/repos/acme/x", f"tunnel={api}", f"direct={api}")
    for check, (reached, detail) in got.items():
        assert not reached, f"{check} reached the simulator: {detail}"
    assert "GitHub's API, which commands may never reach" in got[f"tunnel={api}"][1]


async def test_cloud_metadata_is_out_of_reach(bwrap, ws, settings):
    metadata = "169.254.169.254:80"
    rules = worker_rules(settings, sandbox_network_allow=[metadata])
    got = await probe(
        ws,
        rules,
        [metadata],
        "get=http://169.254.169.254/latest/meta-data/",
        f"tunnel={metadata}",
        f"direct={metadata}",
    )
    for check, (reached, detail) in got.items():
        assert not reached, f"{check} reached the metadata address: {detail}"
    assert "link-local" in got[f"tunnel={metadata}"][1]


@pytest.mark.parametrize(
    ("setting", "url", "service"),
    [
        ("temporal_address", "{h}", "the Temporal frontend"),
        ("s3_endpoint_url", "http://{h}", "the blob store"),
        ("github_api_url", "http://{h}/api/v3", "GitHub's API"),
    ],
)
async def test_a_worker_service_on_a_routable_address_is_refused_by_name_and_address(
    bwrap, ws, settings, host, setting, url, service
):
    # The service at a routable address that no range refuses, also reached under another
    # spelling of that address (IPv4-mapped IPv6), which no name check can see.
    mapped = f"[::ffff:{host.address}]:{host.port}"
    where = {setting: url.format(h=host.pattern)}
    rules = worker_rules(settings, **where, sandbox_network_allow=[host.pattern, mapped])
    got = await probe(ws, rules, [host.pattern, mapped], f"tunnel={host.pattern}", f"tunnel={mapped}")
    reached, detail = got[f"tunnel={host.pattern}"]
    assert not reached and f"is {service}, which commands may never reach" in detail, detail
    reached, detail = got[f"tunnel={mapped}"]
    assert not reached and f"the address of {service} ({host.address})" in detail, detail


# --- the allow-list ---------------------------------------------------------------------------------


async def test_a_host_not_on_the_allow_list_is_refused(bwrap, ws, settings, host):
    rules = worker_rules(settings, sandbox_network_allow=[host.pattern])
    got = await probe(ws, rules, [], f"get={host.url}", f"tunnel={host.pattern}")  # the repository names nothing
    for check in (f"get={host.url}", f"tunnel={host.pattern}"):
        reached, detail = got[check]
        assert not reached and "not on this command's network allow-list" in detail, detail
    assert "refused 2 connection(s)" in got["output"][1]


async def test_a_repository_cannot_allow_what_the_operator_does_not(bwrap, ws, settings, host):
    rules = worker_rules(settings, sandbox_network_allow=[])  # the operator allows nothing more
    got = await probe(ws, rules, [host.pattern], f"get={host.url}")
    reached, detail = got[f"get={host.url}"]
    assert not reached, detail
    assert "the worker's operator does not allow it" in got["output"][1]


async def test_an_allowed_name_that_resolves_to_loopback_is_refused(bwrap, ws, settings, trap):
    name = f"localhost:{trap.port}"
    rules = worker_rules(settings, sandbox_network_allow=[name])
    got = await probe(ws, rules, [name], f"get=http://{name}/steal", f"tunnel={name}")
    for check in (f"get=http://{name}/steal", f"tunnel={name}"):
        reached, detail = got[check]
        assert not reached, detail
    assert f"{name} resolves to a loopback address (127.0.0.1)" in got["output"][1]
    assert trap.hits == []


# --- no sandbox, no network -------------------------------------------------------------------------


async def test_without_bubblewrap_a_command_that_may_use_the_network_is_refused(ws, settings):
    policy = CommandPolicy(timeout_s=60, network=True)
    with pytest.raises(ToolError, match="not run: .* without bubblewrap"):
        await run_command(ws, "touch ran.txt", mode="none", policy=policy, network=worker_rules(settings))
    assert not (ws / "ran.txt").exists()


def test_a_bad_operator_pattern_stops_the_worker_at_start(settings):
    with pytest.raises(UsageError, match="SHOPFLOOR_SANDBOX_NETWORK_ALLOW: .*not a host name"):
        worker_rules(settings, sandbox_network_allow=["pypi.org", "not a host"])


# --- the whole factory --------------------------------------------------------------------------------


async def test_a_fix_agent_reaches_the_allowed_host_and_nothing_of_the_worker(
    bwrap, simulator, settings, running_worker, temporal_client, temporal_server, tmp_path, host
):
    temporal, api = temporal_server.address, simulator.api_url.split("//", 1)[1].split("/", 1)[0]
    checks = (
        f"get={host.url}",
        f"temporal={temporal}",
        f"direct={temporal}",
        f"tunnel={temporal}",
        f"get={simulator.api_url}/repos",
        f"direct={api}",
        "tunnel=169.254.169.254:80",
    )
    policy = POLICY + f'network_for_commands: true\nnetwork_allow: ["{host.pattern}", "{temporal}", "{api}"]\n'
    fix = [
        {"tool_calls": [call("run_command", command=probe_command(*checks))]},
        {"tool_calls": [call("edit_file", **GOOD_EDIT)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(
        simulator,
        settings,
        running_worker,
        temporal_client,
        tmp_path,
        models,
        policy,
        sandbox="bwrap",
        sandbox_network_allow=[host.pattern, temporal, api],
    ) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        fix_run = await temporal_client.get_workflow_handle(f"{f.handle.id}/fix-1", result_type=AgentResult).result()
    assert_merged(f, number, outcome)  # merged after the maintainer's approval, as ever

    messages = await load_messages(FileBlobStore(settings.data_dir / "blobs"), fix_run.transcript)
    (answer,) = [m for m in tool_results(messages).values() if "PROBE " in m.content]
    got = results(answer.content)
    assert set(got) == set(checks), answer.content
    assert got[f"get={host.url}"] == (True, host.token), answer.content
    reached = [check for check, (ok, _) in got.items() if ok and check != f"get={host.url}"]
    assert reached == [], answer.content
    assert "listed workflows" not in answer.content
