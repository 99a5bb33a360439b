"""The factory's end-to-end rig, shared by tests/e2e/test_factory_issue.py and
tests/e2e/test_factory_alert.py: a sample repository on the GitHub simulator (with CI), the real
webhook edge served in a thread and subscribed to the repository's webhooks, and a worker whose
triage/fix/review agents replay per-agent scripted cassettes.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_runs import call, write_cassette
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.client import Client, WorkflowHandle
from threaded_server import serving
from waiting import DEADLINE_S, query_until
from worker_process import worker_env_for

from shopfloor.blobs import FileBlobStore
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.settings import Settings
from shopfloor.webhooks.app import create_app

SECRET = "factory-edge-secret"
TEST_CMD = "python -m pytest -q"
# The simulator's CI for the sample repository. Its tests pass exactly when add() adds, and no
# test here breaks mul(), so CI checks that one line instead of starting Python and pytest on
# every push: the same green/red, in milliseconds. (tests/simulator/test_ci.py runs real pytest
# where CI's output is the subject.)
CI_CMD = "grep -q 'return a + b' calc/ops.py"
SAMPLE_NO_PLUGINS = (
    "-p no:schemathesis -p no:hypothesispytest -p no:anyio -p no:asyncio -p no:xdist -p no:xdist.looponfail"
)
POLICY = f"auto_fix: always\nrequire_human_approval: true\ntest_command: {TEST_CMD}\nci_timeout_minutes: 10\n"

TRIAGE = {
    "kind": "bug",
    "severity": "medium",
    "labels": ["bug"],
    "summary": "calc.add subtracts instead of adding.",
    "plan": "In calc/ops.py, add() returns a - b; make it a + b. tests/test_ops.py covers it.",
    "fixability": 0.9,
    "fixability_reasons": ["one line", "a failing test shows it"],
}
FIX = {
    "pr_title": "Fix add() returning the difference",
    "pr_body": "add() subtracted its arguments; it now adds them.",
    "summary": "calc/ops.py: add() used - instead of +.",
    "tests_command": TEST_CMD,
}
GOOD_EDIT = {"path": "calc/ops.py", "old": "return a - b", "new": "return a + b"}
APPROVE = {"verdict": "approve", "summary": "The one-line fix matches the issue and CI is green."}


def unpriced_model(
    base_url: str, model: str | None = "openai:local-llm", max_tokens: int | None = 1_000_000
) -> dict[str, Any]:
    """Worker settings for a model on a fake server (its base URL) that has no price, so a token
    limit holds it instead of a cost limit (max_tokens None: none, and it does not start).
    `model` None: the settings name no default model (the test gives each agent its own)."""
    chosen = {} if model is None else {"model": model}
    limit = {} if max_tokens is None else {"max_tokens_unpriced": max_tokens}
    return {**chosen, "openai_base_url": base_url, "openai_api_key": SecretStr("sk-local-not-a-secret"), **limit}


def sample_repo(root: Path, policy: str = POLICY) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_ops.py").write_text(
        "from calc.ops import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    )
    # The agents' test runs use this venv's pytest, which would load every plugin installed for
    # shopfloor's own suite (schemathesis and hypothesis alone take ~2 s of CPU a run); the
    # sample's tests need none of them.
    (root / "pytest.ini").write_text(f"[pytest]\naddopts = -p no:cacheprovider {SAMPLE_NO_PLUGINS}\n")
    (root / ".github").mkdir()
    (root / ".github" / "shopfloor.yml").write_text(policy)
    return root


@dataclass
class Factory:
    sim: SimulatorHandle
    client: Client
    repo: str
    handle: WorkflowHandle | None = None
    edge_url: str = ""

    def gh(self, login: str | None = None):
        return self.sim.api(login)

    def open_issue(self, title: str, body: str, login: str = "bob") -> int:
        resp = self.gh(login).post(f"/repos/{self.repo}/issues", json={"title": title, "body": body})
        assert resp.status_code == 201, resp.text
        number = resp.json()["number"]
        self.handle = self.client.get_workflow_handle(issue_workflow_id(self.repo, number))
        return number

    def comment(self, number: int, body: str, login: str) -> None:
        resp = self.gh(login).post(f"/repos/{self.repo}/issues/{number}/comments", json={"body": body})
        assert resp.status_code == 201, resp.text

    def get(self, path: str, **params: Any) -> Any:
        resp = self.gh().get(f"/repos/{self.repo}{path}", params=params)
        resp.raise_for_status()
        return resp.json()

    def file(self, path: str, ref: str = "main") -> str:
        return base64.b64decode(self.get(f"/contents/{path}", ref=ref)["content"]).decode()

    async def state_when(self, ok, what: str, timeout_s: float = DEADLINE_S) -> FactoryState:
        assert self.handle is not None
        return await query_until(self.handle, "factory", FactoryState, ok, what, timeout_s)

    def progress(self, number: int) -> str:
        """The one progress comment's body."""
        comments = self.progress_comments(number)
        assert len(comments) == 1, comments
        return comments[0]["body"]

    async def progress_when(self, number: int, text: str, timeout_s: float = 60) -> str:
        """The progress comment once it holds `text` (the `factory` query runs ahead of its upsert,
        and a run that parks before its first stage has no comment until that upsert lands)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            comments = self.progress_comments(number)
            assert len(comments) <= 1, comments  # never two progress comments
            body = comments[0]["body"] if comments else ""
            if text in body:
                return body
            assert asyncio.get_running_loop().time() < deadline, f"the progress comment never said {text!r}: {body}"
            await asyncio.sleep(0.3)

    def progress_comments(self, number: int) -> list[dict[str, Any]]:
        return [
            c
            for c in self.get(f"/issues/{number}/comments")
            if "<!-- shopfloor:" in c["body"] and ":progress -->" in c["body"]
        ]


def on_simulator(settings: Settings, simulator: SimulatorHandle) -> Settings:
    """`settings` with the simulator as GitHub, the bot's token, and the edge's webhook secret."""
    return settings.model_copy(
        update={
            "github_api_url": simulator.api_url,
            "github_token": SecretStr(BOT_TOKEN),
            "webhook_secret": SecretStr(SECRET),
        }
    )


def factory_worker_env(
    temporal_server: Any, settings: Settings, fake: Any, simulator: SimulatorHandle, **overrides: str
) -> dict[str, str]:
    """A factory worker process's environment (tests that kill workers run them as processes):
    the test's server, queue, data dir and sandbox, `fake` as the model, the simulator as GitHub."""
    return worker_env_for(
        temporal_server,
        settings,
        fake,
        SHOPFLOOR_SANDBOX=settings.sandbox,
        SHOPFLOOR_GITHUB_API_URL=simulator.api_url,
        SHOPFLOOR_GITHUB_TOKEN=BOT_TOKEN,
        **overrides,
    )


