"""`shopfloor eval run`, end to end: the command loads a suite and starts EvalWorkflow; a real
worker runs each task's fix agent (scripted models, played by the scripted provider) and the
hidden check in the sandbox; the report lands in the data dir. The built-in suite's four tasks
each end in their own category, and the hidden tests are never where an agent could see them.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

from agent_runs import record_history
from cli_runs import invoke_cli
from eval_runs import by_task, eval_env, local_repo, swe_task
from harness_runs import wait_for, with_fake
from temporalio.api.enums.v1 import EventType
from waiting import DEADLINE_S
from worker_process import WorkerProcess, worker_env

from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.evals.suites import builtin_dir, load_suite
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.eval_run import EVAL_PROGRESS_QUERY, EvalProgress, EvalResults, ReportOutput
from shopfloor.testing import FakeModelServer, ScriptTurn


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
        progress = await temporal_client.get_workflow_handle("eval/first").query(
            EVAL_PROGRESS_QUERY, result_type=EvalProgress
        )
    assert done.returncode == 0, done
    assert (progress.done, progress.total, len(progress.outcomes)) == (4, 4, 4)  # the Temporal UI's view of it
    ended = [int(n) for n in re.findall(r"eval first: (\d)/4 agent run\(s\) ended", done.stderr)]
    assert ended and ended == sorted(ended) and len(set(ended)) == len(ended), done.stderr  # progress, each change once
    await record_history(temporal_client.get_workflow_handle("eval/first"), "eval-builtin-suite")
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

    # `compare`: a stored run against another where calc-add was not resolved.
    worse = results.model_copy(
        update={
            "run_id": "second",
            "outcomes": [
                o.model_copy(update={"category": "tests_fail", "resolved": False}) if o.instance_id == "calc-add" else o
                for o in results.outcomes
            ],
        }
    )
    (settings.data_dir / "evals/runs/second").mkdir()
    (settings.data_dir / "evals/runs/second/results.json").write_text(worse.model_dump_json())
    compared = await asyncio.to_thread(invoke_cli, ["eval", "compare", "first", "second"], eval_env(settings))
    assert compared.returncode == 0, compared
    assert compared.stdout.splitlines()[0] == "first → second: 1 task(s) changed outcome."
    assert "regressed  calc-add  [scripted:builtin]  resolved → tests_fail" in compared.stdout
    again = await asyncio.to_thread(invoke_cli, ["eval", "run", "builtin", "--run-id", "first"], eval_env(settings))
    assert again.returncode == 2 and "eval run first has results already" in again.stderr  # never overwritten
    missing = await asyncio.to_thread(invoke_cli, ["eval", "compare", "first", "nope"], eval_env(settings))
    assert missing.returncode == 2 and "no eval results at" in missing.stderr and "Traceback" not in missing.stderr

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
    runs = (settings.data_dir / "workspaces/runs").iterdir()
    checkouts = [p for p in runs if p.is_dir() and not p.name.startswith(".")]  # not a rebuild's scratch
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


# -- a SWE-bench file over local repositories, on the OpenAI wire ------------------------------

TEST_CMD = "python -m pytest -q -p no:cacheprovider"


async def test_a_swe_bench_file_over_two_local_repositories_loads_and_runs(settings, running_worker, tmp_path):
    repos = tmp_path / "repos"
    calc_base, calc_patch = local_repo(
        repos / "acme__calc",
        {
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "tests/test_ops.py": "def test_nothing():\n    pass\n",
        },
        {"tests/test_add.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
    )
    greet_base, greet_patch = local_repo(
        repos / "acme__greet",
        {
            "greet.py": "def greet(name):\n    return 'Hello ' + name\n",
            "tests/test_greet.py": "def test_nothing():\n    pass\n",
        },
        {
            "tests/test_comma.py": "from greet import greet\n\n\ndef test_comma():\n    assert greet('Ann') == 'Hello, Ann!'\n"
        },
    )
    suite = tmp_path / "swe.json"
    suite.write_text(
        json.dumps(
            [
                swe_task(
                    "acme__calc-1",
                    "acme/calc",
                    calc_base,
                    calc_patch,
                    "CALCBUG: add(2, 3) is -1",
                    "tests/test_add.py::test_add",
                    "tests/test_ops.py::test_nothing",
                ),
                swe_task(
                    "acme__greet-2",
                    "acme/greet",
                    greet_base,
                    greet_patch,
                    "GREETBUG: greet('Ann') lacks its comma",
                    "tests/test_comma.py::test_comma",
                    "tests/test_greet.py::test_nothing",
                ),
            ]
        )
    )
    script = by_task(
        {
            "CALCBUG": [
                ScriptTurn.tool("edit_file", path="calc/ops.py", old="return a - b", new="return a + b"),
                ScriptTurn.tool("run_command", command=TEST_CMD),
                ScriptTurn.tool(
                    "submit", pr_title="Fix add", pr_body="Fixes it.", summary="add adds", tests_command=TEST_CMD
                ),
            ],
            "GREETBUG": [  # a change that misses: "Hello Ann!"
                ScriptTurn.tool("edit_file", path="greet.py", old="'Hello ' + name", new="'Hello ' + name + '!'"),
                ScriptTurn.tool("run_command", command=TEST_CMD),
                ScriptTurn.tool(
                    "submit", pr_title="Fix greet", pr_body="Fixes it.", summary="greet", tests_command=TEST_CMD
                ),
            ],
        }
    )
    with FakeModelServer(script) as fake:
        async with running_worker(with_fake(settings, fake)):
            args = ["eval", "run", str(suite), "--repos", str(repos), "--model", "openai:fake-model", "--run-id", "swe"]
            done = await asyncio.to_thread(invoke_cli, args, eval_env(settings), timeout_s=300)
        assert done.returncode == 0, done
        assert {r.api for r in fake.requests} == {"openai"} and len(fake.requests) == 6
    results = EvalResults.model_validate_json((settings.data_dir / "evals/runs/swe/results.json").read_text())
    assert [(o.instance_id, o.category) for o in results.outcomes] == [
        ("acme__calc-1", "resolved"),
        ("acme__greet-2", "tests_fail"),
    ]
    assert results.suite == "swe" and results.models == ["openai:fake-model"]


async def test_a_worker_killed_mid_eval_and_another_finishes_it_without_running_a_finished_task_again(
    temporal_server, temporal_client, settings, tmp_path
):
    env = worker_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=temporal_server.address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
        SHOPFLOOR_MAX_CACHED_WORKFLOWS="0",
    )
    args = ["eval", "run", "builtin", "--run-id", "crash", "--max-steps", "8", "--concurrency", "1", "--no-wait"]
    started = await asyncio.to_thread(invoke_cli, args, eval_env(settings))
    assert started.returncode == 0, started
    handle = temporal_client.get_workflow_handle("eval/crash", result_type=ReportOutput)
    first = WorkerProcess(env, tmp_path / "worker-1.log")
    try:
        # Read from history, not by query: a query of a run no worker caches (cache 0) takes the
        # slot of the agent run, whose read in flight (a local activity) is then cut off.
        finished_before = await wait_for(lambda: _agents_done(handle), DEADLINE_S, "a first agent run to finish")
        first.kill()
    finally:
        first.stop()
    assert len(finished_before) < 4
    second = WorkerProcess(env, tmp_path / "worker-2.log")
    try:
        report = await asyncio.wait_for(handle.result(), DEADLINE_S)
    finally:
        second.stop()
    results = EvalResults.model_validate_json(Path(report.results).read_text())
    assert len(results.outcomes) == 4 and {o.category for o in results.outcomes} == {
        "resolved",
        "tests_fail",
        "limit_reached",
        "no_patch",
    }
    # A finished task's agent run and check ran once: one execution of its child, one check.
    checks: dict[str, int] = {}
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            summary = e.user_metadata.summary.data.decode()
            if "the hidden tests" in summary:
                task = summary.strip('"').split(":")[0]
                checks[task] = checks.get(task, 0) + 1
    for task in finished_before:
        runs = [w async for w in temporal_client.list_workflows(f"WorkflowId = 'eval/crash/{task}/scripted-builtin'")]
        assert len(runs) == 1, task
        assert checks.get(task, 0) <= 1, checks
    assert await first_worker_did(tmp_path / "worker-1.log") and finished_before


async def _agents_done(handle) -> set[str]:
    """The tasks whose agent run has finished, from the eval run's history."""
    done = set()
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            done.add(e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id.split("/")[2])
    return done


