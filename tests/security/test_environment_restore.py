"""Restoring a prepared environment must not write outside the run's checkout.

setup's git-ignored files (node_modules, build output) are put back into the checkout by the
worker itself, outside the sandbox, whenever a command finds them missing. The attack: a command
replaces one of those directories with a symlink to a directory on the worker and removes another,
so the next command's restore would write through the link onto the host. The restore refuses
(the archive is extracted with tarfile's "tar" filter, which resolves every member's path), the
model reads why, and nothing lands on the host.
"""

from __future__ import annotations

import pytest
from setup_runs import Worker, base

from shopfloor.activities.sandbox import resolve_mode
from shopfloor.blobs import FileBlobStore
from shopfloor.models.repo_profile import SetupInput


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


async def test_a_link_a_command_plants_does_not_lead_the_restore_out_of_the_checkout(bwrap, tmp_path, settings):
    victim = tmp_path / "worker-dir"  # a directory of the worker's, outside every checkout
    victim.mkdir()
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = base(tmp_path, {".gitignore": "node_modules\nbuild\n"})  # a link named so is ignored too
    worker = Worker(tmp_path / "w1", blobs, settings, [])
    setup = ["mkdir -p node_modules/.bin build", "echo payload > node_modules/.bin/tool", "echo x > build/out"]
    out = await worker.prepare(SetupInput(workspace=ws, commands=setup, run_id="run-1"))

    ok, output = await worker.run(out.workspace, f"rm -rf node_modules build && ln -s {victim} node_modules", "run-1")
    assert ok, output
    ok, output = await worker.run(out.workspace, "echo next", "run-1")  # build/ is missing: a restore
    assert not ok and "could not be put back into the checkout" in output, output
    assert list(victim.iterdir()) == []  # nothing written through the link
