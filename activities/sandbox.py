"""Running a shell command in a sandbox.

With bubblewrap (mode "bwrap") the command sees an allow-list of the host (sandbox_mounts): the
system's programs, libraries and /etc read-only (minus what only its owner may read), the Python
installation named on PATH and the object directories the checkout borrows read-only, the
workspace read-write, and its own scratch directory on disk as /tmp (HOME inside it) and /dev/shm;
nothing else — no data directory, blob store, home, /run, /srv, /opt or /var. All namespaces are
unshared (the network too: sandbox_network), every capability is dropped, the process gets a new
session and dies with the worker.

Both modes start the command with a clean environment (PATH, HOME, LANG, TERM,
PYTHONDONTWRITEBYTECODE: nothing from the worker's), with per-process CPU-time and address-space
limits (ulimit, set in a tiny shell prologue: no preexec_fn in a threaded worker), and with total
limits on memory, processes and scratch disk for everything it starts (sandbox_limits: cgroups,
or a watchdog); past any of them, or at the timeout, every process it started is killed. Mode
"none" has no namespaces: it runs in the workspace with full access to the machine, and every
outcome says so. Mode "auto" without a usable bubblewrap refuses to run commands unless the
operator allowed unsandboxed ones (SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS).

Starting the process, capping its output and killing it: sandbox_process.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeGuard

import structlog
from pydantic import BaseModel, Field

from shopfloor.activities.environment import ENV_MOUNT, SandboxEnvironment
from shopfloor.activities.metrics import count_sandbox_kill
from shopfloor.activities.sandbox_limits import Confinement, open_confinement
from shopfloor.activities.sandbox_mounts import SEAL, mount_args
from shopfloor.activities.sandbox_network import SandboxNetwork, command_network, network_bwrap_args, network_command
from shopfloor.activities.sandbox_process import CommandOutcome, CommandRefused, execute
from shopfloor.agents import test_commands
from shopfloor.errors import UsageError
from shopfloor.models.agent_run import CommandPolicy
from shopfloor.settings import Settings

__all__ = [
    "CommandOutcome",
    "CommandRefused",
    "SandboxConfig",
    "SandboxMode",
    "detect_test_command",
    "resolve_mode",
    "run_command",
]

log = structlog.get_logger(__name__)

SandboxMode = Literal["auto", "bwrap", "none"]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_HOME = "/tmp/home"
PROGRESS_INTERVAL_S = 5.0
# Sets the limits (soft before hard: a hard limit below the current soft one is refused),
# then replaces itself with the real shell running the command.
_PROLOGUE = (
    'ulimit -S -t "$1" && ulimit -H -t "$2" && ulimit -S -v "$3" && ulimit -H -v "$3" '
    '|| { echo "shopfloor: cannot set resource limits" >&2; exit 126; }; exec "$4" -c "$5"'
)


def shell_path() -> str:
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"


@functools.cache
def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here (None: it can). Probed once, with the flags used."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap was not found on PATH"
    probe = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--",
        shell_path(),
        "-c",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, env={"PATH": SYSTEM_PATH})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} could not be started: {e}"
    if done.returncode != 0:
        return f"{bwrap} failed: {done.stderr.strip() or f'exit status {done.returncode}'}"
    return None


class SandboxConfig(BaseModel):
    """How this worker runs commands, from the operator's settings (`from_settings`)."""

    mode: SandboxMode = "auto"
    # With "auto" and no usable bubblewrap: run commands unsandboxed (True) or refuse them.
    allow_unsandboxed: bool = False
    # Where each command's scratch directory (its /tmp and /dev/shm) is made; on disk.
    scratch_dir: Path = Field(default_factory=lambda: Path(tempfile.gettempdir()) / "shopfloor-scratch")
    cgroup: str = "auto"  # "auto", "off", or a delegated cgroup v2 directory
    readonly_paths: tuple[str, ...] = ()  # more host directories commands may read (toolchains)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxConfig:
        return cls(
            mode=settings.sandbox,
            allow_unsandboxed=settings.allow_unsandboxed_commands,
            scratch_dir=settings.sandbox_scratch_dir or settings.data_dir / "scratch",
            cgroup=settings.sandbox_cgroup,
            readonly_paths=tuple(settings.sandbox_readonly_paths),
        )


def _config(mode: SandboxMode | str | SandboxConfig) -> SandboxConfig:
    if isinstance(mode, SandboxConfig):
        return mode
    if not _is_mode(mode):
        raise UsageError(f"SHOPFLOOR_SANDBOX must be auto, bwrap or none, not {mode!r}")
    return SandboxConfig(mode=mode)


def _is_mode(mode: str) -> TypeGuard[SandboxMode]:
    return mode in ("auto", "bwrap", "none")


