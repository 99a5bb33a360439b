"""Tool calls as activities: load the call's arguments from the reply blob, run the tool in the
workspace, store the full output and return a digest, a preview and ok/error.

A tool failure is a result the model reads, never an exception that ends the run; only a broken
setup (no such workspace, a reply blob without that call) raises. Mutating tools checkpoint the
workspace afterwards — even when they failed, since a failed command may still have written —
and return the new WorkspaceRef, so another worker can carry on from exactly there. A change too
large to checkpoint is undone and the call fails with a message naming the files.

Every output is stored whole up to MAX_OUTPUT_BYTES (tools bound their own output well below it;
this is the backstop), so reading one back (read_output, the transcript) is bounded too.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.code_mode import run_program
from shopfloor.activities.environment import (
    CheckoutConflict,
    Environments,
    EnvironmentUnavailable,
    SandboxEnvironment,
)
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.metrics import count_tool_call
from shopfloor.activities.sandbox import (
    CommandOutcome,
    SandboxConfig,
    SandboxMode,
    detect_test_command,
    resolve_mode,
    run_command,
    sandbox_config,
)
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.activities.tools import editing, read_only
from shopfloor.activities.workspace import CheckpointTooLarge, PatchError, WorkspaceError, Workspaces
from shopfloor.agents import hooks
from shopfloor.agents.permissions import PermissionPolicy
from shopfloor.agents.tools import (
    TOOLS,
    EditFileArgs,
    GitDiffArgs,
    ReadOutputArgs,
    RunCommandArgs,
    RunPythonArgs,
    RunTestsArgs,
    WriteFileArgs,
)
from shopfloor.blobs import BlobStore, get_json
from shopfloor.errors import BlobNotFound, ToolError
from shopfloor.models import failure_types
from shopfloor.models.agent_run import ToolInput, ToolResult, WorkspaceRef
from shopfloor.models.transcript import Message

log = structlog.get_logger(__name__)

PREVIEW_CHARS = 200
MAX_OUTPUT_BYTES = 4 * 1024 * 1024

# (workspace root, arguments, the call's input) -> output text
ToolFn = Callable[[Path, Any, ToolInput], Awaitable[str]]


def _validation_message(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
    )
    return f"invalid arguments: {problems}"


def _sync(fn: Callable[[Path, Any], str]) -> ToolFn:
    async def run(root: Path, args: Any, inp: ToolInput) -> str:
        return await asyncio.to_thread(fn, root, args)

    return run


def _command_report(outcome: CommandOutcome) -> str:
    if outcome.timed_out:
        head = f"stopped: {outcome.killed_reason or 'timed out'} after {outcome.duration_s:.0f} s"
    elif outcome.killed_reason:
        head = f"killed: {outcome.killed_reason} (exit code {outcome.exit_code})"
    else:
        head = f"exit code {outcome.exit_code} ({outcome.duration_s:.1f} s)"
    note = f"\nWARNING: {outcome.sandbox_note}" if outcome.sandbox_note else ""
    return f"{head}{note}\n{outcome.output}"


async def stored_result(
    blobs: BlobStore, inp: ToolInput, ok: bool, output: str, workspace: WorkspaceRef | None = None
) -> ToolResult:
    """A tool call's answer: its output in the blob store (cut at MAX_OUTPUT_BYTES, saying so), a
    preview, and the call counted for the worker's metrics."""
    data = output.encode("utf-8", errors="replace")
    if len(data) > MAX_OUTPUT_BYTES:
        note = f"\n[output cut at {MAX_OUTPUT_BYTES:,} of {len(data):,} bytes]"
        data = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="ignore").encode() + note.encode()
    digest = await blobs.put(data)
    # Every tool call's answer passes here once (errors the model reads included).
    count_tool_call(inp.name, inp.workspace.repo, "ok" if ok else "error")
    return ToolResult(
        call_id=inp.call_id,
        name=inp.name,
        ok=ok,
        preview=" ".join(output.split())[:PREVIEW_CHARS],
        output_digest=digest,
        output_bytes=len(data),
        workspace=workspace,
    )


