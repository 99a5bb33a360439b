"""The factory rig (factory_runs) on a sample repository whose default branch configures
repository hooks: a tiny formatter (tools/fmt.py) and a tiny linter (tools/lint.py) committed in
the repository itself, so no external tool is needed. Shared by tests/e2e/test_repository_hooks.py
and tests/security/test_repository_hooks.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_runs import write_cassette
from factory_runs import CI_CMD, POLICY, SECRET, Factory, edge_subscribed, sample_repo
from portable_repos import load_messages
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.client import Client

from shopfloor.blobs import BlobStore
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.transcript import Message
from shopfloor.settings import Settings

# `a+b` -> `a + b`, no trailing blanks; says what it did.
FMT_PY = """import re
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        text = f.read()
    new = re.sub(r"(\\w)[ \\t]*([-+*/])[ \\t]*(\\w)", r"\\1 \\2 \\3", text)
    new = "\\n".join(line.rstrip() for line in new.split("\\n"))
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        print(f"fmt: reformatted {path}")
    else:
        print(f"fmt: {path} already formatted")
"""
# No print() left in calc/.
LINT_PY = """import pathlib
import sys

problems = [
    f"{p}:{n}: print() left in the code"
    for p in sorted(pathlib.Path("calc").rglob("*.py"))
    for n, line in enumerate(p.read_text().splitlines(), 1)
    if "print(" in line
]
print("\\n".join(problems) or "lint: calc is clean")
sys.exit(1 if problems else 0)
"""
AFTER_EDIT = (
    "hooks:\n  after_edit:\n    - run: python tools/fmt.py\n      files: ['*.py']\n      timeout_seconds: 120\n"
)
BEFORE_SUBMIT = "hooks:\n  before_submit:\n    - run: python tools/lint.py\n      timeout_seconds: 300\n"
LINT_FAILURE = "calc/ops.py:2: print() left in the code"


@asynccontextmanager
async def hooks_factory(
    simulator: SimulatorHandle,
    settings: Settings,
    running_worker,
    client: Client,
    tmp_path: Path,
    models: dict[str, list[dict[str, Any]]],
    hooks: str,
) -> AsyncIterator[Factory]:
    """factory_runs.factory with the policy POLICY + `hooks` and tools/fmt.py, tools/lint.py on main."""
    src = sample_repo(tmp_path / "src", POLICY + hooks)
    (src / "tools").mkdir()
    (src / "tools" / "fmt.py").write_text(FMT_PY)
    (src / "tools" / "lint.py").write_text(LINT_PY)
    owner, name = "acme", f"hooks{uuid.uuid4().hex[:6]}"
    repo = f"{owner}/{name}"
    simulator.create_repo(owner, name, source_dir=src, ci_command=CI_CMD)
    simulator.set_permission(owner, name, "maria", "maintain")
    agent_models = {agent: write_cassette(tmp_path / f"{agent}.json", turns) for agent, turns in models.items()}
    worker_settings = settings.model_copy(
        update={
            "github_api_url": simulator.api_url,
            "github_token": SecretStr(BOT_TOKEN),
            "webhook_secret": SecretStr(SECRET),
            "agent_models": agent_models,
        }
    )
    with edge_subscribed(simulator, repo, client, worker_settings) as edge_url:
        async with running_worker(worker_settings):
            yield Factory(simulator, client, repo, edge_url=edge_url)


async def agent_messages(client: Client, blobs: BlobStore, workflow_id: str) -> tuple[AgentResult, list[Message]]:
    """An agent run's result and its whole transcript (what the model was sent and said)."""
    result = await client.get_workflow_handle(workflow_id, result_type=AgentResult).result()
    assert result.transcript, result
    return result, await load_messages(blobs, result.transcript)


def tool_messages(messages: list[Message], name: str) -> list[Message]:
    return [m for m in messages if m.role == "tool" and m.name == name]
