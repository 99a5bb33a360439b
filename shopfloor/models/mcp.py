"""MCP tool servers: what the operator runs, what a repository uses, what a run was offered.

The operator defines the servers (`SHOPFLOOR_MCP_SERVERS`): a name and a command, started in the
sandbox and spoken to over stdio. A repository's policy (`mcp:` in .github/shopfloor.yml) names the
ones it uses and which of their tools run without asking or never run. A run lists the tools once
when it starts (activities/mcp_tools.py); the model sees them as `mcp__<server>__<tool>`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

MCP_PREFIX = "mcp__"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")  # a server's name; a tool's, as offered to models


class McpServerSpec(BaseModel):
    """One server the operator runs: a `command` (argv), started in the sandbox for each listing
    and each call, with no network and no checkout, spoken to over stdio; or the `url` of a server
    that runs elsewhere (streamable HTTP), which must be on the operator's network allow-list."""

    command: list[str] | None = Field(default=None, min_length=1, max_length=64)
    url: str | None = Field(default=None, max_length=2000)

    @field_validator("command")
    @classmethod
    def _plain(cls, command: list[str] | None) -> list[str] | None:
        if command is not None and any(not part or "\x00" in part for part in command):
            raise ValueError("a command part is empty or holds a NUL byte")
        return command

    @field_validator("url")
    @classmethod
    def _web(cls, url: str | None) -> str | None:
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
                raise ValueError("an MCP server's url is http(s)://host[:port]/path, without credentials")
        return url

    @model_validator(mode="after")
    def _one(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server has a `command` or a `url`, one of the two")
        return self


class McpUse(BaseModel):
    """A run's MCP servers and rules (from the repository's policy; never from the model).
    `allow` and `deny` are `<server>.<tool>` patterns (`*` and `?`); a tool matching neither waits
    for an operator."""

    servers: list[str] = Field(default_factory=list, max_length=10)
    allow: list[str] = Field(default_factory=list, max_length=100)
    deny: list[str] = Field(default_factory=list, max_length=100)


class McpListInput(BaseModel):
    servers: list[str]
    run_id: str = ""


class McpCatalog(BaseModel):
    """The tools a run was offered: their names (`mcp__<server>__<tool>`), their specs in the blob
    store (`specs`, a JSON list of ToolSpec), and one line per server that offered none, saying why."""

    names: list[str] = Field(default_factory=list)
    specs: str | None = None
    notes: list[str] = Field(default_factory=list)


def offered_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an offered name; None for any other name."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX) :].partition("__")
    return (server, tool) if sep and server and tool else None
