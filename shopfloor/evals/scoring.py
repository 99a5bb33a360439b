"""What a task came to, and what a model's tasks add up to: the resolve rate with a 95% Wilson
interval (honest for the handful of tasks a suite has), cost per resolved task, median steps."""

from __future__ import annotations

import math
import statistics

from pydantic import BaseModel

from shopfloor.models.agent_run import AgentResult
from shopfloor.models.eval_run import CATEGORIES, Category, CheckOutput, FactoryEnd, TaskOutcome

Z_95 = 1.959963984540054


def categorize(result: AgentResult | None, check: CheckOutput | None, error: str | None = None) -> tuple[Category, str]:
    """(category, one line of why) for an agent run's result and the hidden check of its change."""
    if error is not None or result is None:
        return "harness_error", error or "the agent run did not end"
    if result.state == "limit_reached":
        return "limit_reached", result.reason or "a limit was reached"
    return _by_check(check, f"the agent ended {result.state} without changing a file", "")


def _by_check(check: CheckOutput | None, unchanged: str, where: str) -> tuple[Category, str]:
    """What the hidden check says of a change: `unchanged` when it changed nothing; `where`
    ends the resolved line (" on PR #2")."""
    if check is None:
        return "harness_error", "the hidden check did not run"
    if check.error:
        return "harness_error", check.error
    if check.patch_lines == 0:
        return "no_patch", unchanged
    if check.fail_to_pass_failed or check.pass_to_pass_failed:
        failing = [*check.fail_to_pass_failed, *check.pass_to_pass_failed]
        return "tests_fail", f"{len(failing)} hidden test(s) fail: {', '.join(failing[:3])}"
    return "resolved", f"{len(check.fail_to_pass_passed)} failing test(s) now pass{where}"


def categorize_factory(
    end: FactoryEnd | None, check: CheckOutput | None, error: str | None = None
) -> tuple[Category, str]:
    """(category, why) for a task's factory run (--agents factory) and the check of its pull
    request's head. A run that kept its work when a limit stopped it (salvaged) reached a limit;
    one that opened no pull request made no patch, whatever stopped it (the triage, the gate, a
    fix that changed nothing)."""
    if error is not None or end is None:
        return "harness_error", error or "the factory run did not end"
    if end.result == "salvaged":
        return "limit_reached", end.reason or "a limit was reached"
    if end.head_sha is None:
        where = f"{end.result or 'stopped'} at {end.stage}" + (f": {end.reason}" if end.reason else "")
        return "no_patch", f"the factory opened no pull request ({where})"
    return _by_check(check, f"pull request #{end.pr_number} changes no file", f" on PR #{end.pr_number}")


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


class ModelSummary(BaseModel):
    model: str
    tasks: int
    resolved: int
    resolve_rate: float
    interval: tuple[float, float]
    cost_usd: float
    cost_per_resolved: float | None  # None: nothing resolved
    median_steps: float
    categories: dict[str, int]


def summarize(model: str, outcomes: list[TaskOutcome]) -> ModelSummary:
    mine = [o for o in outcomes if o.model == model]
    resolved = sum(o.resolved for o in mine)
    cost = sum(o.cost_usd for o in mine)
    return ModelSummary(
        model=model,
        tasks=len(mine),
        resolved=resolved,
        resolve_rate=resolved / len(mine) if mine else 0.0,
        interval=wilson_interval(resolved, len(mine)),
        cost_usd=cost,
        cost_per_resolved=cost / resolved if resolved else None,
        median_steps=statistics.median(o.steps for o in mine) if mine else 0.0,
        categories={c: sum(o.category == c for o in mine) for c in CATEGORIES},
    )
