"""`run_python` ("code mode"): the model writes a short program that calls the read-only tools as
functions, so one step does what would take many tool calls.

The program runs in a bubblewrap sandbox of its own that holds no checkout, no network and none
of the worker's files but the Python it runs on (activities/code_mode_program.py is its harness).
Its only way to the repository is a function call, sent as a JSON line on its stdout: the worker
judges each call with the run's permission rules (agents/permissions.py, exactly as the tool's own
call would be), runs the real tool on the real checkout, and answers on its stdin. So a rule holds
whatever the program does: it is enforced here and by the sandbox's mounts, never in the program.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from shopfloor.activities.sandbox import SandboxConfig, offline_argv, resolve_mode
from shopfloor.activities.sandbox_limits import open_confinement
from shopfloor.activities.tools import read_only
from shopfloor.agents.permissions import PermissionPolicy, classify
from shopfloor.agents.tools import PYTHON_BINDINGS, TOOLS
from shopfloor.errors import ToolError
from shopfloor.models.agent_run import CommandPolicy

log = structlog.get_logger(__name__)

HARNESS = Path(__file__).with_name("code_mode_program.py")
TIMEOUT_S = 120.0  # a program's whole run, its tool calls included (and the command policy's, if shorter)
MAX_CALLS = 200  # tool calls one program may make
REQUEST_BYTES = 256 * 1024  # one call's line from the program
STDERR_BYTES = 16 * 1024

_FUNCTIONS: dict[str, Callable[[Path, Any], str]] = {
    "read_file": read_only.read_file,
    "list_dir": read_only.list_dir,
    "glob": read_only.glob,
    "grep": read_only.grep,
}


class ProgramReport(BaseModel):
    output: str = ""
    error: str | None = None
    calls: int = 0
    refused: int = 0
    ended: str | None = None  # why the program was stopped (timeout, too many calls, a bad line)

    def text(self) -> str:
        parts = [self.output.rstrip("\n")] if self.output.strip() else ["(the program printed nothing)"]
        if self.error:
            parts.append(f"[the program raised]\n{self.error.rstrip()}")
        if self.ended:
            parts.append(f"[stopped: {self.ended}]")
        refused = f", {self.refused} refused" if self.refused else ""
        parts.append(f"[{self.calls} tool call{'' if self.calls == 1 else 's'}{refused}]")
        return "\n\n".join(parts)

    @property
    def ok(self) -> bool:
        return self.error is None and self.ended is None


async def run_program(
    root: Path,
    code: str,
    *,
    sandbox: SandboxConfig,
    policy: CommandPolicy,
    permissions: PermissionPolicy,
    hide: Sequence[Path] = (),
) -> ProgramReport:
    """Run `code` in its own sandbox, answering its tool calls on `root`."""
    real, note = resolve_mode(sandbox)
    if real != "bwrap":
        raise ToolError(
            "run_python runs only in the bubblewrap sandbox, and this worker has none"
            + (f" ({note})" if note else "")
            + ": call the tools directly"
        )
    confinement = open_confinement(policy, sandbox.scratch_dir, sandbox.cgroup)
    try:
        tmp = confinement.scratch.tmp
        (tmp / "program.py").write_text(code, encoding="utf-8")
        shutil.copyfile(HARNESS, tmp / "harness.py")
        empty = confinement.scratch.root / "nothing"  # its working directory: no checkout in it
        empty.mkdir()
        # -I: the harness imports nothing from its directory or the environment.
        command = f"exec {shlex.quote(sys.executable)} -I /tmp/harness.py /tmp/program.py"
        argv = offline_argv(empty, command, policy=policy, config=sandbox, confinement=confinement, hide=hide)
        return await _converse(argv, root, permissions, min(TIMEOUT_S, policy.timeout_s))
    finally:
        await confinement.close()


async def _converse(argv: list[str], root: Path, permissions: PermissionPolicy, timeout_s: float) -> ProgramReport:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd="/",
        limit=REQUEST_BYTES,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    report = ProgramReport()
    stderr = asyncio.create_task(proc.stderr.read(STDERR_BYTES))

    async def serve() -> None:
        assert proc.stdin is not None and proc.stdout is not None
        while True:
            try:
                line = await proc.stdout.readline()
            except ValueError:  # asyncio's LimitOverrunError, as readline raises it
                report.ended = f"a tool call over {REQUEST_BYTES // 1024} KB"
                return
            if not line:
                report.ended = report.ended or "the program ended without its harness's last word"
                return
            try:
                message = json.loads(line)
            except ValueError:
                report.ended = "the program wrote something that is not a tool call to the harness's channel"
                return
            if not isinstance(message, dict):
                report.ended = "the program wrote something that is not a tool call to the harness's channel"
                return
            if message.get("done"):
                report.output = str(message.get("output") or "")
                report.error = str(message["error"]) if message.get("error") else None
                report.ended = None
                return
            report.calls += 1
            if report.calls > MAX_CALLS:
                report.ended = f"more than {MAX_CALLS} tool calls"
                return
            answer = await _answer(root, message, permissions)
            report.refused += not answer["ok"]
            proc.stdin.write((json.dumps(answer) + "\n").encode())
            await proc.stdin.drain()

    try:
        await asyncio.wait_for(serve(), timeout_s)
    except TimeoutError:
        report.ended = f"timed out after {timeout_s:g} s"
    except (BrokenPipeError, ConnectionResetError):
        report.ended = report.ended or "the program stopped reading its answers"
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        err = (await stderr).decode("utf-8", errors="replace").strip()
    if report.ended and err:
        report.ended += f"; it said: {err[-2000:]}"
    return report


async def _answer(root: Path, message: dict[str, Any], permissions: PermissionPolicy) -> dict[str, Any]:
    """One binding call judged and run: {"ok": true, "result": text} or {"ok": false, "error": why}."""
    tool, arguments = message.get("call"), message.get("arguments")
    if not isinstance(tool, str) or tool not in PYTHON_BINDINGS or not isinstance(arguments, dict):
        return {"ok": False, "error": f"no such function; these are: {', '.join(PYTHON_BINDINGS)}"}
    verdict = classify(tool, arguments, permissions)
    if verdict.decision != "allow":
        why = verdict.reason or "it needs an operator's approval, which a program cannot wait for"
        return {"ok": False, "error": f"denied: {why}"}
    try:
        args = TOOLS[tool].args.model_validate(arguments)
        result = await asyncio.to_thread(_FUNCTIONS[tool], root, args)
    except ValidationError as exc:
        return {"ok": False, "error": f"invalid arguments for {tool}: {exc.error_count()} problem(s)"}
    except ToolError as exc:
        return {"ok": False, "error": f"error: {exc}"}
    return {"ok": True, "result": result}
