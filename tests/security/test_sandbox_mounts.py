"""The sandbox sees only what it is given.

The attack: a command reads what the worker keeps outside its data directory and home — a local
blob store, a `*_FILE` secret under /opt, /var or /run, a key in /etc only root may read (the
sandbox's root may be the host's). Before, the whole host was mounted and only a deny-list was
covered; now an allow-list is mounted, so these paths do not exist inside, while the workspace,
python, pytest and git keep working.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_commands import ETC_PROBE_PREFIX, require_bwrap, sh

from shopfloor.activities.sandbox import SandboxConfig

SECRET = f"SECRET-{uuid.uuid4().hex}"


@pytest.fixture
def config(tmp_path: Path) -> SandboxConfig:
    require_bwrap()
    return SandboxConfig(mode="bwrap", scratch_dir=tmp_path / "scratch")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "README.md").write_text("workspace readme\n")
    return path


def _plant(top: str, relative: str, mode: int) -> Iterator[Path]:
    base = Path(top) / f"shopfloor-probe-{uuid.uuid4().hex[:8]}"
    path = base / relative
    path.parent.mkdir(parents=True)
    path.write_text(SECRET)
    path.chmod(mode)
    try:
        yield path
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(
    params=[
        # (where, what): places outside the data dir and home that the old deny-list did not cover.
        ("/var/tmp", "blobs/ab/abcdef0123"),  # a local blob store elsewhere on the host
        ("/var/lib", "shopfloor/github-app.pem"),  # a *_FILE secret under /var/lib
        ("/opt", "shopfloor/secrets/token"),  # ... under /opt
        ("/run", "secrets/app.pem"),  # ... where container runtimes mount them
    ]
)
def outside_file(request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    top, relative = request.param
    if not os.access(top, os.W_OK):
        pytest.fail(f"cannot plant a probe in {top} (CI runs as root)")
    for path in _plant(top, relative, 0o644):
        yield Path(top), path


async def test_files_outside_the_allow_list_cannot_be_read(config, ws, outside_file):
    top, secret = outside_file
    command = (
        f"cat {secret}; find {top} -type f -name '{secret.name}' -exec cat {{}} +; "
        f"test -e {top} && echo TOP-EXISTS; test -e {secret.parent} && echo DIR-EXISTS"
    )
    out = await sh(ws, command, config)
    assert SECRET not in out.output
    assert "EXISTS" not in out.output, out.output


@pytest.fixture
def root_only_key_in_etc() -> Path:
    """A root-only key in /etc, left there until the whole session ends (tests/conftest.py): every
    sandboxed command lists /etc's owner-only files to cover them, so one that vanished between
    another test's listing and its bubblewrap setup failed that test's command."""
    if os.geteuid() != 0:
        pytest.fail("planting a root-only key in /etc needs root (CI runs as root)")
    base = Path("/etc") / f"{ETC_PROBE_PREFIX}{uuid.uuid4().hex[:8]}"
    path = base / "app.pem"
    base.mkdir()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
    with os.fdopen(fd, "w") as f:
        f.write(SECRET)
    return path


async def test_owner_only_files_in_etc_read_as_nothing(config, ws, root_only_key_in_etc):
    # The sandbox's root is the host's root when the worker runs as root: only mode bits stop it.
    out = await sh(ws, f"cat {root_only_key_in_etc}; echo; cat /etc/shadow | head -c 100; cat /etc/hostname", config)
    assert SECRET not in out.output
    assert "root:" not in out.output
    assert out.output.strip(), "the rest of /etc stays readable"


async def test_only_the_allow_list_is_mounted(config, ws):
    out = await sh(ws, "ls -A /", config)
    assert set(out.output.split()) <= {
        "usr",
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "etc",
        "tmp",
        "dev",
        "proc",
        *{Path(p).parts[1] for p in (sys.prefix, sys.base_prefix, str(ws))},
    }


async def test_the_workspace_and_its_tools_still_work(config, ws, tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(ws)], check=True)
    subprocess.run([*git, "-C", str(ws), "add", "README.md"], check=True)
    subprocess.run([*git, "-C", str(ws), "commit", "-qm", "first"], check=True)
    (ws / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    command = (
        "cat README.md && echo changed >> README.md && git status --short && git log --oneline "
        "&& python -m pytest -q -p no:cacheprovider test_ok.py && echo x > /tmp/t && cat /tmp/t"
    )
    out = await sh(ws, command, config)
    assert out.exit_code == 0, out.output
    assert "workspace readme" in out.output and "M README.md" in out.output and "first" in out.output
    assert "1 passed" in out.output
    assert (ws / "README.md").read_text() == "workspace readme\nchanged\n"