async def first_worker_did(log: Path) -> bool:
    """The first worker ran model steps before it was killed (so the second one took over)."""
    return "model step" in log.read_text()


async def test_a_call_that_waits_for_an_operator_is_refused_after_the_approval_timeout_and_the_agent_goes_on(
    settings, running_worker, temporal_client, tmp_path
):
    (task,) = [t for t in load_suite("builtin", tmp_path / "built").tasks if t.instance_id == "calc-add"]
    suite = tmp_path / "one.json"
    suite.write_text(json.dumps([task.model_dump(by_alias=True)]))
    cassettes = tmp_path / "asks"
    cassettes.mkdir()
    builtin = json.loads((builtin_dir() / "scripted" / "calc-add.json").read_text())
    install = {"tool_calls": [{"name": "run_command", "arguments": {"command": "pip install requests"}}]}
    builtin["turns"] = [install, *builtin["turns"]]
    (cassettes / "calc-add.json").write_text(json.dumps(builtin))
    args = [
        "eval",
        "run",
        str(suite),
        "--model",
        f"scripted:{cassettes}",
        "--run-id",
        "asks",
        "--approval-timeout",
        "1",
    ]
    async with running_worker(settings):
        done = await asyncio.to_thread(invoke_cli, args, eval_env(settings), timeout_s=300)
    assert done.returncode == 0, done
    (outcome,) = EvalResults.model_validate_json(
        (settings.data_dir / "evals/runs/asks/results.json").read_text()
    ).outcomes
    assert (outcome.category, outcome.steps) == ("resolved", 5) and outcome.wall_s < 60
    run = await temporal_client.get_workflow_handle(outcome.agent_run_id, result_type=AgentResult).result()
    assert run.state == "completed"
    history = [e async for e in temporal_client.get_workflow_handle(outcome.agent_run_id).fetch_history_events()]
    timers = [e for e in history if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert len(timers) == 1  # the approval's wait ran out, once
