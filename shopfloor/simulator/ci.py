"""Simulated CI: run a repository's test command in a fresh checkout of one commit.

The command sees none of the server's environment (tokens, keys): only PATH, a throw-away HOME,
LANG and PYTHONDONTWRITEBYTECODE. The directory of this Python comes first on PATH so that
`python -m pytest` runs with the interpreter (and packages) shopfloor itself runs with — in a
virtualenv there may be no other `python` at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

import pydantic
import structlog

from shopfloor.simulator.git.cmd import GitError, run_git
from shopfloor.simulator.git.repos import BareRepo

log = structlog.get_logger(__name__)

OUTPUT_CAP = 60_000
_TRUNCATED = "[... earlier output truncated ...]\n"

Conclusion = Literal["success", "failure", "timed_out"]


class CiResult(pydantic.BaseModel):
    conclusion: Conclusion
    output: str  # the tail of stdout and stderr interleaved, at most OUTPUT_CAP characters
    duration_s: float
    command: str
    exit_code: int | None  # None when timed out


def ci_env(home: Path) -> dict[str, str]:
    """The whole environment a CI command gets."""
    here = os.path.dirname(sys.executable)  # not resolved: a venv's bin dir, not the base Python's
    rest = [p for p in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep) if p and p != here]
    return {
        "PATH": os.pathsep.join([here, *rest]),
        "HOME": str(home),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run_ci(repo: BareRepo, sha: str, command: str, *, timeout_s: float = 600.0) -> CiResult:
    """Check `sha` out into a temp dir, run `bash -c command` there, and report how it went.

    The whole process group is killed when the command outlives `timeout_s` (and after it ends,
    so nothing it started in the background lingers). Raises GitError if `sha` is unknown.
    """
    full = repo.resolve(sha)
    if full is None:
        raise GitError(f"cannot run CI on {sha}: no such commit in {repo.path.name}")
    with tempfile.TemporaryDirectory(prefix="shopfloor-ci-") as tmp:
        root = Path(tmp)
        checkout, home, out_file = root / "src", root / "home", root / "output.log"
        home.mkdir()
        # --shared: objects are read from the bare repository, nothing is copied.
        run_git(["clone", "--quiet", "--shared", "--no-checkout", str(repo.path.resolve()), str(checkout)])
        run_git(["checkout", "--quiet", "--detach", full], cwd=checkout)
        started = time.monotonic()
        with out_file.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=checkout,
                env=ci_env(home),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            _kill_group(proc.pid)
            proc.wait()
        duration = time.monotonic() - started
        output = _tail(out_file)
    if code is None:
        output += f"\n[timed out after {timeout_s:g}s]\n"
        output = output[-OUTPUT_CAP:]
    conclusion: Conclusion = "timed_out" if code is None else "success" if code == 0 else "failure"
    log.info(
        "sim_ci_finished",
        repo=repo.path.name,
        sha=full,
        conclusion=conclusion,
        exit_code=code,
        duration_s=round(duration, 2),
    )
    return CiResult(conclusion=conclusion, output=output, duration_s=duration, command=command, exit_code=code)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _tail(path: Path) -> str:
    """The last OUTPUT_CAP characters of the log, marked when cut."""
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(0, size - OUTPUT_CAP * 4))  # enough bytes for OUTPUT_CAP characters of UTF-8
        text = f.read().decode(errors="replace")
    if size > OUTPUT_CAP * 4 or len(text) > OUTPUT_CAP:
        text = _TRUNCATED + text[-(OUTPUT_CAP - len(_TRUNCATED)) :]
    return text
