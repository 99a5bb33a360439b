"""The MCP rig of the tests: the operator's `words` server (mcp_words_server.py, written with the
official SDK), shown to the sandbox, on a worker whose model is a fake server."""

from __future__ import annotations

import sys
from pathlib import Path

from harness_runs import with_fake

from shopfloor.models.mcp import McpServerSpec, McpUse
from shopfloor.settings import Settings
from shopfloor.testing import FakeModelServer

SERVER = Path(__file__).with_name("mcp_words_server.py")
USE = McpUse(servers=["words", "nowhere"], allow=["words.count_*", "words.look_*"], deny=["words.shout"])


def with_words_server(settings: Settings, fake: FakeModelServer) -> Settings:
    return with_fake(settings, fake).model_copy(
        update={
            "mcp_servers": {"words": McpServerSpec(command=[Path(sys.executable).name, str(SERVER)])},
            "sandbox_readonly_paths": [str(SERVER.parent)],  # where the sandbox shows the server's file
        }
    )
