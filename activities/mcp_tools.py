"""MCP tool servers, spoken to with the official `mcp` SDK over stdio: `mcp_list_tools` once when a
run starts, `mcp_call_tool` for each call the run's rules let through (agents/mcp_rules.py).

Each listing and each call starts the operator's server command in a bubblewrap sandbox of its own
(activities/sandbox.py `offline_argv`): no network, no checkout (an empty working directory), the
command policy's CPU, memory and process limits, and a time limit. Nothing is kept between two
calls, so a retried or resumed activity starts from nothing. A server that cannot start or answer
is a short note, never a failed run.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import structlog
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.sandbox import SandboxConfig, SandboxMode, offline_argv, resolve_mode, sandbox_config
from shopfloor.activities.sandbox_limits import open_confinement
from shopfloor.activities.tools.activities import stored_result
from shopfloor.agents.host_patterns import HostPattern
from shopfloor.blobs import BlobStore, get_json, put_json
from shopfloor.models import failure_types
from shopfloor.models.agent_run import CommandPolicy, ToolInput, ToolResult
from shopfloor.models.mcp import NAME, McpCatalog, McpListInput, McpServerSpec, offered_name, split_name
from shopfloor.models.transcript import Message, ToolSpec

log = structlog.get_logger(__name__)

T = TypeVar("T")

TIMEOUT_S = 60.0  # a server's start, handshake and one request
MAX_TOOLS = 40  # offered per server
NAME_CHARS = 64  # of an offered name: the longest a function name may be on OpenAI's wire
DESCRIPTION_CHARS = 1_000
OUTPUT_BYTES = 1024 * 1024  # of a structured answer shown as JSON


class McpUnavailable(Exception):
    """The server could not be started or did not answer: why, in a line."""


class McpActivities:
    def __init__(
        self,
        blobs: BlobStore,
        servers: dict[str, McpServerSpec],
        *,
        sandbox: SandboxMode | SandboxConfig = "auto",
        hide: Sequence[Path] = (),
        network_allow: Sequence[str] = (),
    ) -> None:
        self._blobs = blobs
        self._servers = servers
        self._network_allow = tuple(network_allow)  # the operator's: where an HTTP server may be
        self._sandbox = sandbox_config(sandbox)
        self._hide = tuple(hide)

    def all(self) -> list[Callable[..., Any]]:
        return [self.mcp_list_tools, self.mcp_call_tool]

    @activity.defn(name="mcp_list_tools")
    async def mcp_list_tools(self, inp: McpListInput) -> McpCatalog:
        specs: list[ToolSpec] = []
        notes: list[str] = []
        for server in dict.fromkeys(inp.servers):
            spec = self._servers.get(server)
            if spec is None:
                notes.append(f"{server}: not a server this shopfloor runs (SHOPFLOOR_MCP_SERVERS)")
                continue
            try:
                listed = await heartbeating(self._with_server(server, spec, lambda s: s.list_tools()))
            except McpUnavailable as exc:
                notes.append(f"{server}: {exc}")
                continue
            for tool in listed.tools[:MAX_TOOLS]:
                if not NAME.match(tool.name) or len(offered_name(server, tool.name)) > NAME_CHARS:
                    notes.append(f"{server}: tool {tool.name[:60]!r} left out (its name is not plain, or too long)")
                    continue
                specs.append(
                    ToolSpec(
                        name=offered_name(server, tool.name),
                        description=f"[MCP server {server}] {(tool.description or '').strip()}"[:DESCRIPTION_CHARS],
                        parameters=dict(tool.input_schema or {"type": "object"}),
                        risk="exec",
                    )
                )
            if len(listed.tools) > MAX_TOOLS:
                notes.append(f"{server}: {len(listed.tools) - MAX_TOOLS} tools left out (at most {MAX_TOOLS})")
        digest = await put_json(self._blobs, [s.model_dump(mode="json") for s in specs]) if specs else None
        return McpCatalog(names=[s.name for s in specs], specs=digest, notes=notes)

    @activity.defn(name="mcp_call_tool")
    async def mcp_call_tool(self, inp: ToolInput) -> ToolResult:
        reply = Message.model_validate(await get_json(self._blobs, inp.reply_digest))
        call = next((c for c in reply.tool_calls if c.id == inp.call_id), None)
        parts = split_name(inp.name)
        if call is None or call.name != inp.name or parts is None:
            raise ApplicationError(
                f"reply {inp.reply_digest[:12]} has no MCP call {inp.call_id} to {inp.name}",
                type=failure_types.TOOL_CALL_MISSING,
                non_retryable=True,
            )
        server, tool = parts
        spec = self._servers.get(server)
        if call.arguments_error is not None:
            return await self._result(inp, False, f"error: {call.arguments_error}")
        if spec is None:
            return await self._result(inp, False, f"error: {server} is not a server this worker runs")
        try:
            answer = await heartbeating(self._with_server(server, spec, lambda s: s.call_tool(tool, call.arguments)))
        except McpUnavailable as exc:
            return await self._result(inp, False, f"error: {exc}")
        return await self._result(inp, not answer.is_error, _text(answer))

    async def _with_server(self, server: str, spec: McpServerSpec, ask: Callable[[ClientSession], Awaitable[T]]) -> T:
        """Start `server` in its own sandbox (or reach it over HTTP), shake hands, `ask` it one
        thing, and stop it (hang up)."""
        if spec.url is not None:
            return await self._over_http(server, spec.url, ask)
        assert spec.command is not None
        real, note = resolve_mode(self._sandbox)
        if real != "bwrap":
            raise McpUnavailable(
                "MCP servers run only in the bubblewrap sandbox, and this worker has none"
                + (f" ({note})" if note else "")
            )
        policy = CommandPolicy()
        confinement = open_confinement(policy, self._sandbox.scratch_dir, self._sandbox.cgroup)
        try:
            empty = confinement.scratch.root / "nothing"  # its working directory: no checkout in it
            empty.mkdir()
            command = "exec " + shlex.join(spec.command)
            argv = offline_argv(
                empty, command, policy=policy, config=self._sandbox, confinement=confinement, hide=self._hide
            )
            errors = confinement.scratch.root / "stderr.log"
            with errors.open("w", encoding="utf-8") as errlog:
                try:
                    async with asyncio.timeout(TIMEOUT_S):
                        async with stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]), errlog) as (
                            read,
                            write,
                        ):
                            async with ClientSession(read, write) as session:
                                await session.initialize()
                                return await ask(session)
                except TimeoutError:
                    raise McpUnavailable(f"the MCP server {server} did not answer within {TIMEOUT_S:g} s") from None
                except Exception as exc:  # noqa: BLE001 - a server's failure is a note for the model, not a crash
                    said = errors.read_text(errors="replace").strip()[-500:]
                    log.info("mcp server failed", server=server, error=str(exc)[:300], stderr=said)
                    raise McpUnavailable(
                        f"the MCP server {server} failed: {type(exc).__name__}: {str(exc)[:300]}"
                        + (f"; it said: {said}" if said else "")
                    ) from None
        finally:
            await confinement.close()

    async def _over_http(self, server: str, url: str, ask: Callable[[ClientSession], Awaitable[T]]) -> T:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)
        allowed = any(_matches(p, host, port) for p in self._network_allow)
        if not allowed:
            raise McpUnavailable(
                f"the MCP server {server} at {host}:{port} is not on the operator's network allow-list "
                "(SHOPFLOOR_SANDBOX_NETWORK_ALLOW)"
            )
        try:
            async with asyncio.timeout(TIMEOUT_S):
                async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    return await ask(session)
        except TimeoutError:
            raise McpUnavailable(f"the MCP server {server} did not answer within {TIMEOUT_S:g} s") from None
        except Exception as exc:  # noqa: BLE001 - a server's failure is a note for the model, not a crash
            log.info("mcp server failed", server=server, error=str(exc)[:300])
            raise McpUnavailable(f"the MCP server {server} failed: {type(exc).__name__}: {str(exc)[:300]}") from None

    async def _result(self, inp: ToolInput, ok: bool, output: str) -> ToolResult:
        return await stored_result(self._blobs, inp, ok, output)  # as every tool's answer is stored


def _matches(pattern: str, host: str, port: int) -> bool:
    try:
        return HostPattern.parse(pattern).matches(host, port)
    except ValueError:  # settings are checked at start-up; an unparsable entry allows nothing
        return False


def _text(answer: Any) -> str:
    """A tool's answer as the model reads it: its text parts; other parts named, not shown."""
    parts: list[str] = []
    for item in answer.content or []:
        kind = getattr(item, "type", "content")
        parts.append(item.text if kind == "text" else f"[{kind} content left out]")
    if not parts and answer.structured_content is not None:
        parts.append(json.dumps(answer.structured_content, ensure_ascii=False)[:OUTPUT_BYTES])
    text = "\n".join(parts) or "(the tool answered nothing)"
    return f"error: {text}" if answer.is_error else text
