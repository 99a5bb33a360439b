"""`shopfloor eval`: measure the fix agent (or the whole factory, on the GitHub simulator) on a
task suite with one or more models, and compare stored runs.

`run` loads the suite here (a SWE-bench-format file over local repositories, or `builtin`),
stores each task in the blob store the workers read, and starts EvalWorkflow `eval/<run id>` on
the task queue the workers poll (`shopfloor dev` or `shopfloor worker`); it waits for the report
unless told not to. `compare` reads two runs' results.json.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import typer
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings


async def agent_runs_ended(handle: WorkflowHandle[Any, Any]) -> int:
    """How many of an eval run's agent runs have ended, read from its history."""
    ended = (
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
    )
    return len([e async for e in handle.fetch_history_events() if e.event_type in ended])


def register(app: typer.Typer) -> None:
    eval_app = typer.Typer(
        help="Measure the factory (its fix agent, or all of it) on a task suite, with any model.",
        no_args_is_help=True,
    )
    app.add_typer(eval_app, name="eval")

    @eval_app.command("run")
    @command
    async def run(
        suite: str = typer.Argument(..., help="`builtin`, or a SWE-bench-format JSON (or JSON lines) file."),
        models: list[str] = typer.Option(
            [],
            "--model",
            help="provider:model, repeatable. `scripted:DIR` plays DIR/<task>.json per task; `scripted:builtin` "
            "is the built-in suite's. Default: SHOPFLOOR_MODEL, or scripted:builtin for the built-in suite.",
        ),
        agents: str = typer.Option(
            "fix",
            "--agents",
            help="What runs each task: `fix` (the fix agent alone), or `factory` (triage → fix → PR → CI → review "
            "on the GitHub simulator, stopped before the merge; each model must be in SHOPFLOOR_REPO_MODELS).",
        ),
        concurrency: int = typer.Option(2, "--concurrency", min=1, max=64, help="Tasks at once."),
        max_steps: int = typer.Option(30, "--max-steps", min=1, help="Each agent run's step limit."),
        max_cost: float | None = typer.Option(
            None, "--max-cost", min=0.0001, help="Each agent run's cost limit (USD)."
        ),
        approval_timeout: float = typer.Option(
            60.0,
            "--approval-timeout",
            min=1.0,
            help="Seconds a tool call that needs an operator's approval waits (`shopfloor approve` on its agent run) before it is refused.",
        ),
        repos: Path | None = typer.Option(
            None, "--repos", help="Where a SWE-bench file's repositories are: DIR/owner__name (or DIR/owner/name)."
        ),
        factory_timeout: float = typer.Option(
            3600.0,
            "--factory-timeout",
            min=1.0,
            help="--agents factory: seconds a task's run may take to reach its merge.",
        ),
        run_id: str | None = typer.Option(None, "--run-id", help="Name this run (default: a new id)."),
        wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the report (default), or only start."),
    ) -> None:
        """Run every task of SUITE through the fix agent (or the factory) with each model, then its hidden tests; report."""
        from temporalio.client import WorkflowFailureError
        from temporalio.common import WorkflowIDConflictPolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError
        from temporalio.service import RPCError

        from shopfloor.blobs import open_blob_store, put_json
        from shopfloor.cli.common import sdk_reason
        from shopfloor.errors import UsageError
        from shopfloor.evals.models import eval_models
        from shopfloor.evals.suites import load_suite
        from shopfloor.models.eval_run import EvalRunInput, eval_workflow_id
        from shopfloor.models.eval_task import INSTANCE_ID, TaskRef
        from shopfloor.temporal import connect
        from shopfloor.workflows.eval_run import EvalWorkflow

        if agents not in ("fix", "factory"):
            raise UsageError(f"--agents {agents}: `fix` (the fix agent alone) or `factory` (the whole factory)")
        rid = run_id or f"{uuid.uuid4().hex[:10]}"
        if not INSTANCE_ID.match(rid):
            raise UsageError(f"--run-id {rid!r}: letters, digits, '.', '_' and '-' only")
        settings = load_settings()
        work = settings.data_dir / "evals"
        if (work / "runs" / rid / "results.json").exists():
            raise UsageError(f"eval run {rid} has results already ({work / 'runs' / rid}): choose another --run-id")
        loaded = await asyncio.to_thread(load_suite, suite, work, repos.resolve() if repos else None)
        chosen = eval_models(models, loaded, settings.model)
        per_task = [m.label for m in chosen if m.by_task]
        if agents == "factory" and per_task:
            raise UsageError(
                f"--model {per_task[0]}: a cassette per task plays the fix agent alone; --agents factory needs one "
                "model for triage, fix and review (`scripted:NAME`, or a real one)"
            )
        blobs = open_blob_store(
            url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url
        )
        refs = [
            TaskRef(instance_id=t.instance_id, digest=await put_json(blobs, t.model_dump(by_alias=True)))
            for t in loaded.tasks
        ]
        inp = EvalRunInput(
            run_id=rid,
            suite=loaded.name,
            tasks=refs,
            models=chosen,
            agents="factory" if agents == "factory" else "fix",
            factory_timeout_s=factory_timeout,
            concurrency=concurrency,
            max_steps=max_steps,
            max_cost_usd=max_cost,
            approval_timeout_s=approval_timeout,
            results_dir=str((work / "runs" / rid).resolve()),
        )
        client = await connect(settings)
        try:
            handle = await client.start_workflow(
                EvalWorkflow.run,
                inp,
                id=eval_workflow_id(rid),
                task_queue=settings.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            )
        except WorkflowAlreadyStartedError:
            raise UsageError(
                f"eval run {rid} is running already (workflow eval/{rid}): choose another --run-id"
            ) from None
        typer.echo(
            f"eval {rid}: {len(refs)} task(s) × {len(chosen)} model(s), workflow {handle.id} on task queue "
            f"{settings.task_queue} (a worker runs it: `shopfloor dev` or `shopfloor worker`)",
            err=True,
        )
        if not wait:
            typer.echo(handle.id)
            return
        result = asyncio.ensure_future(handle.result())
        seen = -1
        while not result.done():
            await asyncio.wait([result], timeout=5)
            if result.done():
                break
            # From history, not a query: a query would need a worker (and its cache) to answer.
            try:
                ended = await agent_runs_ended(handle)
            except RPCError:
                continue
            if ended != seen:
                seen = ended
                typer.echo(f"eval {rid}: {ended}/{len(refs) * len(chosen)} agent run(s) ended", err=True)
        try:
            report = result.result()
        except (WorkflowFailureError, RPCError) as exc:
            fail(f"eval {rid} failed: {sdk_reason(exc)}", EXIT_FAILURE)
        typer.echo(Path(report.markdown).read_text())
        typer.echo(
            f"results: {report.results}\nreport: {report.markdown}" + (f"\nplot: {report.plot}" if report.plot else "")
        )

    @eval_app.command("backtest")
    @command
    async def backtest(
        repo: str = typer.Argument(..., help="OWNER/REPO, on GitHub or (without GitHub credentials) the simulator."),
        out: Path | None = typer.Option(
            None, "--out", help="The tasks file to write (default: the data dir's evals/backtests/OWNER__REPO.json)."
        ),
        limit: int = typer.Option(50, "--limit", min=1, help="Closed issues to look at, oldest first."),
    ) -> None:
        """Build eval tasks from REPO's closed issues whose merged fix changed tests."""
        from shopfloor.cli.eval_backtest import backtest as build
        from shopfloor.cli.simulator import github_or_simulator
        from shopfloor.errors import UsageError

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}", repo):
            raise UsageError(f"{repo!r} is not a repository: write OWNER/REPO, like acme/shop")
        settings = github_or_simulator(load_settings())
        dest = out or settings.data_dir / "evals" / "backtests" / f"{repo.replace('/', '__')}.json"
        report = await build(
            settings, repo, dest, limit=limit, progress=lambda line: typer.echo(f"built {line}", err=True)
        )
        for s in report.skipped:
            typer.echo(f"skipped #{s.issue}: {s.reason}", err=True)
        typer.echo(
            f"{len(report.tasks)} task(s) in {report.out}; run them with `shopfloor eval run {report.out} --model …`"
        )

    @eval_app.command("compare")
    def compare(
        first: str = typer.Argument(..., help="A run id (under the data dir's evals/runs), or its results.json."),
        second: str = typer.Argument(..., help="The run to compare it with."),
    ) -> None:
        """List the tasks whose outcome changed between two stored runs."""
        from shopfloor.errors import UsageError
        from shopfloor.evals.compare import changes, load_results, render

        settings = load_settings()
        runs = settings.data_dir / "evals" / "runs"

        def where(given: str) -> Path:
            path = Path(given)
            return path if path.exists() else runs / given

        try:
            a, b = load_results(where(first)), load_results(where(second))
        except UsageError as exc:
            fail(str(exc))
        typer.echo(render(a, b, changes(a, b)), nl=False)