@asynccontextmanager
async def factory(
    simulator: SimulatorHandle,
    settings: Settings,
    running_worker,
    client: Client,
    tmp_path: Path,
    models: dict[str, list[dict[str, Any]]],
    policy: str = POLICY,
    *,
    name: str | None = None,
    source_dir: Path | None = None,
    ci_command: str = CI_CMD,
    ci_on_default_branch: bool = False,
    **extra_settings: Any,
) -> AsyncIterator[Factory]:
    """The repository is `acme/<name>` (default: a fresh one) holding `source_dir` (default: the
    sample, with `policy`), its CI `ci_command` (on pull request heads, and with
    `ci_on_default_branch` on pushes to main too); `extra_settings` update the worker's and the
    edge's settings (alert token and routes...)."""
    owner, name = "acme", name or f"calc{uuid.uuid4().hex[:6]}"
    repo = f"{owner}/{name}"
    source = source_dir or sample_repo(tmp_path / "src", policy)
    simulator.create_repo(
        owner, name, source_dir=source, ci_command=ci_command, ci_on_default_branch=ci_on_default_branch
    )
    simulator.set_permission(owner, name, "maria", "maintain")
    agent_models = {agent: write_cassette(tmp_path / f"{agent}.json", turns) for agent, turns in models.items()}
    worker_settings = on_simulator(settings, simulator).model_copy(
        update={"agent_models": agent_models, **extra_settings}
    )
    with edge_subscribed(simulator, repo, client, worker_settings) as edge_url:
        async with running_worker(worker_settings):
            yield Factory(simulator, client, repo, edge_url=edge_url)