class ToolActivities:
    def __init__(
        self,
        blobs: BlobStore,
        workspaces: Workspaces,
        *,
        sandbox: SandboxMode | SandboxConfig = "auto",
        hide: Sequence[Path] = (),
        network: SandboxNetwork | None = None,
        environments: Environments | None = None,
    ) -> None:
        self._blobs = blobs
        self._workspaces = workspaces
        # Where a workspace's prepared environment (setup's) is restored for its commands.
        self._environments = environments or Environments(workspaces.root, blobs)
        self._sandbox = sandbox
        self._hide = tuple(hide)
        self._network = network or SandboxNetwork()  # the egress rules of commands that may use the network

    async def _result(self, inp: ToolInput, ok: bool, output: str, workspace: WorkspaceRef | None = None) -> ToolResult:
        return await stored_result(self._blobs, inp, ok, output, workspace)

    async def _open(self, inp: ToolInput, mutating: bool) -> Path:
        ref = inp.workspace
        if ref.path:  # a checkout on this machine, used in place (read-only agents on a local dir)
            root = Path(ref.path)
            if not root.is_dir():
                raise ApplicationError(
                    f"workspace {root} is not a directory on this worker",
                    type=failure_types.WORKSPACE_MISSING,
                    non_retryable=True,
                )
            return root
        opening = self._workspaces.open(ref, inp.run_id, read_only=not mutating)
        try:
            # A local activity (a read-only call) cannot heartbeat: its workflow task keeps it alive.
            return await (opening if activity.info().is_local else heartbeating(opening))
        except PatchError as exc:
            raise ApplicationError(str(exc), type=failure_types.WORKSPACE_BROKEN, non_retryable=True) from exc

    async def _run(self, inp: ToolInput, fn: ToolFn, *, workspace: bool = True) -> ToolResult:
        reply = Message.model_validate(await get_json(self._blobs, inp.reply_digest))
        call = next((c for c in reply.tool_calls if c.id == inp.call_id), None)
        if call is None or call.name != inp.name:
            raise ApplicationError(
                f"reply {inp.reply_digest[:12]} has no call {inp.call_id} to {inp.name}",
                type=failure_types.TOOL_CALL_MISSING,
                non_retryable=True,
            )
        if call.arguments_error is not None:
            return await self._result(inp, False, f"error: {call.arguments_error}")
        args_model: type[BaseModel] = TOOLS[inp.name].args
        try:
            args = args_model.model_validate(call.arguments)
        except ValidationError as exc:
            return await self._result(inp, False, f"error: {_validation_message(exc)}")
        mutating = TOOLS[inp.name].risk != "read"
        root = await self._open(inp, mutating) if workspace else Path("/")
        try:
            ok, output = True, await fn(root, args, inp)
        except ToolError as exc:
            log.info("tool error", tool=inp.name, call_id=inp.call_id, error=str(exc))
            ok, output = False, f"error: {exc}"
        new_ref = None
        if mutating and not inp.workspace.path:
            try:
                new_ref = await heartbeating(self._workspaces.checkpoint(inp.workspace, inp.run_id))
            except CheckpointTooLarge as exc:  # undone, on this worker as on any other: the model decides
                log.info("checkpoint refused", tool=inp.name, call_id=inp.call_id, files=exc.files[:5])
                ok, output, new_ref = False, f"error: {exc}\n\nWhat the call said:\n{output}", inp.workspace
            except WorkspaceError as exc:  # retried: the activity reruns the tool on a rebuilt checkout
                raise ApplicationError(f"checkpoint failed: {exc}", type=failure_types.CHECKPOINT_FAILED) from exc
        result = await self._result(inp, ok, output, new_ref)
        if TOOLS[inp.name].risk == "exec":
            note = resolve_mode(self._sandbox)[1]  # probed once per process
            result = result.model_copy(update={"warning": note or None})
        return result

    # -- read-only --------------------------------------------------------------------------

    @activity.defn(name="read_file")
    async def read_file(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, _sync(read_only.read_file))

    @activity.defn(name="list_dir")
    async def list_dir(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, _sync(read_only.list_dir))

    @activity.defn(name="glob")
    async def glob(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, _sync(read_only.glob))

    @activity.defn(name="grep")
    async def grep(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, _sync(read_only.grep))

    @activity.defn(name="run_python")
    async def run_python(self, inp: ToolInput) -> ToolResult:
        async def program(root: Path, args: RunPythonArgs, inp: ToolInput) -> str:
            permissions = PermissionPolicy(**inp.permissions.model_dump(exclude_none=True))
            run = run_program(
                root,
                args.code,
                sandbox=sandbox_config(self._sandbox),
                policy=inp.commands,
                permissions=permissions,
                hide=self._hide,
            )
            report = await heartbeating(run, detail="run_python")
            if not report.ok:
                raise ToolError(report.text())
            return report.text()

        return await self._run(inp, program)

    @activity.defn(name="git_diff")
    async def git_diff(self, inp: ToolInput) -> ToolResult:
        async def diff(root: Path, args: GitDiffArgs, inp: ToolInput) -> str:
            if inp.workspace.path:
                raise ToolError("git_diff needs a portable workspace; this run works on a local directory")
            return await self._workspaces.diff(inp.workspace, inp.run_id, args.path)

        return await self._run(inp, diff)

    @activity.defn(name="read_output")
    async def read_output(self, inp: ToolInput) -> ToolResult:
        async def page(root: Path, args: ReadOutputArgs, inp: ToolInput) -> str:
            if args.digest not in inp.readable:
                raise ToolError(f"no cut output {args.digest[:16]}… in this run; use the digest from a cut note")
            try:
                text = (await self._blobs.get(args.digest)).decode("utf-8", errors="replace")
            except BlobNotFound as exc:
                raise ToolError(str(exc)) from exc
            chunk = text[args.offset : args.offset + args.limit]
            end = args.offset + len(chunk)
            more = f"\n[{len(text) - end} more characters; offset={end}]" if end < len(text) else "\n[end of output]"
            return chunk + more

        return await self._run(inp, page, workspace=False)

    # -- mutating ---------------------------------------------------------------------------

    @activity.defn(name="edit_file")
    async def edit_file(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, self._after_edit(_sync(editing.edit_file)))

    @activity.defn(name="write_file")
    async def write_file(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, self._after_edit(_sync(editing.write_file)))

    def _after_edit(self, edit: ToolFn) -> ToolFn:
        """`edit`, then the repository's after-edit hooks it sets off, in the sandbox as commands
        run, before the checkpoint (so what they change is kept). A failing hook undoes nothing:
        the model reads its report after the edit's own."""

        async def run(root: Path, args: EditFileArgs | WriteFileArgs, inp: ToolInput) -> str:
            output = await edit(root, args, inp)
            for hook, command in hooks.after_edit_commands(inp.commands.after_edit, [args.path]):
                _, report = await self._hook(root, command, inp, hook.timeout_s)
                output += "\n\n" + hooks.hook_report(hooks.AFTER_EDIT, command, report)
            return output

        return run

    async def _hook(self, root: Path, command: str, inp: ToolInput, timeout_s: float) -> tuple[bool, str]:
        """Run a hook's command exactly as an agent's command runs: (passed, its report)."""
        try:
            return True, await self._command(root, command, inp, timeout_s)
        except ToolError as exc:  # a non-zero exit, a timeout, a refusal: the report says which
            return False, str(exc)

    @activity.defn(name="before_submit_hooks")
    async def before_submit_hooks(self, inp: ToolInput) -> ToolResult:
        """The repository's before-submit hooks on the workspace an accepted submit would hand
        over, every one of them, then a checkpoint. The result answers the submit call: ok when
        every hook passed and none changed a file; else the refusal the model reads (the hooks'
        reports), with the changed workspace if they changed it."""
        root = await self._open(inp, mutating=True)
        failed: list[str] = []
        for hook in inp.commands.before_submit:
            passed, report = await self._hook(root, hook.run, inp, hook.timeout_s)
            if not passed:
                failed.append(hooks.hook_report(hooks.BEFORE_SUBMIT, hook.run, report))
        new_ref = inp.workspace
        if not inp.workspace.path:
            try:
                new_ref = await heartbeating(self._workspaces.checkpoint(inp.workspace, inp.run_id))
            except CheckpointTooLarge as exc:  # undone: the model decides, as after a tool call
                failed.append(f"error: the hooks' changes were undone: {exc}")
            except WorkspaceError as exc:  # retried: the hooks run again on a rebuilt checkout
                raise ApplicationError(f"checkpoint failed: {exc}", type=failure_types.CHECKPOINT_FAILED) from exc
        changed = new_ref != inp.workspace
        if not failed and not changed:
            names = ", ".join(f"`{hook.run}`" for hook in inp.commands.before_submit)
            return await self._result(inp, True, f"before-submit hooks passed: {names}", inp.workspace)
        return await self._result(inp, False, hooks.submit_refused(failed, changed=changed), new_ref)

    async def _environment(self, root: Path, inp: ToolInput) -> SandboxEnvironment | None:
        """The run's copy of the workspace's prepared environment (None: it has none)."""
        digest = inp.workspace.environment
        if digest is None:
            return None
        try:
            return await heartbeating(self._environments.restore(digest, inp.run_id, root))
        except CheckoutConflict as exc:  # the model's own doing: it reads why
            raise ToolError(f"the command was not run: {exc}") from None
        except EnvironmentUnavailable as exc:  # retried: the blob store may answer again
            raise ApplicationError(str(exc), type=failure_types.WORKSPACE_ERROR) from exc

    async def _command(self, root: Path, command: str, inp: ToolInput, timeout_s: float | None) -> str:
        environment = await self._environment(root, inp)
        outcome = await run_command(
            root,
            command,
            mode=self._sandbox,
            policy=inp.commands,
            timeout_s=timeout_s,
            on_progress=lambda text: activity.heartbeat(text[-200:]),
            hide=self._hide,
            network=self._network,
            environment=environment,
        )
        report = _command_report(outcome)
        if outcome.exit_code != 0:
            raise ToolError(report)  # the model reads it as an error result, output included
        return report

    @activity.defn(name="run_command")
    async def run_command(self, inp: ToolInput) -> ToolResult:
        async def run(root: Path, args: RunCommandArgs, inp: ToolInput) -> str:
            return await self._command(root, args.command, inp, args.timeout_s)

        return await self._run(inp, run)

    @activity.defn(name="run_tests")
    async def run_tests(self, inp: ToolInput) -> ToolResult:
        async def run(root: Path, args: RunTestsArgs, inp: ToolInput) -> str:
            command = inp.commands.test_command or detect_test_command(root)
            if command is None:
                raise ToolError("no test command is configured and none was detected (pytest, npm, go, cargo, make)")
            try:  # the model's arguments are words for the test command, never shell syntax
                extra = " ".join(shlex.quote(word) for word in shlex.split(args.args))
            except ValueError as exc:
                raise ToolError(f"could not parse the test arguments: {exc}") from exc
            return await self._command(root, f"{command} {extra}".strip(), inp, None)

        return await self._run(inp, run)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.read_file,
            self.list_dir,
            self.glob,
            self.grep,
            self.git_diff,
            self.run_python,
            self.read_output,
            self.edit_file,
            self.write_file,
            self.run_command,
            self.run_tests,
            self.before_submit_hooks,
        ]
