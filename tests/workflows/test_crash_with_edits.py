"""Two workers with different workspace directories and a shared blob store that is not a shared
disk (S3, served by moto): the first is SIGKILLed right after its third edit; the second — which
has never seen the repository — rebuilds the workspace from the run's WorkspaceRef, makes the
fourth edit, runs the tests, and finishes the run with every edit intact."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from portable_repos import (
    checkout_with_patch,
    code_input,
    load_messages,
    make_repo,
    run_pytest,
    tool_results,
    tree_state,
    wait_for,
)
from worker_process import WorkerProcess, worker_env_for

from shopfloor.blobs import S3BlobStore, open_blob_store
from shopfloor.devserver import free_port
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.workflows.agent import AgentWorkflow

AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add, mul, sub\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n\n\n"
    "def test_mul():\n    assert mul(4, 3) == 12\n"
)
DOCSTRING = '"""Arithmetic for the calculator."""\n\n\n'
EDITS = [
    {"path": "calc.py", "old": "def add(a, b):\n    return a - b", "new": "def add(a, b):\n    return a + b"},
    {"path": "calc.py", "old": "def sub(a, b):\n    return a + b", "new": "def sub(a, b):\n    return a - b"},
    {"path": "calc.py", "old": "def mul(a, b):\n    return a + b", "new": "def mul(a, b):\n    return a * b"},
    {"path": "calc.py", "old": "def add(a, b):\n", "new": DOCSTRING + "def add(a, b):\n"},
]
AFTER_THREE = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
)
FIXED = DOCSTRING + AFTER_THREE
ANSWER = "Fixed add, sub and mul in calc.py and documented the module; all three tests pass."
TURNS = len(EDITS) + 2  # four edits, the tests, the answer


def script() -> list[ScriptTurn]:
    edits = [ScriptTurn.tool("edit_file", f"edit {i + 1}", **e) for i, e in enumerate(EDITS)]
    return [*edits, ScriptTurn.tool("run_tests", "now the tests"), ScriptTurn(content=ANSWER)]


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(endpoint URL, blob store URL): a bucket on a moto S3 server on its own port."""
    from moto.server import ThreadedMotoServer

    for key, value in AWS.items():
        monkeypatch.setenv(key, value)  # for this process's own look into the store
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        bucket = f"shopfloor-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        yield endpoint, f"s3://{bucket}/runs/blobs"
    finally:
        server.stop()


def checkout(data_dir: Path) -> Path:
    """The one run checkout in a worker's data dir."""
    (run,) = [p for p in (data_dir / "workspaces" / "runs").iterdir() if p.is_dir()]
    return run


async def test_second_worker_finishes_the_run_with_every_edit_intact(
    temporal_client, temporal_server, settings, tmp_path, s3
):
    endpoint, blob_url = s3
    repo = tmp_path / "repo"
    base_sha = make_repo(repo, {"calc.py": BUGGY, "test_calc.py": TESTS})
    assert run_pytest(repo).returncode != 0  # the bug is real: the tests fail before the fix

    data = [tmp_path / "worker-1", tmp_path / "worker-2"]
    with FakeModelServer(script(), latency_s=1.0) as fake:

        def env(data_dir: Path) -> dict[str, str]:
            return worker_env_for(
                temporal_server,
                settings,
                fake,
                SHOPFLOOR_DATA_DIR=str(data_dir),
                SHOPFLOOR_BLOB_URL=blob_url,
                SHOPFLOOR_S3_ENDPOINT_URL=endpoint,
                **AWS,
            )

        handle = result = None
        first = WorkerProcess(env(data[0]), tmp_path / "worker-1.log")
        try:
            try:
                inp = code_input(repo, base_sha, "Make the tests in test_calc.py pass.", heartbeat_s=3)
                handle = await temporal_client.start_workflow(
                    AgentWorkflow.run,
                    inp,
                    id=f"test/crash-edits-{uuid.uuid4().hex[:10]}",
                    task_queue=settings.task_queue,
                )
                # The request for turn 3 carries the third edit's result: that edit is done and
                # checkpointed. Kill while the model "thinks" about it (1 s of latency).
                await wait_for(
                    lambda: first.proc.poll() is not None or any(r.turn == 3 for r in fake.requests),
                    90,
                    "the model request carrying the third edit's result",
                )
                assert first.proc.poll() is None, f"the first worker died on its own:\n{first.log.read_text()}"
                first.kill()
                in_flight = {r.key for r in fake.requests if not r.completed}
                completed_before_kill = sorted(r.turn for r in fake.requests if r.completed)
                first_data_at_kill = tree_state(data[0])
            finally:
                first.stop()

            second = WorkerProcess(env(data[1]), tmp_path / "worker-2.log")
            try:
                result = await asyncio.wait_for(handle.result(), timeout=120)
            finally:
                second.stop()
        finally:
            if handle is not None and result is None:  # failed: leave no run behind on the server
                with contextlib.suppress(Exception):
                    await handle.terminate("test cleanup")
        requests = fake.requests

    assert first.proc.returncode == -9
    assert result.state == "completed", result.reason
    assert result.final_answer == ANSWER
    assert result.steps == TURNS

    # The first worker made edits 1-3; the kill came while the model call after them was in flight.
    assert completed_before_kill == [0, 1, 2] and len(in_flight) == 1

    # No completed model call was repeated, except the one cut off by the kill.
    completed = Counter(r.key for r in requests if r.completed)
    assert len(completed) == TURNS
    repeated = {key for key, n in completed.items() if n > 1}
    assert repeated <= in_flight, f"completed model calls were repeated: {repeated - in_flight}"
    assert sorted({r.turn for r in requests}) == list(range(TURNS))
    assert completed[next(iter(in_flight))] == 1

    # Every tool call succeeded; run_tests (on the second worker's rebuilt checkout) passed.
    store = open_blob_store(url=blob_url, data_dir=tmp_path / "unused", s3_endpoint_url=endpoint)
    assert isinstance(store, S3BlobStore)
    results = tool_results(await load_messages(store, result.transcript))
    assert [results[f"call_{i}_0"].name for i in range(TURNS - 1)] == ["edit_file"] * 4 + ["run_tests"]
    for i in range(len(EDITS)):
        assert not results[f"call_{i}_0"].is_error, results[f"call_{i}_0"].content
    tests = results[f"call_{len(EDITS)}_0"]
    assert not tests.is_error and tests.content.startswith("exit code 0"), tests.content
    assert "3 passed" in tests.content

    # The run's final WorkspaceRef, from S3, applied to a fresh clone: all four edits, tests pass.
    ref = result.workspace
    assert ref is not None and ref.clone_url == str(repo) and ref.base_sha == base_sha and ref.patch_digest
    fresh = checkout_with_patch(ref.clone_url, ref.base_sha, await store.get(ref.patch_digest), tmp_path / "fresh")
    assert (fresh / "calc.py").read_text() == FIXED
    run = run_pytest(fresh)
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout + run.stderr

    # Each worker used its own data dir and no local blob store: the first's checkout holds edits
    # 1-3 and has not changed since the kill; the second rebuilt its own and holds all four.
    assert (checkout(data[0]) / "calc.py").read_text() == AFTER_THREE
    assert tree_state(data[0]) == first_data_at_kill
    assert (checkout(data[1]) / "calc.py").read_text() == FIXED
    assert checkout(data[0]).name == checkout(data[1]).name  # the same run, keyed alike, on two disks
    assert not (data[0] / "blobs").exists() and not (data[1] / "blobs").exists()
    assert (data[1] / "workspaces" / "mirrors").is_dir()