@contextmanager
def edge_subscribed(simulator: SimulatorHandle, repo: str, client: Client, edge_settings: Settings) -> Iterator[str]:
    """The webhook edge serving `edge_settings` (its secret, its data dir's blob store, where the
    workers read snapshots), with a hook on `repo` delivering every event to it. Yields its URL."""
    assert edge_settings.webhook_secret is not None, "the edge needs a webhook secret"
    blobs = FileBlobStore(edge_settings.data_dir / "blobs")

    async def get_client() -> Client:
        return client

    with serving(create_app(get_client, edge_settings, blobs), name="edge") as edge_url:
        secret = edge_settings.webhook_secret.get_secret_value()
        hook = simulator.api(repo.split("/")[0]).post(
            f"/repos/{repo}/hooks",
            json={
                "config": {"url": f"{edge_url}/webhooks/github", "secret": secret, "content_type": "json"},
                "events": ["*"],
                "active": True,
            },
        )
        assert hook.status_code == 201, hook.text
        yield edge_url


def fix_turns(edit: dict[str, str] = GOOD_EDIT, **fix: Any) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [call("read_file", path="calc/ops.py")]},
        {"tool_calls": [call("edit_file", **edit)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **{**FIX, **fix})]},
    ]


TRIAGE_TURNS = [{"tool_calls": [call("read_file", path="calc/ops.py")]}, {"tool_calls": [call("submit", **TRIAGE)]}]

# The AlertWorkflow's assessing agent (`assess_alert`): the alert is a bug in calc/ops.py.
ASSESS = {
    "actionable": True,
    "severity": "high",
    "title": "add() returns the difference of its arguments",
    "reason": "calc/ops.py add() returns a - b; the alert's assertion add(2, 3) == -1 is exactly that.",
    "suspected_area": "calc/ops.py: add()",
}


def assess_turns(path: str = "calc/ops.py", reads: int = 1, **verdict: Any) -> list[dict[str, Any]]:
    """The assessing agent's cassette: read `path` `reads` times (distinct calls, so no doom-loop
    warning), then submit ASSESS updated by `verdict`."""
    read = [{"tool_calls": [call("read_file", path=path, limit=400 - i)]} for i in range(reads)]
    return [*read, {"tool_calls": [call("submit", **{**ASSESS, **verdict})]}]


async def approve_and_finish(f: Factory, number: int) -> IssueOutcome:
    await f.state_when(lambda s: s.waiting_for == "approval", "the merge stage to wait for approval")
    f.comment(number, "/shopfloor approve", "maria")
    return IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=DEADLINE_S))


def assert_merged(
    f: Factory, number: int, outcome: IssueOutcome, *, reviews: int = 1, label: str = "bug"
) -> dict[str, Any]:
    assert outcome.state == "done", outcome
    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    issue = f.get(f"/issues/{number}")
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert label in [x["name"] for x in issue["labels"]]
    prs = f.get("/pulls", state="all")
    assert len(prs) == 1, prs
    pr = f.get(f"/pulls/{prs[0]['number']}")
    assert pr["merged"] and pr["head"]["ref"] == f"shopfloor/issue-{number}"
    assert f"Fixes #{number}" in pr["body"]
    assert "return a + b" in f.file("calc/ops.py")
    got = f.get(f"/pulls/{pr['number']}/reviews")
    assert len(got) == reviews and all(r["state"] == "COMMENTED" for r in got), got
    progress = f.progress_comments(number)
    assert len(progress) == 1, progress
    assert "Final state: merged." in progress[0]["body"]
    branches = [b["name"] for b in f.get("/branches")]
    assert f"shopfloor/issue-{number}" not in branches
    return pr
