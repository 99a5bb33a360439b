"""The command sandbox (activities/sandbox.py), against the real bubblewrap.

CI installs bubblewrap, so a machine where it cannot run fails these tests loudly; set
SHOPFLOOR_ALLOW_NO_BWRAP=1 to skip them on a laptop without it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sandbox_commands import alive, none_alive

from shopfloor.activities import sandbox
from shopfloor.activities.sandbox import CommandOutcome, SandboxConfig, detect_test_command, resolve_mode, run_command
from shopfloor.errors import ToolError, UsageError
from shopfloor.models.agent_run import CommandPolicy

PY = "python3"


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        if os.environ.get("SHOPFLOOR_ALLOW_NO_BWRAP") == "1":
            pytest.skip(f"bubblewrap is not usable here: {note}")
        pytest.fail(
            f"bubblewrap is not usable here ({note}); install bubblewrap, "
            "or set SHOPFLOOR_ALLOW_NO_BWRAP=1 to skip the sandbox tests"
        )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def sh(ws: Path, command: str, *, mode: str = "bwrap", **kw) -> CommandOutcome:
    policy = kw.pop("policy", None) or CommandPolicy(timeout_s=60, **kw.pop("limits", {}))
    return await run_command(ws, command, mode=mode, policy=policy, **kw)


# --- the boundary ------------------------------------------------------------------------------


async def test_the_workspace_is_writable(bwrap, ws):
    out = await sh(ws, "echo hello > made.txt && mkdir -p d/e && touch d/e/f && pwd")
    assert out.exit_code == 0, out.output
    assert out.sandboxed and out.sandbox_note == ""
    assert (ws / "made.txt").read_text() == "hello\n"
    assert (ws / "d/e/f").is_file()
    assert out.output.strip() == os.path.realpath(ws)


async def test_tools_of_a_worker_living_under_tmp_stay_usable(bwrap, ws, tmp_path):
    # /tmp is a fresh tmpfs in the sandbox; a worker installed under it (a CI checkout's venv)
    # must still find its own programs there, read-only.
    tools = tmp_path / "venv" / "bin"
    tools.mkdir(parents=True)
    (tools / "worker-tool").write_text("#!/bin/sh\necho tool-ran\n")
    (tools / "worker-tool").chmod(0o755)
    out = await sh(
        ws, "worker-tool && touch " + str(tools / "x") + " 2>/dev/null; echo rc=$?", path_prepend=[str(tools)]
    )
    assert "tool-ran" in out.output, out.output
    assert "rc=1" in out.output and not (tools / "x").exists()  # read-only


@pytest.mark.parametrize(
    "command",
    [
        "touch /usr/shopfloor-probe",
        "echo x > /etc/shopfloor-probe",
        "mkdir /shopfloor-probe",
        "mkdir /opt",
        "touch /dev/shopfloor-probe",
    ],
)
async def test_the_system_is_read_only(bwrap, ws, command):
    out = await sh(ws, command)
    assert out.exit_code != 0
    assert "Read-only file system" in out.output
    for probe in ("/usr/shopfloor-probe", "/etc/shopfloor-probe", "/shopfloor-probe", "/dev/shopfloor-probe"):
        assert not os.path.exists(probe)


async def test_existing_system_files_are_unchanged(bwrap, ws):
    before = Path("/etc/hosts").read_bytes()
    out = await sh(ws, "echo pwned > /etc/hosts")
    assert out.exit_code != 0
    assert Path("/etc/hosts").read_bytes() == before


async def test_writes_to_home_and_beside_the_workspace_are_contained(bwrap, ws):
    name = f"shopfloor-probe-{uuid.uuid4().hex[:8]}"
    home = Path.home()
    out = await sh(ws, f"touch ~/{name}; touch {home}/{name}; touch ../{name}; echo $HOME")
    assert out.output.strip().splitlines()[-1] == sandbox.SANDBOX_HOME
    assert not (home / name).exists()
    assert not (ws.parent / name).exists()


async def test_hidden_directories_are_not_visible(bwrap, ws, tmp_path):
    fake_home = tmp_path / "fake-home"
    (fake_home / ".ssh").mkdir(parents=True)
    (fake_home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-123")
    (fake_home / "notes.txt").write_text("SECRET-NOTES-456")
    out = await sh(ws, f"cat {fake_home}/.ssh/id_rsa {fake_home}/notes.txt; ls -A {fake_home}", hide=[fake_home])
    assert "PRIVATE-KEY-123" not in out.output and "SECRET-NOTES-456" not in out.output
    assert ".ssh" not in out.output.split()


async def test_real_home_directories_are_hidden(bwrap, ws):
    out = await sh(ws, "ls -A /root /home 2>&1; cat /etc/shadow 2>&1 | head -c 200")
    # Only the way to this Python (mounted back so `python` works) may show under /root or /home.
    allowed = {
        Path(os.path.realpath(p)).parts[2]
        for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))
        if os.path.realpath(p).startswith(("/root/", "/home/"))
    }
    for top in ("/root", "/home"):
        if os.path.isdir(top) and os.access(top, os.R_OK):
            for entry in set(os.listdir(top)) - allowed:
                assert f"\n{entry}\n" not in f"\n{out.output}\n", f"{top}/{entry} is visible in the sandbox"
    assert "\nroot:" not in "\n" + out.output  # /etc/shadow reads as nothing


async def test_the_environment_is_clean(bwrap, ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    monkeypatch.setenv("SHOPFLOOR_GITHUB_TOKEN", "ghp-secret-456")
    out = await sh(ws, "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert out.exit_code == 0
    assert "sk-secret-123" not in out.output and "ghp-secret-456" not in out.output
    names = {line.split("=", 1)[0] for line in out.output.splitlines() if "=" in line}
    assert names <= {"PATH", "HOME", "LANG", "TERM", "PYTHONDONTWRITEBYTECODE", "PWD", "SHLVL", "_", "OLDPWD"}
    assert {"PATH", "HOME", "LANG", "TERM", "PYTHONDONTWRITEBYTECODE"} <= names


async def test_the_host_network_is_never_shared(bwrap, ws):
    async def answer(reader, writer):
        writer.write(b"hello from outside\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = (
        f"{PY} -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=2); "
        'print(s.recv(100).decode())"'
    )
    async with server:
        outside = await sh(ws, probe, mode="none")
        assert outside.exit_code == 0 and "hello from outside" in outside.output
        closed = await sh(ws, probe)
        assert closed.exit_code != 0 and "hello from outside" not in closed.output
        # Network allowed: only through the egress proxy, which never reaches this machine
        # (tests/security/test_sandbox_network.py); the direct connection has no route.
        opened = await sh(ws, probe, policy=CommandPolicy(timeout_s=60, network=True))
        assert opened.exit_code != 0 and "hello from outside" not in opened.output, opened.output


async def test_git_works_on_a_checkout_borrowing_objects_from_a_hidden_mirror(bwrap, tmp_path):
    data = tmp_path / "data"
    origin = data / "origin"
    origin.mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    (origin / "a.txt").write_text("one\n")
    subprocess.run([*git, "-C", str(origin), "add", "a.txt"], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "first"], check=True)
    checkout = data / "runs" / "r1"
    subprocess.run(["git", "clone", "-q", "--shared", str(origin), str(checkout)], check=True)
    out = await sh(
        checkout, "git log --oneline && echo two >> a.txt && git diff --stat && ls -A ../../origin", hide=[data]
    )
    assert out.exit_code == 0, out.output
    assert "first" in out.output and "1 file changed" in out.output
    # Of the hidden data directory only the borrowed objects came back (read-only).
    assert out.output.splitlines()[-1] == ".git"
    denied = await sh(checkout, "touch ../../origin/.git/objects/x", hide=[data])
    assert denied.exit_code != 0 and not (origin / ".git/objects/x").exists()


# --- limits, output, processes -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_a_timeout_kills_the_whole_process_tree(bwrap, ws, mode):
    marker = f"sf-sleeper-{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    out = await sh(ws, f"(exec -a {marker}-a sleep 100) & exec -a {marker}-b sleep 100", mode=mode, timeout_s=1)
    assert time.monotonic() - started < 6
    assert out.timed_out and out.exit_code is None
    assert "timed out after 1 s" in (out.killed_reason or "")
    assert await none_alive(marker, within_s=3.0), alive(marker)


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_background_processes_do_not_outlive_the_command(bwrap, ws, mode):
    marker = f"sf-straggler-{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    out = await sh(ws, f"(exec -a {marker} sleep 100) & echo started", mode=mode)
    assert out.exit_code == 0 and out.output == "started\n" and not out.timed_out
    assert time.monotonic() - started < 6
    assert await none_alive(marker, within_s=3.0), alive(marker)


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_cancelling_the_run_kills_the_process_tree(bwrap, ws, mode):
    marker = f"sf-cancelled-{uuid.uuid4().hex[:10]}"
    task = asyncio.create_task(sh(ws, f"(exec -a {marker} sleep 100) & exec -a {marker} sleep 100", mode=mode))
    deadline = time.monotonic() + 5
    while not alive(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert alive(marker), "the command never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await none_alive(marker, within_s=3.0), alive(marker)


async def test_output_keeps_head_and_tail_around_a_marker(bwrap, ws):
    command = f"{PY} -c \"import sys; sys.stdout.write('HEAD' + 'x' * 5_000_000 + 'TAIL')\""
    out = await sh(ws, command, limits={"output_cap_bytes": 10_000})
    assert out.exit_code == 0
    assert out.output_bytes == 5_000_008
    assert out.output.startswith("HEADxxx") and out.output.endswith("xxxTAIL")
    assert f"[... {5_000_008 - 10_000} bytes cut ...]" in out.output
    assert len(out.output) < 10_100


async def test_stdout_and_stderr_are_interleaved_in_order(bwrap, ws):
    out = await sh(ws, "echo out1; echo err1 >&2; echo out2; exit 3")
    assert out.output == "out1\nerr1\nout2\n"
    assert out.exit_code == 3 and out.killed_reason is None and not out.timed_out


async def test_the_cpu_limit_kills_a_busy_loop(bwrap, ws):
    started = time.monotonic()
    out = await sh(ws, f"{PY} -c 'while True: pass'", limits={"cpu_s": 1})
    assert time.monotonic() - started < 15
    assert out.exit_code in (128 + 24, 128 + 9)  # SIGXCPU at the soft limit, SIGKILL at the hard one
    assert "CPU time limit (1 s)" in (out.killed_reason or "")
    assert not out.timed_out


async def test_the_memory_limit_stops_a_large_allocation(bwrap, ws):
    out = await sh(ws, f"{PY} -c 'b = bytearray(2 * 1024 ** 3); print(len(b))'", limits={"memory_mb": 256})
    assert out.exit_code != 0
    assert "MemoryError" in out.output


async def test_progress_is_reported_while_it_runs(bwrap, ws):
    calls: list[str] = []
    out = await sh(ws, "sleep 1.5; echo done", on_progress=calls.append, progress_interval_s=0.2)
    assert out.exit_code == 0
    assert len(calls) >= 3 and "running for" in calls[-1]


async def test_the_model_cannot_raise_the_policy_timeout(bwrap, ws):
    out = await sh(ws, "sleep 30", policy=CommandPolicy(timeout_s=1), timeout_s=3000)
    assert out.timed_out and "1 s" in (out.killed_reason or "")


# --- modes -------------------------------------------------------------------------------------


async def test_mode_none_runs_with_a_clean_environment_and_says_so(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    out = await sh(ws, "env; pwd", mode="none")
    assert out.exit_code == 0
    assert not out.sandboxed and "UNSANDBOXED" in out.sandbox_note
    assert "sk-secret-123" not in out.output
    assert out.output.strip().splitlines()[-1] == os.path.realpath(ws)


@pytest.fixture
def no_bwrap(monkeypatch):
    sandbox._bwrap_problem.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k: None)
    yield
    sandbox._bwrap_problem.cache_clear()


@pytest.mark.fast
def test_resolve_mode_when_bubblewrap_is_missing(no_bwrap):
    with pytest.raises(UsageError, match="bwrap was not found"):
        resolve_mode("bwrap")
    mode, note = resolve_mode("auto")
    assert (
        mode == "refuse" and "SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS=true" in note and "bubblewrap is not usable" in note
    )
    mode, note = resolve_mode(SandboxConfig(mode="auto", allow_unsandboxed=True))
    assert mode == "none" and "UNSANDBOXED" in note and "bubblewrap is not usable" in note


async def test_auto_falls_back_loudly_only_when_the_operator_allows_it(no_bwrap, ws):
    with pytest.raises(ToolError, match="SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS"):
        await sh(ws, "echo hi", mode="auto")
    out = await sh(ws, "echo hi", mode=SandboxConfig(mode="auto", allow_unsandboxed=True))
    assert out.exit_code == 0 and out.output == "hi\n"
    assert not out.sandboxed and "bubblewrap is not usable" in out.sandbox_note


@pytest.mark.fast
def test_resolve_mode_rejects_unknown_modes():
    with pytest.raises(UsageError, match="auto, bwrap or none"):
        resolve_mode("docker")
    assert resolve_mode("none")[0] == "none"


def test_resolve_mode_prefers_bubblewrap(bwrap):
    assert resolve_mode("auto") == ("bwrap", "")
    assert resolve_mode("bwrap") == ("bwrap", "")


# --- detect_test_command -----------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pytest.ini": ""}, "python -m pytest -q"),
        ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "python -m pytest -q"),
        ({"pyproject.toml": "[project]\nname='x'\n", "tests/test_a.py": ""}, "python -m pytest -q"),
        ({"tests/helpers.py": ""}, "python -m pytest -q"),
        ({"src/pkg/test_mod.py": ""}, "python -m pytest -q"),
        ({"setup.cfg": "[tool:pytest]\n"}, "python -m pytest -q"),
        ({"package.json": '{"scripts": {"test": "jest"}}'}, "npm test --silent"),
        ({"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'}, None),
        ({"package.json": '{"scripts": {"test": "vitest"}}', "tests/e2e.spec.js": ""}, "npm test --silent"),
        ({"go.mod": "module x\n"}, "go test ./..."),
        ({"Cargo.toml": "[package]\n"}, "cargo test"),
        ({"Makefile": "build:\n\ttrue\ntest: build\n\ttrue\n"}, "make test"),
        ({"Makefile": "build:\n\ttrue\n"}, None),
        ({"README.md": "hi"}, None),
        ({}, None),
    ],
)
def test_detect_test_command(tmp_path, files, expected):
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    assert detect_test_command(tmp_path) == expected
