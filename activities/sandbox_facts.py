"""Activity `sandbox_facts`: what the sandbox an agent's commands run in looks like — the working
directory, the OS, the toolchains on PATH and their versions — for the environment section of the
run's system prompt (agents/run_environment.py). Read-only, once per run, before its first step.

It runs one short probe (PROBE: `--version` of each toolchain, each with a few seconds' limit,
`uname -sr`, /etc/os-release's name, `$PWD`) exactly as a `run_command` call of the run would:
in its checkout, in the same sandbox, with the workspace's prepared environment first on PATH.
Its output is command output the repository may influence; agents/run_environment.py keeps a
version number of each toolchain and one short line of plain characters of the rest. Where
commands cannot run on this worker the facts say so and carry what the worker itself knows.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.environment import Environments, EnvironmentUnavailable
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.sandbox import CommandRefused, SandboxConfig, SandboxMode, run_command
from shopfloor.activities.workspace import PatchError, WorkspaceError, Workspaces
from shopfloor.agents.run_environment import TOOLCHAINS, EnvironmentProbe, SandboxFacts, parse_probe, plain
from shopfloor.models import failure_types
from shopfloor.models.agent_run import CommandPolicy

log = structlog.get_logger(__name__)

EACH_S = 5  # one toolchain's `--version`
PROBE_POLICY = CommandPolicy(timeout_s=60.0, cpu_s=60, output_cap_bytes=8_000)


def _probe_script() -> str:
    lines = [
        f'v() {{ command -v "$1" >/dev/null 2>&1 || return 0; printf \'%s=\' "$1"; shift; '
        f'timeout {EACH_S} "$@" </dev/null 2>&1 | head -n 1; echo; }}'
    ]
    lines += [f"v {name} {command}" for name, command in TOOLCHAINS.items()]
    lines += [
        "printf 'uname=%s\\n' \"$(uname -sr 2>/dev/null)\"",
        "printf 'os=%s\\n' \"$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | head -n 1)\"",
        "printf 'cwd=%s\\n' \"$PWD\"",
    ]
    return "\n".join(lines)


PROBE = _probe_script()


def worker_os() -> str:
    """The OS as this worker's process sees it (the sandbox shows the same /etc and kernel)."""
    try:
        name = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        name = ""
    kernel = f"{platform.system()} {platform.release()}".strip()
    return "; ".join(plain(p, 40) for p in (name, kernel) if p)


class SandboxFactsActivities:
    def __init__(
        self,
        workspaces: Workspaces,
        environments: Environments,
        *,
        sandbox: SandboxMode | SandboxConfig = "auto",
        hide: Sequence[Path] = (),
    ) -> None:
        self._workspaces = workspaces
        self._environments = environments
        self._sandbox = sandbox
        self._hide = tuple(hide)

    def all(self) -> list[Callable[..., Any]]:
        return [self.sandbox_facts]

    @activity.defn(name="sandbox_facts")
    async def sandbox_facts(self, inp: EnvironmentProbe) -> SandboxFacts:
        """The facts of `inp.workspace`'s sandbox, as the run's commands would find them."""
        try:
            return await heartbeating(self._facts(inp), detail=f"environment of {inp.workspace.repo}")
        except (WorkspaceError, PatchError) as exc:
            raise ApplicationError(str(exc), type=failure_types.WORKSPACE_ERROR) from None
        except EnvironmentUnavailable as exc:  # the blob store may answer again
            raise ApplicationError(str(exc), type=failure_types.WORKSPACE_ERROR) from None

    async def _facts(self, inp: EnvironmentProbe) -> SandboxFacts:
        ref = inp.workspace
        if ref.path:  # a checkout on this machine, used in place
            root = Path(ref.path)
            if not root.is_dir():
                raise ApplicationError(
                    f"workspace {root} is not a directory on this worker",
                    type=failure_types.WORKSPACE_MISSING,
                    non_retryable=True,
                )
        else:
            root = await self._workspaces.open(ref, inp.run_id, read_only=True)
        environment = None
        if ref.environment is not None:
            environment = await self._environments.restore(ref.environment, inp.run_id, root)
        try:
            outcome = await run_command(
                root,
                PROBE,
                mode=self._sandbox,
                policy=PROBE_POLICY,
                hide=self._hide,
                environment=environment,
            )
        except CommandRefused:
            log.info("sandbox facts: commands cannot run here", repo=ref.repo)
            return SandboxFacts(os=worker_os(), note="commands cannot run on this worker")
        facts = parse_probe(outcome.output)
        if not facts.os:
            facts.os = worker_os()
        if not facts.workdir:
            facts.workdir = str(root)
        if not outcome.sandboxed:
            facts.note = "commands run without a sandbox on this worker"
        log.info("sandbox facts", repo=ref.repo, toolchains=facts.toolchains)
        return facts
