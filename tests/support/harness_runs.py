"""Shared pieces of the harness workflow tests (loop rules and operator controls): the fake model
server wired into a worker, git repositories for the `code` agent, polling, wire inspection."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_runs import activities_in

from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import BlobStore
from shopfloor.models.agent_run import AgentInput, Limits, Timeouts, WorkspaceRef
from shopfloor.settings import Settings
from shopfloor.testing import FakeModelServer, LoggedRequest
from shopfloor.workflows.agent import AgentWorkflow

COMPACTION_OPENING = "The conversation to summarize"


def with_fake(settings: Settings, fake: FakeModelServer) -> Settings:
    """Worker settings whose `openai:*` models are answered by `fake`."""
    return settings.model_copy(update={"openai_base_url": fake.openai_base_url, "openai_api_key": None})


async def wait_for(predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "a condition") -> Any:
    """Poll `predicate` (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.05)


async def status_of(handle):
    return await handle.query(AgentWorkflow.status)


# -- the `code` agent on a portable workspace -------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    done = subprocess.run(["git", *ident, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.rstrip()


def git_repo(root: Path) -> tuple[Path, str]:
    """A small committed repository; (its path, the HEAD sha)."""
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# sample\nA tiny package that greets people.\n")
    (root / "src" / "greet.py").write_text("def greet(name):\n    return f'Hello, {name}!'\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "initial")
    return root, git(root, "rev-parse", "HEAD")


def code_input(repo: Path, sha: str, model: str, *, goal: str = "Make the change.", **fields: Any) -> AgentInput:
    fields.setdefault("limits", Limits(max_steps=40))
    fields.setdefault("timeouts", Timeouts(model_heartbeat_s=30.0))
    return AgentInput(
        agent="code",
        model=model,
        goal=goal,
        workspace=WorkspaceRef(repo=f"local/{repo.name}", clone_url=str(repo), base_sha=sha),
        **fields,
    )


def explore_input(repo: Path, model: str, *, goal: str = "What does this repo do?", **fields: Any) -> AgentInput:
    fields.setdefault("limits", Limits(max_steps=40))
    return AgentInput(
        agent="explore",
        model=model,
        goal=goal,
        workspace=WorkspaceRef(repo=f"local/{repo.name}", path=str(repo)),
        **fields,
    )


async def checkout(ref: WorkspaceRef, blobs: BlobStore, root: Path) -> Path:
    """Rebuild the workspace a ref describes, as a fresh worker would (shares only the blobs)."""
    return await Workspaces(root, blobs).open(ref, f"verify-{root.name}", read_only=True)


# -- what went over the wire ------------------------------------------------------------------


def wire(request: LoggedRequest) -> list[dict[str, Any]]:
    return request.body.get("messages") or []


def is_compaction(request: LoggedRequest) -> bool:
    ms = [m for m in wire(request) if m.get("role") != "system"]
    return len(ms) == 1 and ms[0].get("role") == "user" and str(ms[0].get("content", "")).startswith(COMPACTION_OPENING)


def step_requests(fake: FakeModelServer) -> list[LoggedRequest]:
    """The agent's step requests (compaction requests left out), in order."""
    return [r for r in fake.requests if not is_compaction(r) and r.status == 200]


def tool_messages(request: LoggedRequest) -> list[dict[str, Any]]:
    return [m for m in wire(request) if m.get("role") == "tool"]


def last_tool_message(request: LoggedRequest) -> dict[str, Any]:
    return tool_messages(request)[-1]


def user_texts(request: LoggedRequest) -> list[str]:
    return [str(m.get("content") or "") for m in wire(request) if m.get("role") == "user"]


def calls_in_order(request: LoggedRequest) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call the request's assistant messages made: (name, arguments)."""
    out = []
    for m in wire(request):
        for c in m.get("tool_calls") or []:
            out.append((c["function"]["name"], json.loads(c["function"]["arguments"] or "{}")))
    return out


def request_chars(request: LoggedRequest) -> int:
    return len(json.dumps(wire(request)))


async def activity_types(handle) -> list[str]:
    """Activity types this run's history shows, in order (local ones included: read-only tool calls)."""
    history = await handle.fetch_history()
    return [kind for kind, _ in activities_in(history.events)]