def resolve_mode(mode: SandboxMode | str | SandboxConfig) -> tuple[Literal["bwrap", "none", "refuse"], str]:
    """The mode commands really run in, and a note to show when that is not bubblewrap.

    auto: bubblewrap when it works here; else "refuse" (commands are not run), or unsandboxed with
    a warning when the operator allowed it. bwrap: bubblewrap or a UsageError saying why not.
    none: unsandboxed, on purpose.
    """
    config = _config(mode)
    if config.mode == "none":
        return "none", "sandbox disabled (SHOPFLOOR_SANDBOX=none): ran UNSANDBOXED, without file or network isolation"
    problem = _bwrap_problem()
    if problem is None:
        return "bwrap", ""
    if config.mode == "bwrap":
        raise UsageError(
            f"SHOPFLOOR_SANDBOX=bwrap, but bubblewrap cannot be used here: {problem}. Install it "
            "(apt-get install bubblewrap) and allow user namespaces."
        )
    if config.allow_unsandboxed:
        return "none", (
            f"bubblewrap is not usable ({problem}): ran UNSANDBOXED, without file or network "
            "isolation (SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS=true)"
        )
    return "refuse", (
        f"commands are refused: bubblewrap is not usable here ({problem}), and running them "
        "without a sandbox needs the operator's SHOPFLOOR_ALLOW_UNSANDBOXED_COMMANDS=true"
    )


async def run_command(
    workspace: Path,
    command: str,
    *,
    mode: SandboxMode | SandboxConfig,
    policy: CommandPolicy,
    timeout_s: float | None = None,
    on_progress: Callable[[str], None] | None = None,
    hide: Sequence[Path] = (),
    path_prepend: Sequence[str] | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    network: SandboxNetwork | None = None,
    environment: SandboxEnvironment | None = None,
) -> CommandOutcome:
    """Run `command` with bash in `workspace`, sandboxed as `mode` resolves.

    The timeout is the policy's, or `timeout_s` when that is shorter. `path_prepend` goes before
    the system PATH (default: the directory of this Python, so `python` and `pytest` are the
    worker's). `on_progress` is called every `progress_interval_s` while it runs. A command whose
    policy allows the network reaches only what `network`'s egress proxy lets through
    (sandbox_network); without bubblewrap it is refused with a ToolError. With `environment` (a
    prepared environment, activities/environment.py) it is mounted read-write at ENV_MOUNT and its
    PATH entries and variables come first; without bubblewrap such a command is refused too.
    """
    config = _config(mode)
    real, note = resolve_mode(config)
    if real == "refuse":
        log.warning("command refused: no sandbox", reason=note)
        raise CommandRefused(f"the command was not run: {note}.")
    if environment is not None and real != "bwrap":
        # Its virtualenv's paths are valid only where it is mounted at ENV_MOUNT.
        raise CommandRefused(
            "the command was not run: this workspace has a prepared environment (the repository's "
            "setup), which commands use only in the bubblewrap sandbox; this worker runs commands "
            "without it (SHOPFLOOR_SANDBOX)"
        )
    ws = Path(os.path.realpath(workspace))
    limit = policy.timeout_s if timeout_s is None else min(timeout_s, policy.timeout_s)
    prepend = [os.path.dirname(sys.executable)] if path_prepend is None else list(path_prepend)
    path = ":".join([*(environment.path if environment else []), *prepend, SYSTEM_PATH])
    shell = shell_path()
    cpu, cpu_hard, mem_kb = _limits(policy)
    tail = [shell, "-c", _PROLOGUE, "shopfloor-sandbox", str(cpu), str(cpu_hard), str(mem_kb), shell, command]
    if real == "bwrap":
        tail = _with_process_limit(tail, shell, policy.max_processes)
    try:
        confinement = open_confinement(policy, config.scratch_dir, config.cgroup)
    except OSError as exc:  # a full disk, a cgroup the kernel refused: nothing may run unbounded
        log.error("command refused: cannot set up its limits", error=str(exc))
        raise CommandRefused(
            f"the command was not run: its limits could not be set up ({exc.strerror or exc})"
        ) from exc
    try:
        async with command_network(real, policy, network) as egress:
            if real == "bwrap":
                env = {**_clean_env(path, SANDBOX_HOME), **(environment.variables if environment else {})}
                binds = [(environment.host_dir, ENV_MOUNT)] if environment else []
                argv = [
                    *_bwrap_args(ws, env, hide, [*prepend, *config.readonly_paths], confinement, binds),
                    *network_bwrap_args(egress),
                    *SEAL,
                    "--",
                    *network_command(egress, tail),
                ]
                cwd = "/"
            else:
                tmp = str(confinement.scratch.tmp)
                env = {**_clean_env(path, os.path.join(tmp, "home")), "TMPDIR": tmp}
                argv, cwd = tail, str(ws)
                log.warning("command running UNSANDBOXED", note=note, workspace=str(ws))
            outcome = await execute(argv, cwd, env, limit, policy, on_progress, progress_interval_s, confinement)
            if egress is not None and egress.report():
                outcome.output = f"{outcome.output.rstrip()}\n{egress.report()}\n"
    finally:
        await confinement.close()
    outcome.sandboxed = real == "bwrap"
    outcome.sandbox_note = note
    if outcome.timed_out or outcome.killed_reason:
        count_sandbox_kill(outcome.timed_out)
    return outcome


