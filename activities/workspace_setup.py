"""The `workspace_setup` activity: run a repository's setup commands into a fresh environment for
the base commit, in the sandbox with network through the egress proxy, and keep the result.

Before the commands, a virtualenv is made at the environment's fixed path (activities/environment.py)
from the worker's base interpreter; each command then runs in the checkout with that virtualenv
first on PATH, HOME and the caches in its scratch directory, the network allowed (the package
registries, the operator's mirrors and the policy's `network_allow` within the operator's bound),
and the policy's timeout. Setup may write only what git ignores in the checkout (`node_modules`,
`build/`): a tracked file it changes or a file it creates that git does not ignore fails setup,
naming them, since the agents' patch would carry it. The environment is then archived into the
blob store under its reuse key; when that key already has an archive nothing runs (`reused`).

A failing command is a non-retryable SETUP_FAILED naming the command and the tail of its output.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.environment import (
    VENV,
    Environments,
    EnvironmentUnavailable,
    environment_key,
    sandbox_environment,
)
from shopfloor.activities.git_cmd import GitError
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.sandbox import CommandOutcome, SandboxConfig, SandboxMode, resolve_mode, run_command
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.activities.workspace import PatchError, WorkspaceError, Workspaces, portable
from shopfloor.errors import ToolError
from shopfloor.models import failure_types
from shopfloor.models.agent_run import CommandPolicy, WorkspaceRef
from shopfloor.models.repo_profile import SetupInput, SetupOutput

log = structlog.get_logger(__name__)

TAIL_CHARS = 1500  # of a failing command's output, for the progress comment and the run's reason
PREVIEW_CHARS = 500
LISTED_FILES = 10  # of the files setup should not have made, named in its failure


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _failed(message: str) -> ApplicationError:
    return ApplicationError(message, type=failure_types.SETUP_FAILED, non_retryable=True)


def _outcome_problem(outcome: CommandOutcome) -> str | None:
    if outcome.timed_out:
        return f"stopped: {outcome.killed_reason or 'timed out'} after {outcome.duration_s:.0f} s"
    if outcome.killed_reason:
        return f"killed: {outcome.killed_reason}"
    if outcome.exit_code != 0:
        return f"exit code {outcome.exit_code}"
    return None


class WorkspaceSetupActivities:
    def __init__(
        self,
        workspaces: Workspaces,
        environments: Environments,
        *,
        sandbox: SandboxMode | SandboxConfig = "auto",
        hide: Sequence[Path] = (),
        network: SandboxNetwork | None = None,
    ) -> None:
        self._workspaces = workspaces
        self._environments = environments
        self._sandbox = sandbox
        self._hide = tuple(hide)
        self._network = network or SandboxNetwork()

    @activity.defn(name="workspace_setup")
    async def workspace_setup(self, inp: SetupInput) -> SetupOutput:
        """Prepare (or find) the environment of `inp.workspace`'s base for `inp.commands`."""
        started = time.monotonic()
        ws = inp.workspace
        try:
            clone_url, base = portable(ws)
        except WorkspaceError as exc:
            raise _failed(f"setup cannot run: {exc}") from None
        if not inp.commands:
            return SetupOutput(workspace=ws)
        mode = resolve_mode(self._sandbox)[0]
        key = environment_key(clone_url, base, list(inp.commands), mode)
        found = await self._environments.index.get(key)
        if found is not None:
            log.info("environment reused", key=key[:12], digest=found[:12])
            return SetupOutput(workspace=self._with(ws, found), reused=True, seconds=time.monotonic() - started)
        if mode != "bwrap":
            raise _failed(
                "setup was not run: setup commands need the network, which only the bubblewrap sandbox "
                "gives commands (through shopfloor's egress proxy); this worker runs commands without it "
                f"(SHOPFLOOR_SANDBOX={'none' if mode == 'none' else 'auto, and bubblewrap is not usable'})"
            )
        run_id = inp.run_id or f"setup-{key[:16]}"
        try:
            checkout = await heartbeating(self._workspaces.open(ws.model_copy(update={"patch_digest": None}), run_id))
        except (PatchError, WorkspaceError, GitError) as exc:
            raise ApplicationError(
                f"setup could not check out {base[:12]}: {exc}", type=failure_types.WORKSPACE_ERROR
            ) from exc
        env_dir = await asyncio.to_thread(self._environments.fresh, run_id)  # an earlier attempt's may be large
        env = sandbox_environment(env_dir, checkout)
        policy = CommandPolicy(
            network=True,
            network_allow=list(inp.network_allow),
            timeout_s=inp.timeout_s,
            cpu_s=int(inp.timeout_s),
            memory_mb=4096,
            scratch_mb=4096,  # pip's and npm's caches live here, and go with the command
        )
        make_venv = f"{Path(sys.base_prefix) / 'bin' / 'python3'} -m venv {VENV}"
        outputs: list[str] = []
        for command in [make_venv, *inp.commands]:
            outcome = await self._run(checkout, command, policy, env)
            outputs.append(outcome.output)
            problem = _outcome_problem(outcome)
            if problem is not None:
                shown = "making the environment's virtualenv" if command == make_venv else f"`{command}`"
                raise _failed(f"setup command {shown} failed ({problem}):\n{_tail(outcome.output, TAIL_CHARS)}")
        stray = await self._stray_files(checkout)
        if stray:
            names = ", ".join(stray[:LISTED_FILES]) + (
                f" and {len(stray) - LISTED_FILES} more" if len(stray) > LISTED_FILES else ""
            )
            raise _failed(
                "setup changed files git tracks or does not ignore, which would end up in the agents' change: "
                f"{names}. Setup may write only what .gitignore covers (node_modules, build output) or its environment."
            )
        try:
            ignored = await self._ignored(checkout)
            digest = await heartbeating(self._environments.keep(run_id, checkout, ignored))
        except EnvironmentUnavailable as exc:
            raise _failed(f"setup ran, but its environment cannot be kept: {exc}") from None
        await self._environments.index.put(key, digest)
        # The checkout is the base again (setup changed only ignored files): trusted as it is.
        await heartbeating(self._workspaces.checkpoint(ws.model_copy(update={"patch_digest": None}), run_id))
        log.info("environment prepared", key=key[:12], digest=digest[:12], commands=len(inp.commands))
        return SetupOutput(
            workspace=self._with(ws, digest),
            commands_run=len(inp.commands),
            seconds=time.monotonic() - started,
            output_preview=_tail("\n".join(outputs), PREVIEW_CHARS),
        )

    def _with(self, ws: WorkspaceRef, digest: str) -> WorkspaceRef:
        return ws.model_copy(update={"environment": digest})

    async def _run(self, checkout: Path, command: str, policy: CommandPolicy, env: Any) -> CommandOutcome:
        try:
            return await run_command(
                checkout,
                command,
                mode=self._sandbox,
                policy=policy,
                on_progress=lambda text: activity.heartbeat(text[-200:]),
                hide=self._hide,
                network=self._network,
                environment=env,
            )
        except ToolError as exc:  # refused before it ran (no sandbox, limits that cannot be set up)
            raise _failed(f"setup command `{command}` was not run: {exc}") from None

    async def _git_lines(self, checkout: Path, *args: str) -> list[str]:
        out = await self._workspaces.checkout_git(checkout, *args)
        return [name for name in out.decode("utf-8", "replace").split("\0") if name]

    async def _stray_files(self, checkout: Path) -> list[str]:
        """Tracked files setup changed or deleted, and files it made that git does not ignore."""
        return await self._git_lines(
            checkout, "ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard"
        )

    async def _ignored(self, checkout: Path) -> list[str]:
        """What setup left in the checkout that git ignores (directories whole)."""
        return await self._git_lines(
            checkout, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
        )

    def all(self) -> list[Callable[..., Any]]:
        return [self.workspace_setup]
