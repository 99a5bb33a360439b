"""The factory end to end (issue 6): people act on the GitHub simulator, its signed webhooks reach
the real webhook edge, the edge signal-with-starts IssueWorkflow, and a worker with scripted
models triages, fixes, opens the PR, waits for the simulator's CI, reviews and merges.

Each test asserts the final GitHub state (issue, labels, the one PR, its reviews, comments, the
merge on main, exactly one progress comment in its final state) and the workflow's outcome.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_runs import call, record_history, write_cassette
from pydantic import SecretStr
from simulator_runs import SimulatorHandle
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from threaded_server import serving

from shopfloor.blobs import FileBlobStore
from shopfloor.models.factory import IssueOutcome
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.settings import Settings
from shopfloor.webhooks.app import create_app

SECRET = "factory-edge-secret"
TEST_CMD = "python -m pytest -q"
POLICY = f"auto_fix: always\nrequire_human_approval: true\ntest_command: {TEST_CMD}\nci_timeout_minutes: 10\n"

TRIAGE = {
    "kind": "bug", "severity": "medium", "labels": ["bug"],
    "summary": "calc.add subtracts instead of adding.",
    "plan": "In calc/ops.py, add() returns a - b; make it a + b. tests/test_ops.py covers it.",
    "fixability": 0.9, "fixability_reasons": ["one line", "a failing test shows it"],
}  # fmt: skip
FIX = {
    "pr_title": "Fix add() returning the difference",
    "pr_body": "add() subtracted its arguments; it now adds them.",
    "summary": "calc/ops.py: add() used - instead of +.",
    "tests_command": TEST_CMD,
}
GOOD_EDIT = {"path": "calc/ops.py", "old": "return a - b", "new": "return a + b"}
APPROVE = {"verdict": "approve", "summary": "The one-line fix matches the issue and CI is green."}


def sample_repo(root: Path, policy: str = POLICY) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_ops.py").write_text(
        "from calc.ops import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    )
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (root / ".github").mkdir()
    (root / ".github" / "shopfloor.yml").write_text(policy)
    return root


@dataclass
class Factory:
    sim: SimulatorHandle
    client: Client
    repo: str
    handle: WorkflowHandle | None = None

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

    async def state_when(self, ok, what: str, timeout_s: float = 80) -> FactoryState:
        deadline = asyncio.get_running_loop().time() + timeout_s
        last = None
        while True:
            try:
                last = await self.handle.query("factory", result_type=FactoryState)
                if ok(last):
                    return last
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}; last: {last}"
            await asyncio.sleep(0.3)

    def progress_comments(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.get(f"/issues/{number}/comments")
                if "<!-- shopfloor:" in c["body"] and ":progress -->" in c["body"]]  # fmt: skip


@asynccontextmanager
async def factory(simulator: SimulatorHandle, settings: Settings, running_worker, client: Client, tmp_path: Path,
                  models: dict[str, list[dict[str, Any]]], policy: str = POLICY) -> AsyncIterator[Factory]:  # fmt: skip
    owner, name = "acme", f"calc{uuid.uuid4().hex[:6]}"
    repo = f"{owner}/{name}"
    simulator.create_repo(owner, name, source_dir=sample_repo(tmp_path / "src", policy), ci_command=TEST_CMD)
    simulator.set_permission(owner, name, "maria", "maintain")
    agent_models = {agent: write_cassette(tmp_path / f"{agent}.json", turns) for agent, turns in models.items()}
    worker_settings = settings.model_copy(update={
        "github_api_url": simulator.api_url, "github_token": SecretStr("bot-token"),
        "webhook_secret": SecretStr(SECRET), "agent_models": agent_models,
    })  # fmt: skip
    blobs = FileBlobStore(worker_settings.data_dir / "blobs")

    async def get_client() -> Client:
        return client

    with serving(create_app(get_client, worker_settings, blobs), name="edge") as edge_url:
        hook = simulator.api(owner).post(f"/repos/{repo}/hooks", json={
            "config": {"url": f"{edge_url}/webhooks/github", "secret": SECRET, "content_type": "json"},
            "events": ["*"], "active": True,
        })  # fmt: skip
        assert hook.status_code == 201, hook.text
        async with running_worker(worker_settings):
            yield Factory(simulator, client, repo)


def fix_turns(edit: dict[str, str] = GOOD_EDIT, **fix: Any) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [call("read_file", path="calc/ops.py")]},
        {"tool_calls": [call("edit_file", **edit)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **{**FIX, **fix})]},
    ]


TRIAGE_TURNS = [{"tool_calls": [call("read_file", path="calc/ops.py")]}, {"tool_calls": [call("submit", **TRIAGE)]}]


async def approve_and_finish(f: Factory, number: int) -> IssueOutcome:
    await f.state_when(lambda s: s.waiting_for == "approval", "the merge stage to wait for approval")
    f.comment(number, "/shopfloor approve", "maria")
    return IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=60))


def assert_merged(f: Factory, number: int, outcome: IssueOutcome, *, reviews: int = 1, label: str = "bug") -> dict[str, Any]:
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


async def test_bug_issue_becomes_a_merged_fix(simulator, settings, running_worker, temporal_client, tmp_path):
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        await record_history(f.handle, "issue-factory-merged")
    pr = assert_merged(f, number, outcome)
    assert outcome.factory.fix_round == 1 and outcome.factory.review_round == 1
    assert outcome.factory.approved_heads == [pr["head"]["sha"]]
    assert outcome.factory.children == [f"{f.handle.id}/triage", f"{f.handle.id}/fix-1", f"{f.handle.id}/review-1"]


async def test_ci_fails_on_the_first_push_then_a_second_round_is_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    wrong = {"path": "calc/ops.py", "old": "return a - b", "new": "return b - a"}  # still wrong
    fix = [
        *fix_turns(wrong),  # round 1: CI fails
        {"tool_calls": [call("edit_file", path="calc/ops.py", old="return b - a", new="return a + b")]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    # One cassette serves both fix rounds: round 2 continues where round 1's turns end.
    models["fix-2"] = fix[4:]
    models["fix"] = fix[:4]
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
    pr = assert_merged(f, number, outcome)
    assert outcome.factory.fix_round == 2 and outcome.factory.review_round == 1
    runs = f.get(f"/commits/{pr['head']['sha']}/check-runs")["check_runs"]
    assert [(r["name"], r["conclusion"]) for r in runs] == [("ci", "success")]


async def test_review_requests_changes_once_then_round_two_is_merged(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    changes = {"verdict": "request_changes", "summary": "Please also cover negative numbers in the tests.",
               "comments": [{"path": "calc/ops.py", "line": 2, "body": "Fine, but add a test."}]}  # fmt: skip
    add_test = {"path": "tests/test_ops.py", "old": "assert add(2, 3) == 5", "new": "assert add(2, 3) == 5\n    assert add(-1, -1) == -2"}
    models = {
        "triage": TRIAGE_TURNS,
        "fix": fix_turns(),
        "fix-2": [{"tool_calls": [call("edit_file", **add_test)]}, {"tool_calls": [call("run_command", command=TEST_CMD)]},
                  {"tool_calls": [call("submit", **FIX)]}],  # fmt: skip
        "review": [{"tool_calls": [call("submit", **changes)]}],
        "review-2": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome, reviews=2)
    assert outcome.factory.fix_round == 2 and outcome.factory.review_round == 2
    assert "add(-1, -1) == -2" in f.file("tests/test_ops.py")
    bodies = [r["body"] for r in f.get(f"/pulls/{f.get('/pulls', state='all')[0]['number']}/reviews")]
    assert "request changes" in bodies[0] and "approve" in bodies[1]


async def test_steps_run_out_mid_fix_salvages_a_draft_pr(simulator, settings, running_worker, temporal_client, tmp_path):
    policy = POLICY + "budgets:\n  max_steps:\n    fix: 2\n"
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns()}  # step 3 (the tests) never comes
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, policy) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.result != "", "the run to end")
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), timeout=30))
    assert outcome.state == "done" and outcome.factory.result == "salvaged", outcome
    prs = f.get("/pulls", state="all")
    assert len(prs) == 1 and prs[0]["draft"] is True and prs[0]["state"] == "open", prs
    assert "Salvaged by shopfloor" in prs[0]["body"] and "limit_reached" in prs[0]["body"]
    assert "return a + b" in f.file("calc/ops.py", ref=f"shopfloor/issue-{number}")
    assert "return a - b" in f.file("calc/ops.py")  # main untouched
    progress = f.progress_comments(number)
    assert len(progress) == 1 and "Final state: salvaged" in progress[0]["body"], progress
    assert f.get(f"/issues/{number}")["state"] == "open"


async def test_low_fixability_feature_is_parked_until_a_maintainer_asks(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    feature = {**TRIAGE, "kind": "feature", "labels": ["enhancement"], "fixability": 0.3}
    models = {
        "triage": [{"tool_calls": [call("submit", **feature)]}],
        "fix": fix_turns(),
        "review": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        number = f.open_issue("Make add() add", "It would be nice if add() added.")
        parked = await f.state_when(lambda s: s.result == "parked", "the policy gate to park the run")
        assert parked.waiting_for == "fix_command" and "below the threshold" in parked.reason
        progress = f.progress_comments(number)
        assert len(progress) == 1 and "waiting for a human" in progress[0]["body"]
        labels = [label["name"] for label in f.get(f"/issues/{number}")["labels"]]
        assert "enhancement" in labels
        f.comment(number, "/shopfloor fix", "bob")  # a non-member: refused with one reply
        await asyncio.sleep(2)
        assert (await f.handle.query("factory", result_type=FactoryState)).result == "parked"
        f.comment(number, "/shopfloor fix", "maria")
        outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome, label="enhancement")
    refusals = [c for c in f.get(f"/issues/{number}/comments") if "needs write access" in c["body"]]
    assert len(refusals) == 1 and "@bob" in refusals[0]["body"]
    assert outcome.commands_refused == 1
