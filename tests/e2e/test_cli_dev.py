"""`shopfloor dev` and `shopfloor setup` as a user runs them: real processes, free ports, Ctrl-C.

`shopfloor dev` starts its own Temporal dev server (persistent SQLite in the data dir, UI),
registers the search attributes, and runs a worker and the webhook server; Ctrl-C stops them all.
With SHOPFLOOR_TEMPORAL_ADDRESS it uses that server instead.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
from agent_runs import sample_repo
from cli_runs import LongRunning, arun_cli, cli_env, one_line, pid_alive, pids_with_arg, port_open, wait_until
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from shopfloor.devserver import DevServer, free_port
from shopfloor.search_attributes import ALL_KEYS
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow

WANTED = {key.name: int(key.indexed_value_type) for key in ALL_KEYS}


def distinct_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


async def registered_attributes(client: Client) -> dict[str, int]:
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    return {name: int(kind) for name, kind in listed.custom_attributes.items() if name in WANTED}


async def wait_ready(dev: LongRunning, webhook_port: int, timeout_s: float = 90) -> httpx.Response:
    """Poll /healthz then /readyz until both answer 200; fail early if `dev` exits."""
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        for path in ("/healthz", "/readyz"):

            async def ok(path: str = path) -> httpx.Response | None:
                dev.check_alive()
                response = await http.get(f"http://127.0.0.1:{webhook_port}{path}")
                return response if response.status_code == 200 else None

            response = await wait_until(ok, timeout_s, f"GET {path} to answer 200")
        return response


async def run_detached_until_completed(env: dict[str, str], repo: Path) -> tuple[str, str]:
    """`shopfloor agent --detach`, then `shopfloor status` until it says completed."""
    started = await arun_cli(["agent", "explore", "--repo", str(repo), "--goal", "What is this?", "--detach"], env)
    assert started.returncode == 0, str(started)
    workflow_id = one_line(started.stdout)

    async def completed():
        status = await arun_cli(["status", workflow_id], env)
        assert status.returncode == 0, str(status)
        return status.stdout if "state     completed" in status.stdout.splitlines() else None

    return workflow_id, await wait_until(completed, 90, f"{workflow_id} to complete", interval_s=0.5)


def assert_clean_stop(dev: LongRunning, code: int, took: float) -> None:
    output = dev.output()
    assert code == 0, f"exit status {code}:\n{output}"
    assert took < 20
    assert "shopfloor dev stopped" in output
    assert "Traceback" not in output, output
    assert '"level": "error"' not in output and '"level": "critical"' not in output, output


async def test_dev_runs_the_whole_stack_and_ctrl_c_stops_it(tmp_path):
    temporal_port, ui_port, webhook_port, sim_port = distinct_ports(4)
    data = tmp_path / "data"
    db = data / "temporal.sqlite"
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(data),
        SHOPFLOOR_TEMPORAL_PORT=str(temporal_port),
        SHOPFLOOR_TEMPORAL_UI_PORT=str(ui_port),
        SHOPFLOOR_WEBHOOK_PORT=str(webhook_port),
        SHOPFLOOR_SIMULATOR_PORT=str(sim_port),
        SHOPFLOOR_MODEL="scripted:explore-demo",
    )
    repo = sample_repo(tmp_path / "sample")

    with LongRunning(["dev"], env, tmp_path / "dev.log", reap_marker=str(db)) as dev:
        ready = await wait_ready(dev, webhook_port)
        assert ready.json() == {"status": "ok", "temporal": "reachable"}

        # Its own Temporal server: a child process on the configured ports, SQLite in the data dir.
        servers = pids_with_arg(str(db))
        assert len(servers) == 1, servers
        temporal_pid = servers[0]
        cmdline = Path(f"/proc/{temporal_pid}/cmdline").read_bytes().split(b"\0")
        assert [b"--port", str(temporal_port).encode()] == cmdline[cmdline.index(b"--port") :][:2]
        assert [b"--ui-port", str(ui_port).encode()] == cmdline[cmdline.index(b"--ui-port") :][:2]
        assert db.is_file() and db.stat().st_size > 0

        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:

            async def ui_answers():
                return (await http.get(f"http://127.0.0.1:{ui_port}/")).status_code == 200

            await wait_until(ui_answers, 30, "the Temporal UI to answer HTTP")

        client = await connect(Settings(temporal_address=f"127.0.0.1:{temporal_port}"))
        assert await registered_attributes(client) == WANTED

        banner = dev.output()
        assert f"Temporal    127.0.0.1:{temporal_port} (embedded dev server)" in banner
        assert f"Temporal UI http://localhost:{ui_port}" in banner
        assert f"webhooks    http://127.0.0.1:{webhook_port}" in banner
        # No GitHub credentials: the simulator runs too, its hooks aimed at our webhook server.
        assert f"GitHub API  http://127.0.0.1:{sim_port}/api/v3 (simulator" in banner
        assert f"git         http://127.0.0.1:{sim_port}/{{owner}}/{{repo}}.git" in banner
        assert f"webhooks -> http://127.0.0.1:{webhook_port}/webhooks/github (signed" in banner
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            me = await http.get(f"http://127.0.0.1:{sim_port}/api/v3/user", headers={"Authorization": "token user:ada"})
            assert me.status_code == 200 and me.json()["login"] == "ada"

        # The embedded worker runs agents (the CLI finds the server from SHOPFLOOR_TEMPORAL_PORT).
        workflow_id, status = await run_detached_until_completed(env, repo)
        assert "scripted demo model" in status and "temporal  COMPLETED" in status

        code, took = dev.interrupt(timeout_s=20)
        assert_clean_stop(dev, code, took)
        assert not pid_alive(temporal_pid), "the Temporal dev server outlived shopfloor dev"
        for port in (temporal_port, ui_port, webhook_port, sim_port):
            assert not port_open(port), f"port {port} still open after shopfloor dev stopped"

    # Persistent: a new `shopfloor dev` on the same data dir (other ports) still has the run.
    temporal_port2, ui_port2, webhook_port2, sim_port2 = distinct_ports(4)
    env2 = env | {
        "SHOPFLOOR_TEMPORAL_PORT": str(temporal_port2),
        "SHOPFLOOR_TEMPORAL_UI_PORT": str(ui_port2),
        "SHOPFLOOR_WEBHOOK_PORT": str(webhook_port2),
        "SHOPFLOOR_SIMULATOR_PORT": str(sim_port2),
    }
    with LongRunning(["dev"], env2, tmp_path / "dev-2.log", reap_marker=str(db)) as dev2:
        await wait_ready(dev2, webhook_port2)
        again = await arun_cli(["status", workflow_id, "--json"], env2)
        assert again.returncode == 0, str(again)
        data_again = json.loads(again.stdout)
        assert (data_again["temporal_status"], data_again["state"]) == ("COMPLETED", "completed")
        assert "scripted demo model" in data_again["final_answer"]
        code, took = dev2.interrupt(timeout_s=20)
        assert_clean_stop(dev2, code, took)
        assert pids_with_arg(str(db)) == []


async def test_dev_with_a_temporal_address_and_github_credentials_uses_those(
    temporal_server, temporal_client, tmp_path
):
    # All but the webhook port must stay unused; the environment's webhook port gives way to --port.
    temporal_port, ui_port, webhook_port, sim_port, env_webhook_port = distinct_ports(5)
    data = tmp_path / "data"
    queue = f"test-dev-external-{uuid.uuid4().hex[:10]}"
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_DATA_DIR=str(data),
        SHOPFLOOR_TEMPORAL_PORT=str(temporal_port),
        SHOPFLOOR_TEMPORAL_UI_PORT=str(ui_port),
        SHOPFLOOR_WEBHOOK_PORT=str(env_webhook_port),
        SHOPFLOOR_SIMULATOR_PORT=str(sim_port),
        SHOPFLOOR_GITHUB_API_URL="https://github.example.com/api/v3",
        SHOPFLOOR_GITHUB_TOKEN="ghp_not-a-real-token",
        SHOPFLOOR_MODEL="scripted:explore-demo",
    )
    args = ["dev", "--host", "127.0.0.1", "--port", str(webhook_port)]
    with LongRunning(args, env, tmp_path / "dev.log", reap_marker=str(data)) as dev:
        ready = await wait_ready(dev, webhook_port)
        assert ready.json() == {"status": "ok", "temporal": "reachable"}
        assert not port_open(env_webhook_port)
        assert f"Temporal    {temporal_server.address} (external server)" in dev.output()
        assert "Temporal UI" not in dev.output()
        assert not (data / "temporal.sqlite").exists()
        assert pids_with_arg(str(data)) == [], "a Temporal server of its own was started"
        assert not port_open(temporal_port) and not port_open(ui_port)
        # GitHub credentials are configured: no simulator, and the token is never printed.
        assert "GitHub API  https://github.example.com/api/v3" in dev.output()
        assert "simulator" not in dev.output() and not port_open(sim_port)
        assert "ghp_not-a-real-token" not in dev.output()

        # Its worker serves the external server's queue.
        started = await arun_cli(
            [
                "agent",
                "explore",
                "--repo",
                str(sample_repo(tmp_path / "sample")),
                "--goal",
                "What is this?",
                "--detach",
            ],
            env,
        )
        assert started.returncode == 0, str(started)
        handle = temporal_client.get_workflow_handle_for(AgentWorkflow.run, one_line(started.stdout))
        result = await asyncio.wait_for(handle.result(), timeout=90)
        assert result.state == "completed" and "scripted demo model" in result.final_answer
        assert (await handle.describe()).task_queue == queue

        code, took = dev.interrupt(timeout_s=20)
        assert_clean_stop(dev, code, took)
        assert not port_open(webhook_port)
    assert await temporal_client.service_client.check_health()  # the external server is untouched


async def test_setup_registers_search_attributes_once(tmp_path):
    server = DevServer(port=free_port(), log_file=tmp_path / "temporal.log", search_attributes=False)
    server.start()
    try:
        await server.wait_ready()
        client = await connect(Settings(temporal_address=server.address))
        assert await registered_attributes(client) == {}, "the bare server already has them"
        env = cli_env(SHOPFLOOR_TEMPORAL_ADDRESS=server.address, SHOPFLOOR_DATA_DIR=str(tmp_path / "data"))

        first = await arun_cli(["setup"], env)
        assert first.returncode == 0, str(first)
        assert one_line(first.stdout) == f"added: {', '.join(sorted(WANTED))}"

        second = await arun_cli(["setup"], env)
        assert second.returncode == 0, str(second)
        assert one_line(second.stdout) == "search attributes already registered"

        assert await registered_attributes(client) == WANTED
    finally:
        server.stop()


async def test_ctrl_c_while_dev_is_starting_leaves_no_temporal_server(tmp_path):
    temporal_port, ui_port, webhook_port, sim_port = distinct_ports(4)
    db = tmp_path / "data" / "temporal.sqlite"
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(db.parent),
        SHOPFLOOR_TEMPORAL_PORT=str(temporal_port),
        SHOPFLOOR_TEMPORAL_UI_PORT=str(ui_port),
        SHOPFLOOR_WEBHOOK_PORT=str(webhook_port),
        SHOPFLOOR_SIMULATOR_PORT=str(sim_port),
    )
    with LongRunning(["dev"], env, tmp_path / "dev.log", reap_marker=str(db)) as dev:

        async def server_started():
            dev.check_alive()
            return pids_with_arg(str(db))

        (temporal_pid,) = await wait_until(server_started, 60, "the Temporal child to start", interval_s=0.02)
        code, took = dev.interrupt(timeout_s=20)
        assert code in (0, 130), f"exit status {code}:\n{dev.output()}"  # 130: before its handler was set
        assert "Traceback" not in dev.output(), dev.output()
        assert not pid_alive(temporal_pid), "Ctrl-C during startup left the Temporal dev server running"
        assert not port_open(temporal_port) and not port_open(webhook_port) and not port_open(sim_port)


async def test_worker_alone_polls_its_queue_and_ctrl_c_stops_it(temporal_server, temporal_client, tmp_path):
    queue = f"test-worker-alone-{uuid.uuid4().hex[:10]}"
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=queue,
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
    )
    with LongRunning(["worker"], env, tmp_path / "worker.log") as worker:

        async def polling():
            worker.check_alive()
            resp = await temporal_client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace="default",
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
            return bool(resp.pollers)

        await wait_until(polling, 60, f"a worker polling {queue}")
        assert f"worker on {temporal_server.address}, task queue {queue}" in worker.output()
        code, took = worker.interrupt(timeout_s=20)
        output = worker.output()
        assert code == 0, f"exit status {code}:\n{output}"
        assert "Traceback" not in output and '"level": "error"' not in output, output
