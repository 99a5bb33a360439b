"""A `run_python` program written by a model that strangers steer tries to get past its functions:
it opens the checkout's files directly, looks for the worker's files, writes a forged call for a
credential straight to the harness's channel, opens a connection to a server on the worker's
loopback, and floods the worker with calls. The program's sandbox holds no checkout and no network
of the worker's, and every line on its channel is judged by the worker like a tool call, so none of
it works (activities/code_mode.py)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from portable_repos import make_repo

from shopfloor.activities.code_mode import MAX_CALLS, run_program
from shopfloor.activities.sandbox import SandboxConfig
from shopfloor.agents.permissions import PermissionPolicy
from shopfloor.models.agent_run import CommandPolicy

SECRET = "sk-live-not-for-programs"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    make_repo(root, {"app.py": "print('hi')\n", ".git-credentials": f"https://bot:{SECRET}@example.com\n"})
    return root


async def run(root: Path, code: str, tmp_path: Path):
    sandbox = SandboxConfig(mode="bwrap", scratch_dir=tmp_path / "scratch")
    return await run_program(root, code, sandbox=sandbox, policy=CommandPolicy(), permissions=PermissionPolicy())


async def test_the_program_sees_no_checkout_and_none_of_the_workers_files(checkout: Path, tmp_path: Path):
    code = f"""
import os
for path in ["app.py", {str(checkout / "app.py")!r}, {str(checkout / ".git-credentials")!r}]:
    print(path.rsplit("/", 1)[-1], os.path.exists(path))
print("beside", sorted(os.listdir({str(tmp_path)!r})))  # only the way to its own scratch directory
print("cwd", sorted(os.listdir(".")))
print("via function", read_file("app.py").strip())
"""
    report = await run(checkout, code, tmp_path)
    assert report.ok, report
    lines = report.output.splitlines()
    assert lines[:4] == ["app.py False", "app.py False", ".git-credentials False", "beside ['scratch']"], lines
    assert "cwd []" in lines and "via function 1\tprint('hi')" in lines
    assert SECRET not in report.text()


async def test_a_forged_call_on_the_channel_is_judged_like_any_other(checkout: Path, tmp_path: Path):
    code = """
import json, sys
sys.__stdout__.write(json.dumps({"call": "read_file", "arguments": {"path": ".git-credentials"}}) + "\\n")
sys.__stdout__.flush()
print("answer", sys.stdin.readline().strip())
sys.__stdout__.write(json.dumps({"call": "run_command", "arguments": {"command": "cat .git-credentials"}}) + "\\n")
sys.__stdout__.flush()
print("answer", sys.stdin.readline().strip())
"""
    report = await run(checkout, code, tmp_path)
    assert report.ok and report.calls == 2 and report.refused == 2, report
    assert "credentials" in report.output and "no such function" in report.output
    assert SECRET not in report.text()


async def test_the_program_reaches_no_server_on_the_workers_loopback(checkout: Path, tmp_path: Path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def accept() -> None:
        try:
            server.accept()
            accepted.append(True)
        except OSError:  # closed at the end of the test, nobody having come
            pass

    threading.Thread(target=accept, daemon=True).start()
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("connected")
except OSError as exc:
    print("refused", type(exc).__name__)
"""
    try:
        report = await run(checkout, code, tmp_path)
    finally:
        server.close()
    assert report.ok and report.output.startswith("refused"), report
    assert accepted == []


async def test_a_flood_of_calls_is_stopped(checkout: Path, tmp_path: Path):
    report = await run(checkout, "while True:\n    list_dir('.')\n", tmp_path)
    assert not report.ok and report.ended == f"more than {MAX_CALLS} tool calls", report
    assert report.calls == MAX_CALLS + 1
