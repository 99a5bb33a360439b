"""Which MCP tool calls run, wait for an operator, or never run (the repository's `mcp:` rules).

Pure. A call to a tool the run was not offered is refused; a tool matching a `deny` pattern is
refused; one matching an `allow` pattern runs; every other tool waits for an operator, as risky
built-in calls do. Patterns are `<server>.<tool>` with `*` and `?` (fnmatch, case-sensitive).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from shopfloor.models.agent_run import Decision
from shopfloor.models.mcp import McpUse, split_name


def mcp_decision(name: str, offered: list[str], use: McpUse | None) -> tuple[Decision, str]:
    """Allow, ask or deny a call to `name`, with a reason the model can read."""
    parts = split_name(name)
    if parts is None or use is None or name not in offered:
        return "deny", f"there is no MCP tool named {name!r} in this run"
    key = f"{parts[0]}.{parts[1]}"
    if any(fnmatchcase(key, p) for p in use.deny):
        return "deny", f"the repository's policy does not allow the MCP tool {key} (`mcp.deny`)"
    if any(fnmatchcase(key, p) for p in use.allow):
        return "allow", ""
    return "ask", f"the MCP tool {key} is not in the repository's `mcp.allow`: an operator must approve this call"
