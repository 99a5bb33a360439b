"""Tool calls as activities: load the call's arguments from the reply blob, run the tool in the
workspace, store the full output and return a digest, a preview and ok/error.

A tool failure is a result the model reads, never an exception that ends the run; only a broken
setup (no such workspace on this worker, a reply blob without that call) raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.tools import read_only
from shopfloor.agents.tools import TOOLS
from shopfloor.blobs import BlobStore, get_json
from shopfloor.errors import ToolError
from shopfloor.models.agent_run import ToolInput, ToolResult
from shopfloor.models.transcript import Message

log = structlog.get_logger(__name__)

PREVIEW_CHARS = 200

ToolFn = Callable[[Path, Any], str]


def _validation_message(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
    )
    return f"invalid arguments: {problems}"


class ToolActivities:
    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs

    async def _result(self, inp: ToolInput, ok: bool, output: str) -> ToolResult:
        data = output.encode("utf-8")
        digest = await self._blobs.put(data)
        return ToolResult(
            call_id=inp.call_id,
            name=inp.name,
            ok=ok,
            preview=" ".join(output.split())[:PREVIEW_CHARS],
            output_digest=digest,
            output_bytes=len(data),
        )

    def _workspace(self, inp: ToolInput) -> Path:
        if not inp.workspace.path:
            raise ApplicationError("the workspace has no local path", type="WorkspaceMissing", non_retryable=True)
        root = Path(inp.workspace.path)
        if not root.is_dir():
            raise ApplicationError(
                f"workspace {root} is not a directory on this worker", type="WorkspaceMissing", non_retryable=True
            )
        return root

    async def _run(self, inp: ToolInput, fn: ToolFn) -> ToolResult:
        reply = Message.model_validate(await get_json(self._blobs, inp.reply_digest))
        call = next((c for c in reply.tool_calls if c.id == inp.call_id), None)
        if call is None or call.name != inp.name:
            raise ApplicationError(
                f"reply {inp.reply_digest[:12]} has no call {inp.call_id} to {inp.name}",
                type="ToolCallMissing",
                non_retryable=True,
            )
        if call.arguments_error is not None:
            return await self._result(inp, False, f"error: {call.arguments_error}")
        args_model: type[BaseModel] = TOOLS[inp.name].args
        try:
            args = args_model.model_validate(call.arguments)
        except ValidationError as exc:
            return await self._result(inp, False, f"error: {_validation_message(exc)}")
        root = self._workspace(inp)
        try:
            output = await asyncio.to_thread(fn, root, args)
        except ToolError as exc:
            log.info("tool error", tool=inp.name, call_id=inp.call_id, error=str(exc))
            return await self._result(inp, False, f"error: {exc}")
        return await self._result(inp, True, output)

    @activity.defn(name="read_file")
    async def read_file(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, read_only.read_file)

    @activity.defn(name="list_dir")
    async def list_dir(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, read_only.list_dir)

    @activity.defn(name="glob")
    async def glob(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, read_only.glob)

    @activity.defn(name="grep")
    async def grep(self, inp: ToolInput) -> ToolResult:
        return await self._run(inp, read_only.grep)

    def all(self) -> list[Callable[..., Any]]:
        return [self.read_file, self.list_dir, self.glob, self.grep]
