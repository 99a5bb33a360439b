"""Running a shell command in a sandbox (DESIGN §4, §6).

With bubblewrap (mode "bwrap"): the whole system is visible read-only; /tmp is a fresh tmpfs and
HOME an empty directory in it; home directories, /run (service secrets, docker.sock) and the
directories the caller names in `hide` (the worker's data, blob and mirror directories) are
covered by empty tmpfs mounts; /etc/shadow cannot be read; only the workspace is writable. All
namespaces are unshared (the network too: sandbox_network), every capability is dropped,
the process gets a new session and dies with the worker. Object directories the checkout borrows
through `.git/objects/info/alternates` and the Python installation named on PATH are mounted back
read-only when they lie in a hidden directory, so git and python keep working.

Both modes start the command with a clean environment (PATH, HOME, LANG, TERM,
PYTHONDONTWRITEBYTECODE: nothing from the worker's), with CPU-time and address-space limits
(ulimit, set in a tiny shell prologue: no preexec_fn in a threaded worker), in its own process
group that is killed as a whole on timeout and after exit. Mode "none" has no namespaces: it
runs in the workspace with full access to the machine, and every outcome says so.

Starting the process, capping its output and killing it: sandbox_process.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import structlog

from shopfloor.activities.sandbox_network import SandboxNetwork, command_network, network_bwrap_args, network_command
from shopfloor.activities.sandbox_process import CommandOutcome, execute
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import CommandPolicy

__all__ = ["CommandOutcome", "SandboxMode", "detect_test_command", "resolve_mode", "run_command"]

log = structlog.get_logger(__name__)

SandboxMode = Literal["auto", "bwrap", "none"]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_HOME = "/tmp/home"
# Covered by empty tmpfs mounts inside the sandbox, when they exist.
HIDDEN = ("/root", "/home", "/run", "/var/run", "/mnt", "/media", "/srv", "/var/lib/docker",
          "/var/lib/containerd", "/var/lib/kubelet", "/etc/ssl/private")
BLANKED = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
PROGRESS_INTERVAL_S = 5.0
# Sets the limits (soft before hard: a hard limit below the current soft one is refused),
# then replaces itself with the real shell running the command.
_PROLOGUE = ('ulimit -S -t "$1" && ulimit -H -t "$2" && ulimit -S -v "$3" && ulimit -H -v "$3" '
             '|| { echo "shopfloor: cannot set resource limits" >&2; exit 126; }; exec "$4" -c "$5"')


def shell_path() -> str:
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"


@functools.cache
def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here (None: it can). Probed once, with the flags used."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap was not found on PATH"
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
             "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv",
             "--", shell_path(), "-c", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, env={"PATH": SYSTEM_PATH})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} could not be started: {e}"
    if done.returncode != 0:
        return f"{bwrap} failed: {done.stderr.strip() or f'exit status {done.returncode}'}"
    return None


def resolve_mode(mode: SandboxMode | str) -> tuple[Literal["bwrap", "none"], str]:
    """The mode commands really run in, and a note to show when that is unsandboxed.

    auto: bubblewrap when it works here, else none with a warning; bwrap: bubblewrap or a
    UsageError saying why not; none: unsandboxed, on purpose.
    """
    if mode not in ("auto", "bwrap", "none"):
        raise UsageError(f"SHOPFLOOR_SANDBOX must be auto, bwrap or none, not {mode!r}")
    if mode == "none":
        return "none", "sandbox disabled (SHOPFLOOR_SANDBOX=none): ran UNSANDBOXED, without file or network isolation"
    problem = _bwrap_problem()
    if problem is None:
        return "bwrap", ""
    if mode == "bwrap":
        raise UsageError(
            f"SHOPFLOOR_SANDBOX=bwrap, but bubblewrap cannot be used here: {problem}. Install it "
            "(apt-get install bubblewrap) and allow user namespaces, or set SHOPFLOOR_SANDBOX=auto "
            "to run commands unsandboxed with a warning."
        )
    return "none", f"bubblewrap is not usable ({problem}): ran UNSANDBOXED, without file or network isolation"


async def run_command(
    workspace: Path,
    command: str,
    *,
    mode: SandboxMode,
    policy: CommandPolicy,
    timeout_s: float | None = None,
    on_progress: Callable[[str], None] | None = None,
    hide: Sequence[Path] = (),
    path_prepend: Sequence[str] | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    network: SandboxNetwork | None = None,
) -> CommandOutcome:
    """Run `command` with bash in `workspace`, sandboxed as `mode` resolves.

    The timeout is the policy's, or `timeout_s` when that is shorter. `path_prepend` goes before
    the system PATH (default: the directory of this Python, so `python` and `pytest` are the
    worker's). `on_progress` is called every `progress_interval_s` while it runs. A command whose
    policy allows the network reaches only what `network`'s egress proxy lets through
    (sandbox_network); without bubblewrap it is refused with a ToolError.
    """
    real, note = resolve_mode(mode)
    ws = Path(os.path.realpath(workspace))
    limit = policy.timeout_s if timeout_s is None else min(timeout_s, policy.timeout_s)
    prepend = [os.path.dirname(sys.executable)] if path_prepend is None else list(path_prepend)
    path = ":".join([*prepend, SYSTEM_PATH])
    shell = shell_path()
    cpu, cpu_hard, mem_kb = _limits(policy)
    tail = [shell, "-c", _PROLOGUE, "shopfloor-sandbox", str(cpu), str(cpu_hard), str(mem_kb), shell, command]
    home_dir: str | None = None
    async with command_network(real, policy, network) as egress:
        if real == "bwrap":
            env = _clean_env(path, SANDBOX_HOME)
            argv = [*_bwrap_args(ws, env, hide, prepend), *network_bwrap_args(egress), "--",
                    *network_command(egress, tail)]
            cwd = "/"
        else:
            home_dir = tempfile.mkdtemp(prefix="shopfloor-home-")
            env = _clean_env(path, home_dir)
            argv, cwd = tail, str(ws)
            log.warning("command running UNSANDBOXED", note=note, workspace=str(ws))
        try:
            outcome = await execute(argv, cwd, env, limit, policy, on_progress, progress_interval_s)
        finally:
            if home_dir is not None:
                shutil.rmtree(home_dir, ignore_errors=True)
        if egress is not None and egress.report():
            outcome.output = f"{outcome.output.rstrip()}\n{egress.report()}\n"
    outcome.sandboxed = real == "bwrap"
    outcome.sandbox_note = note
    return outcome


def _clean_env(path: str, home: str) -> dict[str, str]:
    return {"PATH": path, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1"}


def _limits(policy: CommandPolicy) -> tuple[int, int, int]:
    """(CPU soft s, CPU hard s, address space KB), never above this process's own hard limits.
    The hard CPU limit is a second later, so SIGXCPU (a clear reason) comes before SIGKILL."""
    def cap(kind: int, want: int) -> int:
        hard = resource.getrlimit(kind)[1]
        return want if hard == resource.RLIM_INFINITY else min(want, hard)

    cpu_hard = cap(resource.RLIMIT_CPU, policy.cpu_s + 1)
    mem = cap(resource.RLIMIT_AS, policy.memory_mb * 1024 * 1024) // 1024
    return min(policy.cpu_s, cpu_hard), cpu_hard, mem


def _real_dir(p: str | Path) -> str | None:
    real = os.path.realpath(p)
    return real if os.path.isdir(real) else None


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _bwrap_args(ws: Path, env: dict[str, str], hide: Sequence[Path], prepend: Sequence[str]) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    hidden: list[str] = []
    for p in [*HIDDEN, *map(str, hide)]:
        real = _real_dir(p)
        if real and real not in hidden and real not in ("/", "/tmp") and not _under(real, str(ws)):
            hidden.append(real)
            args += ["--tmpfs", real]
    args += [a for f in BLANKED if os.path.isfile(f) for a in ("--ro-bind", "/dev/null", f)]
    # Mounted back read-only: what git and the interpreter need from hidden places.
    back = [sys.prefix, sys.base_prefix, *prepend, *_alternates(ws)]
    seen: set[str] = set()
    for p in back:
        real = _real_dir(p)
        # /tmp is a fresh tmpfs too: a worker (or its venv) living under it needs its parts back.
        if real and real not in seen and any(_under(real, h) for h in [*hidden, "/tmp"]) and not _under(real, str(ws)):
            seen.add(real)
            args += ["--ro-bind", real, real]
    args += ["--bind", str(ws), str(ws), "--dir", SANDBOX_HOME, "--chdir", str(ws),
             "--unshare-all", "--cap-drop", "ALL",
             "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _alternates(ws: Path) -> list[str]:
    try:
        text = (ws / ".git" / "objects" / "info" / "alternates").read_text()
    except (OSError, UnicodeError):
        return []
    return [line.strip() for line in text.splitlines() if line.strip().startswith("/")]


_PYTEST_CONFIG = (("pytest.ini", None), ("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"),
                  ("tox.ini", "[pytest]"), ("conftest.py", None))
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "vendor", "target", "dist", "build"})


def detect_test_command(workspace: Path) -> str | None:
    """The command that runs this repository's tests, judged from its files (None: unknown)."""
    def text(name: str) -> str:
        try:
            return (workspace / name).read_text(errors="replace")
        except OSError:
            return ""

    for name, marker in _PYTEST_CONFIG:
        if (workspace / name).is_file() and (marker is None or marker in text(name)):
            return "python -m pytest -q"
    package = text("package.json")
    if re.search(r'"test"\s*:\s*"(?!echo \\"Error: no test specified)', package):
        return "npm test --silent"
    if (workspace / "go.mod").is_file():
        return "go test ./..."
    if (workspace / "Cargo.toml").is_file():
        return "cargo test"
    if _has_python_tests(workspace, depth=3) or any(
        (workspace / d).is_dir() and any((workspace / d).rglob("*.py")) for d in ("tests", "test")
    ):
        return "python -m pytest -q"
    if re.search(r"^test\s*:", text("Makefile") or text("makefile") or text("GNUmakefile"), re.M):
        return "make test"
    return None


def _has_python_tests(directory: Path, depth: int) -> bool:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    for e in entries:
        if e.is_file(follow_symlinks=False) and re.fullmatch(r"test_.*\.py|.*_test\.py", e.name):
            return True
    return depth > 0 and any(
        _has_python_tests(Path(e.path), depth - 1)
        for e in entries
        if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS and not e.name.startswith(".")
    )
