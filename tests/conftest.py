"""Test session fixtures: a real Temporal dev server on a free port, workers with no cache."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.worker import Worker

from shopfloor.blobs import BlobStore, FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.worker import ProviderCache, build_worker

@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> DevServer:
    logs = tmp_path_factory.mktemp("temporal")
    server = DevServer(port=free_port(), db_file=None, log_file=logs / "temporal.log")
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session")
async def temporal_client(temporal_server: DevServer) -> Client:
    await temporal_server.wait_ready()
    return await connect(Settings(temporal_address=temporal_server.address))


@pytest.fixture
def settings(temporal_server: DevServer, tmp_path: Path) -> Settings:
    """Settings as a worker of this test would read them: its own data dir and task queue."""
    return Settings(
        temporal_address=temporal_server.address,
        task_queue=f"test-{uuid.uuid4().hex[:10]}",
        data_dir=tmp_path / "data",
        max_cached_workflows=0,  # every workflow task replays from history
        model="scripted:explore-demo",
    )


@pytest.fixture
def blobs(settings: Settings) -> BlobStore:
    return FileBlobStore(settings.data_dir / "blobs")


@pytest_asyncio.fixture
async def running_worker(temporal_client: Client, settings: Settings, blobs: BlobStore):
    """A worker in this process; yields an async context manager factory for custom settings."""

    @asynccontextmanager
    async def run(s: Settings = settings) -> AsyncIterator[Worker]:
        providers = ProviderCache(s)
        worker = build_worker(temporal_client, s, providers=providers, blobs=blobs)
        async with worker:
            yield worker
        await providers.aclose()

    return run


@pytest.fixture
def simulator(tmp_path: Path):
    """A GitHub simulator on a free port for this test (tests/support/simulator_runs.py)."""
    from simulator_runs import running_simulator

    with running_simulator(tmp_path / "sim") as handle:
        yield handle
