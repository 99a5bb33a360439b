"""A worker's HTTP endpoint through real runs: `run_worker` (what `shopfloor worker` and `shopfloor
dev` run) against the session's Temporal dev server, an agent run answered by FakeModelServer over
real HTTP, and /metrics, /healthz and /readyz read over real HTTP while the worker runs; the SDK's
own metrics on their port; a port already taken refused in one line by `shopfloor worker`; a
command the sandbox kills at its timeout counted.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from contextlib import suppress

import httpx
from agent_runs import sample_repo, start_agent
from cli_runs import cli_env, one_line, run_cli
from harness_runs import explore_input, wait_for, with_fake
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shopfloor.activities.metrics import REGISTRY
from shopfloor.activities.sandbox import run_command
from shopfloor.devserver import free_port
from shopfloor.models.agent_run import CommandPolicy, WorkspaceRef
from shopfloor.models.transcript import Usage
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.worker import run_worker

MODEL = "openai:metrics-fake"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition's samples: (name, labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples that carry all of `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= ls)


def two_ports() -> tuple[int, int]:
    first = free_port()
    while (second := free_port()) == first:
        pass
    return first, second


async def test_worker_serves_metrics_health_and_readiness_during_an_agent_run(temporal_client, settings, tmp_path):
    repo_dir = sample_repo(tmp_path / "repo")
    repo = f"acme/widgets-{uuid.uuid4().hex[:8]}"  # its own label: counters are the process's
    port, sdk_port = two_ports()
    script = [
        ScriptTurn(
            tool_calls=[("read_file", {"path": "README.md"})],
            usage=Usage(input_tokens=1200, output_tokens=80),
        ),
        ScriptTurn(content="It greets people.", usage=Usage(input_tokens=1500, output_tokens=40)),
    ]
    base = f"http://127.0.0.1:{port}"
    with FakeModelServer(script) as fake:
        s = with_fake(settings, fake).model_copy(
            update={
                "worker_metrics_port": port,
                "worker_sdk_metrics_port": sdk_port,
                "prices": {MODEL: (3.0, 15.0)},  # USD per million tokens
            }
        )
        worker = asyncio.create_task(run_worker(temporal_client, s, graceful=False))
        try:
            async with httpx.AsyncClient(timeout=10) as http:

                async def ready() -> bool:
                    with suppress(httpx.TransportError):
                        return (await http.get(f"{base}/readyz")).status_code == 200
                    return False

                await wait_for(ready, timeout_s=60, what="the worker's /readyz to answer 200")
                inp = explore_input(repo_dir, MODEL)
                inp = inp.model_copy(update={"workspace": WorkspaceRef(repo=repo, path=str(repo_dir))})
                handle = await start_agent(temporal_client, inp, s.task_queue)
                result = await handle.result()
                assert result.state == "completed", result

                # Right after the run, the worker still running: every endpoint answers.
                assert (await http.get(f"{base}/healthz")).status_code == 200
                readyz = await http.get(f"{base}/readyz")
                assert readyz.status_code == 200, readyz.text
                page = await http.get(f"{base}/metrics")
                sdk_page = await http.get(f"http://127.0.0.1:{sdk_port}/metrics")
        finally:
            worker.cancel()
            with suppress(asyncio.CancelledError):
                await worker

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    found = samples(page.text)
    mine = {"repo": repo, "model": MODEL}
    assert value(found, "shopfloor_agent_steps_total", agent="explore", **mine) == 2, page.text
    assert value(found, "shopfloor_model_calls_total", purpose="step", outcome="ok", **mine) == 2
    assert value(found, "shopfloor_model_call_seconds_count", **mine) == 2
    assert value(found, "shopfloor_model_tokens_total", kind="input", **mine) == 2700
    assert value(found, "shopfloor_model_tokens_total", kind="output", **mine) == 120
    expected_cost = (2700 * 3.0 + 120 * 15.0) / 1_000_000
    assert abs(value(found, "shopfloor_model_cost_usd_total", **mine) - expected_cost) < 1e-9
    assert value(found, "shopfloor_tool_calls_total", tool="read_file", repo=repo, outcome="ok") == 1
    # The queue's figures, read from Temporal when the worker started (every 15 s after that).
    queue = {"task_queue": s.task_queue}
    assert value(found, "shopfloor_task_queue_polled_timestamp_seconds", **queue) > 0
    for kind in ("workflow", "activity"):
        assert ("shopfloor_task_queue_backlog", frozenset({**queue, "type": kind}.items())) in found
    # The Temporal SDK's own metrics, from its exporter on the other port.
    assert sdk_page.status_code == 200 and "temporal_" in sdk_page.text, sdk_page.text[:500]

    # Stopped with the worker: the port is free again.
    with socket.create_server(("127.0.0.1", port)):
        pass


async def test_worker_refuses_a_metrics_port_already_taken_in_one_line(settings, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = cli_env(
            SHOPFLOOR_TEMPORAL_ADDRESS=settings.effective_temporal_address,
            SHOPFLOOR_TASK_QUEUE=settings.task_queue,
            SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
            SHOPFLOOR_WORKER_METRICS_PORT=str(port),
            SHOPFLOOR_WORKER_SDK_METRICS_PORT="0",
        )
        result = await asyncio.to_thread(run_cli, ["worker"], env, timeout_s=60)
    assert result.returncode == 2, str(result)
    # The worker's start-up log (JSON lines) may come first; the error is one line, and the last.
    line = one_line(result.stderr.splitlines()[-1])
    assert line.startswith("shopfloor: "), line
    assert "worker started" not in result.stderr, result.stderr  # refused before it starts
    assert f"port {port} on 127.0.0.1 (the worker's metrics and health) cannot be used" in line, line
    assert "SHOPFLOOR_WORKER_METRICS_PORT" in line, line
    assert "Traceback" not in result.stderr + result.stdout


async def test_a_command_killed_at_its_timeout_is_counted(tmp_path):
    # mode "none": the kill is the same with or without bubblewrap, and this runs on any machine.
    def kills() -> float:
        return value(samples(generate_latest(REGISTRY).decode()), "shopfloor_sandbox_kills_total", reason="timeout")

    before = kills()
    outcome = await run_command(tmp_path, "sleep 30", mode="none", policy=CommandPolicy(timeout_s=60), timeout_s=0.5)
    assert outcome.timed_out, outcome
    assert kills() == before + 1
    finished = await run_command(tmp_path, "true", mode="none", policy=CommandPolicy(timeout_s=60))
    assert finished.exit_code == 0 and kills() == before + 1  # a command that ends is no kill
