"""The `workspace_setup` activity and commands on a prepared environment, on real parts: a real git
repository, the bubblewrap sandbox, the egress proxy, a package index on loopback named as the
operator's mirror, and the file blob store. A second worker (its own workspaces directory, the
same blob store) finds the environment by its key and restores it for its commands.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from package_index import PackageIndex, build_wheel
from setup_runs import Worker, base
from temporalio.exceptions import ApplicationError

from shopfloor.activities.sandbox import resolve_mode
from shopfloor.blobs import FileBlobStore
from shopfloor.models import failure_types
from shopfloor.models.repo_profile import SetupInput

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


NODE_LIKE = [
    "mkdir -p node_modules/.bin dist",
    "printf '#!/bin/sh\\necho tool-ok\\n' > node_modules/.bin/mytool && chmod +x node_modules/.bin/mytool",
    "echo built > dist/out.txt",
]


async def test_what_setup_leaves_that_git_ignores_is_kept_and_its_bin_is_on_path(bwrap, tmp_path, settings):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {"index.js": "1\n", ".gitignore": "node_modules/\ndist/\n"})
    out = await Worker(tmp_path / "w1", blobs, settings, []).prepare(
        SetupInput(workspace=ws, commands=NODE_LIKE, run_id="run-1")
    )
    # Another worker rebuilds the checkout from git: setup's ignored files come back with the environment.
    other = Worker(tmp_path / "w2", blobs, settings, [])
    ok, output = await other.run(out.workspace, "mytool && cat dist/out.txt", "run-2")
    assert ok and "tool-ok" in output and "built" in output, output


async def test_an_environment_over_the_cap_fails_setup_saying_so(bwrap, tmp_path, settings):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {".gitignore": "big/\n"})
    worker = Worker(tmp_path / "w1", blobs, settings, [], max_bytes=1024 * 1024)
    with pytest.raises(ApplicationError) as caught:
        await worker.prepare(
            SetupInput(workspace=ws, commands=["mkdir big && head -c 3000000 /dev/urandom > big/blob"], run_id="r")
        )
    assert caught.value.type == failure_types.SETUP_FAILED
    assert "SHOPFLOOR_MAX_ENVIRONMENT_BYTES" in caught.value.message


async def test_without_bubblewrap_setup_and_commands_on_an_environment_are_refused(bwrap, tmp_path, settings):
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {".gitignore": "dist/\n"})
    unsandboxed = Worker(tmp_path / "w0", blobs, settings, [], sandbox="none")
    with pytest.raises(ApplicationError) as caught:
        await unsandboxed.prepare(SetupInput(workspace=ws, commands=["mkdir dist"], run_id="r"))
    assert caught.value.type == failure_types.SETUP_FAILED and "bubblewrap" in caught.value.message
    out = await Worker(tmp_path / "w1", blobs, settings, []).prepare(
        SetupInput(workspace=ws, commands=["mkdir dist"], run_id="r")
    )
    ok, output = await unsandboxed.run(out.workspace, "true", "r2")
    assert not ok and "prepared environment" in output and "bubblewrap" in output, output
