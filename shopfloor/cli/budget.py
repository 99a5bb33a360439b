"""`shopfloor budget show|set`: the spend ledger (LedgerWorkflow `ledger/<task queue>`) for operators.

`show` prints what was spent today and this month (UTC), per repository and in total, what runs
and what waits, and why. `set` overrides the operator's limits for one repository (or, with
`--total`, for everything); runs waiting on a limit that now allows them start at once.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings, sdk_reason
from shopfloor.errors import UsageError
from shopfloor.models.ledger import (
    LEDGER_QUERY,
    LEDGER_WORKFLOW,
    LIMIT_FIELDS,
    SET_LIMITS_UPDATE,
    LedgerState,
    LedgerView,
    LimitChange,
    Limits,
    RepoView,
    ledger_id,
)
from shopfloor.temporal import connect

_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_CLEARABLE = {f.replace("_", "-"): f for f in LIMIT_FIELDS}


def _money(value: float | None) -> str:
    return "none" if value is None else f"${value:g}"


def _limit(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def render(view: RepoView) -> str:
    lim = view.limits
    lines = [
        f"{view.repo}",
        f"  today ({'UTC'}): {view.today.runs} run(s), ${view.today.cost_usd:.4f}"
        f"   limits: {_limit(lim.runs_per_day)} run(s), {_money(lim.cost_usd_per_day)}",
        f"  this month:  {view.month.runs} run(s), ${view.month.cost_usd:.4f}"
        f"   limits: {_limit(lim.runs_per_month)} run(s), {_money(lim.cost_usd_per_month)}",
        f"  running: {view.running} (at most {_limit(lim.max_running)})   waiting: {len(view.queued)}",
    ]
    lines += [f"    {wid}: {view.waiting.get(wid, 'queued')}" for wid in view.queued]
    return "\n".join(lines)


async def _ledger(client: Client, task_queue: str) -> LedgerView | None:
    try:
        return await client.get_workflow_handle(ledger_id(task_queue)).query(LEDGER_QUERY, result_type=LedgerView)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        fail(f"the ledger did not answer: {sdk_reason(exc)}", EXIT_FAILURE)
    except WorkflowQueryFailedError as exc:
        fail(f"the ledger did not answer: {sdk_reason(exc)}", EXIT_FAILURE)


def register(app: typer.Typer) -> None:
    budget_app = typer.Typer(help="The spend ledger: runs and cost per repository and in total, and their limits.")
    app.add_typer(budget_app, name="budget")

    @budget_app.command("show")
    @command
    async def show(repo: str | None = typer.Argument(None, help="Only this repository (OWNER/REPO).")) -> None:
        """What was spent today and this month (UTC), what runs and what waits, and the limits in force."""
        settings = load_settings()
        view = await _ledger(await connect(settings), settings.task_queue)
        if view is None:
            typer.echo("no run has asked the ledger yet (it starts with the first run while a limit is set)")
            return
        scopes = [v for v in view.repos if repo is None or v.repo == repo]
        if repo is not None and not scopes:
            fail(f"the ledger has nothing for {repo}", EXIT_FAILURE)
        typer.echo(f"day {view.day}, month {view.month} (UTC)")
        for scope in ([view.total] if repo is None else []) + scopes:
            typer.echo(render(scope))

    @budget_app.command("set")
    @command
    async def set_(
        repo: str | None = typer.Argument(None, metavar="[OWNER/REPO]", help="The repository (or --total)."),
        total: bool = typer.Option(False, "--total", help="Set the limits of everything together."),
        runs_per_day: int | None = typer.Option(None, "--runs-per-day", min=0),
        runs_per_month: int | None = typer.Option(None, "--runs-per-month", min=0),
        cost_per_day: float | None = typer.Option(None, "--cost-per-day", min=0, help="USD."),
        cost_per_month: float | None = typer.Option(None, "--cost-per-month", min=0, help="USD."),
        max_running: int | None = typer.Option(None, "--max-running", min=1, help="Pipelines at once."),
        clear: list[str] = typer.Option(
            [], "--clear", help=f"Back to the settings' value: {', '.join(_CLEARABLE)} (repeatable)."
        ),
    ) -> None:
        """Override the operator's limits for a repository (or --total); waiting runs that now fit start."""
        if total == (repo is not None):
            raise UsageError("name a repository (OWNER/REPO) or --total, not both")
        if repo is not None and not _REPO.match(repo):
            raise UsageError(f"{repo!r} is not a repository: write OWNER/REPO, like acme/shop")
        unknown = [c for c in clear if c not in _CLEARABLE]
        if unknown:
            raise UsageError(f"--clear {unknown[0]}: one of {', '.join(_CLEARABLE)}")
        limits = Limits(
            runs_per_day=runs_per_day,
            runs_per_month=runs_per_month,
            cost_usd_per_day=cost_per_day,
            cost_usd_per_month=cost_per_month,
            max_running=max_running,
        )
        if not limits.set_any() and not clear:
            raise UsageError("nothing to set: give a limit (--runs-per-day N, …) or --clear NAME")
        change = LimitChange(repo=repo, limits=limits, clear=[_CLEARABLE[c] for c in clear])
        settings = load_settings()
        client = await connect(settings)
        view = await _set(client, settings.task_queue, change)
        scope = view.total if repo is None else next((v for v in view.repos if v.repo == repo), None)
        typer.echo(render(scope) if scope is not None else f"{repo}: limits set; no run has asked yet")


async def _set(client: Client, task_queue: str, change: LimitChange) -> LedgerView:
    """The update, on the ledger as it runs (started first when no run has asked yet)."""
    try:
        handle = await client.start_workflow(
            LEDGER_WORKFLOW,
            LedgerState(),
            id=ledger_id(task_queue),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            static_summary="the spend ledger: runs and cost per repository and in total, and the limits",
        )
        result: Any = await handle.execute_update(SET_LIMITS_UPDATE, change, result_type=LedgerView)
        return LedgerView.model_validate(result)
    except WorkflowUpdateFailedError as exc:
        fail(f"budget set refused: {sdk_reason(exc)}", EXIT_FAILURE)
    except RPCError as exc:
        fail(f"budget set failed: {sdk_reason(exc)}", EXIT_FAILURE)
