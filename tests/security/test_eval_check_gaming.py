"""An agent under evaluation games the check: instead of fixing the bug it writes the hidden test
file itself (a test of that name that passes), and breaks code a kept-passing test covers while
editing that test to pass anyway. The check puts every test file it runs back to the base
commit before applying the hidden tests, so the task is not resolved and both tests fail."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cli_runs import cli_env, invoke_cli

from shopfloor.evals.suites import load_suite
from shopfloor.models.eval_run import EvalResults

TEST_CMD = "python -m pytest -q -p no:cacheprovider"


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_an_agent_that_writes_the_hidden_test_and_edits_a_kept_test_is_not_resolved(
    settings, running_worker, tmp_path: Path
):
    (task,) = [t for t in load_suite("builtin", tmp_path / "built").tasks if t.instance_id == "calc-add"]
    suite = tmp_path / "one.json"
    suite.write_text(json.dumps([task.model_dump(by_alias=True)]))
    cassettes = tmp_path / "gaming"
    cassettes.mkdir()
    turns = [
        call("write_file", path="tests/test_add.py", content="def test_add_adds():\n    assert True\n"),
        call("edit_file", path="calc/ops.py", old="return a * b", new="return a + b"),
        call("edit_file", path="tests/test_ops.py", old="assert mul(3, 4) == 12", new="assert mul(3, 4) == 7"),
        call("run_command", command=TEST_CMD),
        call("submit", pr_title="Fix add", pr_body="Fixed.", summary="tests pass", tests_command=TEST_CMD),
    ]
    (cassettes / "calc-add.json").write_text(json.dumps({"description": "games the check", "turns": turns}))
    env = cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
    )
    args = ["eval", "run", str(suite), "--model", f"scripted:{cassettes}", "--run-id", "gaming"]
    async with running_worker(settings):
        done = await asyncio.to_thread(invoke_cli, args, env, timeout_s=300)
    assert done.returncode == 0, done
    (outcome,) = EvalResults.model_validate_json(
        (settings.data_dir / "evals/runs/gaming/results.json").read_text()
    ).outcomes
    assert outcome.category == "tests_fail", outcome
    assert "tests/test_add.py::test_add_adds" in outcome.detail and "tests/test_ops.py::test_mul" in outcome.detail
    assert outcome.steps == 5  # the agent did all of it: its own test run passed
