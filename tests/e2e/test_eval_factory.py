"""`shopfloor eval run --agents factory`, end to end: the task becomes its own repository on the
GitHub simulator (CI running the task's tests) with its issue; the real IssueWorkflow triages,
fixes, opens the pull request, waits for CI and reviews with the model under evaluation (a fake
OpenAI server); the eval takes the pull request's head where the run waits for a merge approval,
runs the hidden tests on it, and stops the run unmerged.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

from agent_runs import record_history
from cli_runs import invoke_cli
from eval_runs import eval_env, local_repo, swe_task
from harness_runs import with_fake
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.eval_factory import EvalFactoryActivities
from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import put_json
from shopfloor.evals.suites import load_suite
from shopfloor.models.eval_run import EvalResults, PublishInput
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.testing import FakeModelServer, ScriptTurn

TEST_CMD = "python -m pytest -q -p no:cacheprovider"
NO_PLUGINS = "-p no:schemathesis -p no:hypothesispytest -p no:anyio -p no:asyncio -p no:xdist -p no:xdist.looponfail"
HIDDEN = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TRIAGE = {
    "kind": "bug",
    "severity": "medium",
    "labels": ["bug"],
    "summary": "add subtracts.",
    "plan": "calc/ops.py: return a + b.",
    "fixability": 0.9,
    "fixability_reasons": ["one line"],
}
FIX = [
    ScriptTurn.tool("edit_file", path="calc/ops.py", old="return a - b", new="return a + b"),
    ScriptTurn.tool("run_command", command=TEST_CMD),
    ScriptTurn.tool("submit", pr_title="Fix add", pr_body="add() adds.", summary="add adds", tests_command=TEST_CMD),
]
SCRIPTS = {
    "triage": [ScriptTurn.tool("submit", **TRIAGE)],
    "fix": FIX,
    "review": [ScriptTurn.tool("submit", verdict="approve", summary="Matches the issue; CI is green.")],
}


def by_agent(index: int, body: dict) -> ScriptTurn:
    """Each factory agent's script, told apart by its system prompt ("You are `fix`, ...")."""
    system = json.dumps(body["messages"][0])
    (agent,) = [a for a in SCRIPTS if f"You are `{a}`" in system]
    return SCRIPTS[agent][sum(m["role"] == "assistant" for m in body["messages"])]


