"""An MCP server written with the official SDK, for the tests: started by shopfloor in the
sandbox (SHOPFLOOR_MCP_SERVERS) and spoken to over stdio."""

import os
import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("words")


@server.tool()
def count_words(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def look_around(path: str) -> str:
    """What this server can see: its working directory, a path, and the network."""
    seen = [f"cwd {sorted(os.listdir('.'))}", f"{path} exists: {os.path.exists(path)}"]
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        seen.append("network: reached")
    except OSError as exc:
        seen.append(f"network: {type(exc).__name__}")
    return "; ".join(seen)


if __name__ == "__main__":
    server.run()
