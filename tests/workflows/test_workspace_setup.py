"""The `workspace_setup` activity and commands on a prepared environment, on real parts: a real git
repository, the bubblewrap sandbox, the egress proxy, a package index on loopback named as the
operator's mirror, and the file blob store. A second worker (its own workspaces directory, the
same blob store) finds the environment by its key and restores it for its commands.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from package_index import PackageIndex, build_wheel
from portable_repos import make_repo
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.environment import Environments
from shopfloor.activities.sandbox import resolve_mode
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.activities.tools.activities import ToolActivities
from shopfloor.activities.workspace import Workspaces
from shopfloor.activities.workspace_setup import WorkspaceSetupActivities
from shopfloor.blobs import FileBlobStore, put_json
from shopfloor.models import failure_types
from shopfloor.models.agent_run import ToolInput, WorkspaceRef
from shopfloor.models.repo_profile import SetupInput
from shopfloor.models.transcript import Message, ToolCall
from shopfloor.settings import Settings

TINY = build_wheel("tinypkg", "1.0", {"tinypkg/__init__.py": "VALUE = 42\n"})


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


@pytest.fixture
def index() -> Iterator[PackageIndex]:
    served = PackageIndex({"tinypkg": TINY})
    yield served
    served.close()


class Worker:
    """One worker's setup and tool activities over a shared blob store."""

    def __init__(self, root: Path, blobs: FileBlobStore, settings: Settings, mirrors: list[str]) -> None:
        self.blobs = blobs
        workspaces = Workspaces(root / "workspaces", blobs)
        environments = Environments(workspaces.root, blobs)
        network = SandboxNetwork.from_settings(settings.model_copy(update={"sandbox_mirrors": mirrors}))
        self.setup = WorkspaceSetupActivities(workspaces, environments, sandbox="bwrap", network=network)
        self.tools = ToolActivities(blobs, workspaces, sandbox="bwrap", network=network, environments=environments)

    async def prepare(self, inp: SetupInput):
        return await ActivityEnvironment().run(self.setup.workspace_setup, inp)

    async def run(self, ws: WorkspaceRef, command: str, run_id: str) -> tuple[bool, str]:
        reply = Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="run_command", arguments={"command": command})]
        )
        inp = ToolInput(
            workspace=ws,
            reply_digest=await put_json(self.blobs, reply),
            call_id="c1",
            name="run_command",
            run_id=run_id,
        )
        result = await ActivityEnvironment().run(self.tools.run_command, inp)
        return result.ok, (await self.blobs.get(result.output_digest)).decode()


def base(tmp_path: Path, files: dict[str, str]) -> WorkspaceRef:
    repo = tmp_path / "repo"
    sha = make_repo(repo, files)
    return WorkspaceRef(repo="acme/app", clone_url=str(repo), base_sha=sha)


async def test_setup_installs_from_the_mirror_and_another_worker_reuses_it(bwrap, tmp_path, settings, index):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {"app.py": "import tinypkg\n", ".gitignore": "build/\n"})
    setup = [f"python -m pip install --index-url {index.url} tinypkg", "mkdir -p build && echo made > build/out.txt"]
    first = Worker(tmp_path / "w1", blobs, settings, [index.endpoint])
    out = await first.prepare(SetupInput(workspace=ws, commands=setup, run_id="run-1"))
    assert not out.reused and out.commands_run == 2 and out.workspace.environment
    assert out.workspace.model_copy(update={"environment": None}) == ws
    assert index.downloads == ["tinypkg-1.0-py3-none-any.whl"]

    # Another worker, same key: nothing runs, the same environment is named.
    second = Worker(tmp_path / "w2", blobs, settings, [index.endpoint])
    again = await second.prepare(SetupInput(workspace=ws, commands=setup, run_id="run-2"))
    assert again.reused and again.commands_run == 0 and again.workspace == out.workspace
    assert index.downloads == ["tinypkg-1.0-py3-none-any.whl"]

    # Its commands get the environment restored: the package, pytest behind it, setup's ignored files.
    check = "python -c 'import tinypkg; print(tinypkg.VALUE)' && python -m pytest --version && cat build/out.txt && echo $VIRTUAL_ENV"
    ok, output = await second.run(out.workspace, check, "run-2")
    assert ok, output
    assert "42" in output and "pytest" in output and "made" in output and "/shopfloor/env/venv" in output

    # Without the environment, the same command runs as before: the worker's Python has no tinypkg.
    ok, output = await second.run(ws, "python -c 'import tinypkg'", "run-3")
    assert not ok and "No module named 'tinypkg'" in output


async def test_one_runs_changes_to_its_environment_stay_its_own(bwrap, tmp_path, settings, index):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {"app.py": "x = 1\n"})
    worker = Worker(tmp_path / "w1", blobs, settings, [index.endpoint])
    out = await worker.prepare(
        SetupInput(workspace=ws, commands=[f"python -m pip install --index-url {index.url} tinypkg"], run_id="run-1")
    )
    ok, output = await worker.run(
        out.workspace, "rm -rf /shopfloor/env/venv/lib/python*/site-packages/tinypkg", "run-1"
    )
    assert ok, output
    ok, output = await worker.run(out.workspace, "python -c 'import tinypkg; print(tinypkg.VALUE)'", "run-other")
    assert ok and "42" in output, output


async def test_a_failing_setup_command_fails_with_its_output(bwrap, tmp_path, settings):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {"app.py": "x = 1\n"})
    worker = Worker(tmp_path / "w1", blobs, settings, [])
    with pytest.raises(Exception) as caught:
        await worker.prepare(
            SetupInput(workspace=ws, commands=["echo preparing", "echo broken-dependency >&2; exit 3"], run_id="r")
        )
    err = caught.value
    assert isinstance(err, ApplicationError) and err.type == failure_types.SETUP_FAILED and err.non_retryable
    assert "`echo broken-dependency >&2; exit 3` failed (exit code 3)" in err.message
    assert "broken-dependency" in err.message


async def test_setup_that_makes_files_git_would_carry_fails_naming_them(bwrap, tmp_path, settings):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {"app.py": "x = 1\n"})
    worker = Worker(tmp_path / "w1", blobs, settings, [])
    with pytest.raises(ApplicationError) as caught:
        await worker.prepare(
            SetupInput(workspace=ws, commands=["echo y > generated.py && echo 2 >> app.py"], run_id="r")
        )
    assert caught.value.type == failure_types.SETUP_FAILED
    assert "app.py" in caught.value.message and "generated.py" in caught.value.message
