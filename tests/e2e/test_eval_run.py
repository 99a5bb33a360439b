"""`shopfloor eval run`, end to end: the command loads a suite and starts EvalWorkflow; a real
worker runs each task's fix agent (scripted models, played by the scripted provider) and the
hidden check in the sandbox; the report lands in the data dir. The built-in suite's four tasks
each end in their own category, and the hidden tests are never where an agent could see them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

from cli_runs import cli_env, invoke_cli

from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.evals.suites import builtin_dir
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.eval_run import EvalResults


def eval_env(settings) -> dict[str, str]:
    return cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
    )


def hidden_texts() -> dict[str, str]:
    """Each built-in task's hidden test file names and bodies (what no agent may see)."""
    found = {}
    for path in builtin_dir().glob("*/hidden/**/*.py"):
        found[path.name] = path.read_text()
    assert len(found) == 4
    return found


async def test_the_builtin_suite_reports_each_task_in_its_category_and_hides_its_tests(
    settings, running_worker, temporal_client, blobs
):
    async with running_worker(settings):
        done = await asyncio.to_thread(
            invoke_cli,
            ["eval", "run", "builtin", "--run-id", "first", "--max-steps", "8", "--concurrency", "4"],
            eval_env(settings),
            timeout_s=300,
        )
    assert done.returncode == 0, done
    results = EvalResults.model_validate_json((settings.data_dir / "evals/runs/first/results.json").read_text())
    by_task = {o.instance_id: o for o in results.outcomes}
    assert {k: o.category for k, o in by_task.items()} == {
        "calc-add": "resolved",
        "wrap-width": "tests_fail",
        "leap-year": "limit_reached",
        "slug-dashes": "no_patch",
    }
    assert "tests/test_wrap_width.py::test_no_line_is_longer_than_the_width" in by_task["wrap-width"].detail
    assert by_task["leap-year"].steps == 8 and by_task["calc-add"].steps == 4
    assert all(o.tokens > 0 and o.model == "scripted:builtin" for o in results.outcomes)
    report = (settings.data_dir / "evals/runs/first/report.md").read_text()
    assert "| `scripted:builtin` | 1/4 | 25% (" in report  # resolve rate and its interval
    assert "| calc-add | `scripted:builtin` | resolved |" in report
    assert (settings.data_dir / "evals/runs/first/plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "1/4" in done.stdout  # the command prints the report

    # The hidden tests: in no agent's transcript, and not in the repository the agents cloned.
    hidden = hidden_texts()
    store = TranscriptStore(blobs)
    for o in results.outcomes:
        run = await temporal_client.get_workflow_handle(o.agent_run_id, result_type=AgentResult).result()
        manifest = await store.manifest(run.transcript)
        assert len(manifest.messages) > 2
        transcript = json.dumps([(await store.load(m)).model_dump(mode="json") for m in manifest.messages])
        for name, body in hidden.items():
            assert name not in transcript and body not in transcript, (o.instance_id, name)
    checkouts = [p for p in (settings.data_dir / "workspaces/runs").iterdir() if p.is_dir()]
    assert len(checkouts) >= 4  # each agent's (the checks' own are removed once done)
    for checkout in checkouts:
        files = {p.name for p in checkout.rglob("*.py")}
        assert files and not files & hidden.keys(), checkout
    for git_dir in (settings.data_dir / "evals/repos").glob("*.git"):
        objects = subprocess.run(
            ["git", "--git-dir", str(git_dir), "log", "--all", "--name-only", "--format="],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert objects.strip() and not any(name in objects for name in hidden), git_dir