async def test_the_factory_fixes_a_task_on_the_simulator_and_stops_before_the_merge(
    simulator, settings, running_worker, temporal_client, blobs, tmp_path
):
    repos = tmp_path / "repos"
    base, patch = local_repo(
        repos / "acme__calc",
        {
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "tests/test_ops.py": "def test_nothing():\n    pass\n",
            "pytest.ini": f"[pytest]\naddopts = {NO_PLUGINS}\n",
        },
        {"tests/test_add.py": HIDDEN},
    )
    suite = tmp_path / "swe.json"
    task = swe_task("acme__calc-1", "acme/calc", base, patch, "add(2, 3) is -1", "tests/test_add.py::test_add", "")
    task["PASS_TO_PASS"] = json.dumps(["tests/test_ops.py::test_nothing"])
    task["test_command"] = TEST_CMD
    suite.write_text(json.dumps([task]))
    with FakeModelServer(by_agent) as fake:
        worker = with_fake(settings, fake).model_copy(
            update={
                "github_api_url": simulator.api_url,
                "github_token": SecretStr(BOT_TOKEN),
                "repo_models": ["openai:fake-model"],  # the operator lets repositories choose it
                "max_tokens_unpriced": 1_000_000,  # it has no price: a token limit holds the factory's agents
            }
        )
        async with running_worker(worker):
            args = [
                "eval", "run", str(suite), "--repos", str(repos), "--agents", "factory", "--run-id", "fac",
                "--model", "openai:fake-model", "--model", "openai:not-allowed",
            ]  # fmt: skip
            done = await asyncio.to_thread(invoke_cli, args, eval_env(settings), timeout_s=600)
            assert done.returncode == 0, done
            results = EvalResults.model_validate_json((settings.data_dir / "evals/runs/fac/results.json").read_text())
            outcome = {o.model: o for o in results.outcomes}
            ran = outcome["openai:fake-model"]
            # The run the eval stopped: cancelled where it waited for the merge approval, never merged.
            handle = temporal_client.get_workflow_handle(ran.factory_run_id, result_type=IssueOutcome)
            issue_run = await asyncio.wait_for(handle.result(), 120)
            described = await handle.describe()
            await record_history(temporal_client.get_workflow_handle("eval/fac"), "eval-factory")
            # A publish retried after its answer was lost finds the same repository, issue and run.
            (loaded,) = load_suite(str(suite), tmp_path / "again", repos).tasks
            again = PublishInput(
                task_digest=await put_json(blobs, loaded.model_dump(by_alias=True)),
                eval_run="fac",
                model="openai:fake-model",
                max_steps=30,
                approval_timeout_s=60,
            )
            workspaces = Workspaces(tmp_path / "retry-workspaces", blobs)
            retried = await ActivityEnvironment().run(
                EvalFactoryActivities(temporal_client, worker, blobs, workspaces).eval_publish, again
            )
    assert (ran.category, ran.resolved) == ("resolved", True), ran
    assert "1 failing test(s) now pass on PR #" in ran.detail
    assert ran.steps == 5 and ran.tokens > 0 and ran.agent_run_id == f"{ran.factory_run_id}/fix-1"
    assert ran.factory_run_id.startswith("issue/shopfloor-eval/fac--acme__calc-1--openai-fake-model-")
    report = (settings.data_dir / "evals/runs/fac/report.md").read_text()
    assert f"| acme__calc-1 | `openai:fake-model` | `{ran.factory_run_id}` | {ran.pr_url} |" in report
    # Every agent of the factory ran on the model under evaluation, over its wire.
    agents = {a for r in fake.requests for a in SCRIPTS if f"You are `{a}`" in json.dumps(r.body["messages"][0])}
    assert agents == {"triage", "fix", "review"} and {r.api for r in fake.requests} == {"openai"}
    assert described.status == WorkflowExecutionStatus.COMPLETED
    assert issue_run.factory is not None and issue_run.factory.result == "cancelled", issue_run
    assert issue_run.factory.stage != "done" and issue_run.factory.merged_sha is None
    repo = ran.factory_run_id.removeprefix("issue/").rsplit("/", 1)[0]
    assert (retried.repo, retried.workflow_id) == (repo, ran.factory_run_id)
    gh = simulator.api()
    assert [
        i["number"] for i in gh.get(f"/repos/{repo}/issues", params={"state": "all"}).json() if "pull_request" not in i
    ] == [retried.number]
    pulls = gh.get(f"/repos/{repo}/pulls", params={"state": "all"}).json()
    assert [(p["number"], p["merged_at"]) for p in pulls] == [(int(ran.pr_url.rsplit("/", 1)[1]), None)]
    checks = gh.get(f"/repos/{repo}/commits/{pulls[0]['head']['sha']}/check-runs").json()["check_runs"]
    assert [c["conclusion"] for c in checks] == ["success"]  # CI ran the task's tests on the PR
    main = gh.get(f"/repos/{repo}/branches/main").json()["commit"]["sha"]
    assert pulls[0]["base"]["sha"] == main  # nothing merged
    # The model the operator does not let repositories choose: refused, in words, before any run.
    refused = outcome["openai:not-allowed"]
    assert refused.category == "harness_error" and "SHOPFLOOR_REPO_MODELS" in refused.detail, refused
    assert refused.factory_run_id == "" and refused.steps == 0
    # The hidden test is nowhere the factory could see it: not in any model request, not in git.
    assert all(HIDDEN not in r.raw.decode() and "test_add.py" not in r.raw.decode() for r in fake.requests)
    git_dir = simulator.data_dir / "repos" / repo.split("/")[0] / f"{repo.split('/')[1]}.git"
    names = subprocess.run(
        ["git", "--git-dir", str(git_dir), "log", "--all", "--name-only", "--format="],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "calc/ops.py" in names and "tests/test_add.py" not in names