def sandbox_config(mode: SandboxMode | str | SandboxConfig) -> SandboxConfig:
    """The sandbox settings a worker's mode (or full configuration) stands for."""
    return _config(mode)


def offline_argv(
    workdir: Path,
    command: str,
    *,
    policy: CommandPolicy,
    config: SandboxConfig,
    confinement: Confinement,
    hide: Sequence[Path] = (),
) -> list[str]:
    """bubblewrap's argv for `command` (bash) in `workdir` with no network, under `policy`'s
    CPU, memory and process limits, seeing the system and this Python read-only (a run_python
    program: activities/code_mode.py). The caller spawns it and holds it to its time limit."""
    shell = shell_path()
    cpu, cpu_hard, mem_kb = _limits(policy)
    tail = [shell, "-c", _PROLOGUE, "shopfloor-sandbox", str(cpu), str(cpu_hard), str(mem_kb), shell, command]
    tail = _with_process_limit(tail, shell, policy.max_processes)
    prepend = [os.path.dirname(sys.executable)]
    env = _clean_env(":".join([*prepend, SYSTEM_PATH]), SANDBOX_HOME)
    readonly = [*prepend, *config.readonly_paths]
    return [*_bwrap_args(workdir, env, hide, readonly, confinement), *network_bwrap_args(None), *SEAL, "--", *tail]


def _with_process_limit(tail: list[str], shell: str, tasks: int) -> list[str]:
    """Inside bubblewrap's user namespace RLIMIT_NPROC counts that namespace's tasks only (Linux
    5.14+), so it bounds one command's processes and threads where the worker's uid is not root
    (root is exempt): a fork bomb stopped by the kernel where no cgroup can be made. Outside a
    namespace it would count every process of the worker's user, so mode "none" goes without."""
    flag = "-u" if shell.endswith("bash") else "-p"
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    tasks = tasks if hard == resource.RLIM_INFINITY else min(tasks, hard)
    limit = f'ulimit -S {flag} {tasks} && ulimit -H {flag} {tasks} || {{ echo "shopfloor: cannot set resource limits" >&2; exit 126; }}; '
    return [tail[0], tail[1], limit + tail[2], *tail[3:]]


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


def _bwrap_args(
    ws: Path,
    env: dict[str, str],
    hide: Sequence[Path],
    readonly: Sequence[str],
    confinement: Confinement,
    binds: Sequence[tuple[Path, str]] = (),
) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    scratch = confinement.scratch
    shown = [sys.prefix, sys.base_prefix, *readonly, *_alternates(ws)]  # what python and git need
    args = [
        bwrap,
        *mount_args(ws, tmp=scratch.tmp, shm=scratch.shm, home=SANDBOX_HOME, readonly=shown, hide=hide, binds=binds),
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _alternates(ws: Path) -> list[str]:
    try:
        text = (ws / ".git" / "objects" / "info" / "alternates").read_text()
    except (OSError, UnicodeError):
        return []
    return [line.strip() for line in text.splitlines() if line.strip().startswith("/")]


_LISTED_DEPTH = 6  # folders below the root a workspace listing for detection goes into
_LISTED_MAX = 20_000  # paths it holds at most


def detect_test_command(workspace: Path) -> str | None:
    """The command that runs this checkout's tests (None: unknown), by the same rules a run's
    repository profile uses (agents/test_commands.py), for a workspace run without a profile."""
    paths = _listing(workspace)
    texts = {}
    for name in test_commands.FILES_READ:
        if name in paths:
            try:
                texts[name] = (workspace / name).read_text(errors="replace")
            except OSError:
                texts[name] = ""
    found = test_commands.detect_test_command(paths, texts)
    return found.command if found else None


def _listing(workspace: Path) -> set[str]:
    """The checkout's files (relative paths), skipping dependency and hidden folders, bounded."""
    out: set[str] = set()
    stack: list[tuple[Path, str, int]] = [(workspace, "", 0)]
    while stack and len(out) < _LISTED_MAX:
        directory, prefix, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for e in entries:
            if e.is_file(follow_symlinks=False):
                out.add(prefix + e.name)
            elif (
                e.is_dir(follow_symlinks=False)
                and depth < _LISTED_DEPTH
                and e.name not in test_commands.SKIP_DIRS
                and not e.name.startswith(".")
            ):
                stack.append((Path(e.path), f"{prefix}{e.name}/", depth + 1))
    return out
