"""EvalWorkflow `eval/<run id>`: every task of a suite through the fix agent, with each model, then
the hidden check of each change, then the report.

Each (task, model) pair is a child AgentWorkflow `eval/<run id>/<task>/<model>` between two
activities (`eval_prepare`, `eval_check`), at most `concurrency` pairs at once. A crashed worker
costs nothing done: a finished child or check is in the history and is not run again, and the
next worker goes on from there. History holds each task's blob digest and outcome, never its
hidden tests or the agents' transcripts.
"""

from __future__ import annotations

import asyncio
import re

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from shopfloor.evals.scoring import categorize
    from shopfloor.models.agent_run import AgentInput, AgentResult, CommandPolicy, Limits
    from shopfloor.models.eval_run import (
        EVAL_PROGRESS_QUERY,
        EVAL_WORKFLOW,
        CheckInput,
        CheckOutput,
        EvalModel,
        EvalProgress,
        EvalReportInput,
        EvalResults,
        EvalRunInput,
        ReportOutput,
        TaskOutcome,
    )
    from shopfloor.models.eval_task import TaskRef
    from shopfloor.workflows.activity_catalogue import EVAL_CHECK, EVAL_PREPARE, EVAL_REPORT, call, failure_message

AGENT = "fix"


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")[:60] or "model"


@workflow.defn(name=EVAL_WORKFLOW)
class EvalWorkflow:
    def __init__(self) -> None:
        self._total = 0
        self._outcomes: list[TaskOutcome] = []

    @workflow.query(name=EVAL_PROGRESS_QUERY)
    def progress(self) -> EvalProgress:
        return EvalProgress(total=self._total, done=len(self._outcomes), outcomes=list(self._outcomes))

    @workflow.run
    async def run(self, inp: EvalRunInput) -> ReportOutput:
        started = workflow.now()
        self._total = len(inp.tasks) * len(inp.models)
        slots = asyncio.Semaphore(inp.concurrency)

        async def one(task: TaskRef, model: EvalModel) -> None:
            async with slots:
                self._outcomes.append(await self._one(inp, task, model))

        await asyncio.gather(*(one(t, m) for t in inp.tasks for m in inp.models))
        results = EvalResults(
            run_id=inp.run_id,
            suite=inp.suite,
            started_at=started,
            ended_at=workflow.now(),
            models=[m.label for m in inp.models],
            outcomes=sorted(self._outcomes, key=lambda o: (o.instance_id, o.model)),
        )
        return await call(
            EVAL_REPORT,
            EvalReportInput(results=results, results_dir=inp.results_dir),
            summary=f"report of {len(results.outcomes)} outcome(s)",
        )

    async def _one(self, inp: EvalRunInput, task: TaskRef, model: EvalModel) -> TaskOutcome:
        began = workflow.now()
        agent_id = f"{workflow.info().workflow_id}/{task.instance_id}/{_slug(model.label)}"
        result: AgentResult | None = None
        check: CheckOutput | None = None
        error: str | None = None
        try:
            prepared = await call(EVAL_PREPARE, task, summary=f"{task.instance_id}: its repository and goal")
            result = await workflow.execute_child_workflow(
                "AgentWorkflow",
                AgentInput(
                    agent=AGENT,
                    model=model.for_task(task.instance_id),
                    goal=prepared.goal,
                    workspace=prepared.workspace,
                    stage="eval",
                    limits=Limits(max_steps=inp.max_steps, max_cost_usd=inp.max_cost_usd),
                    commands=CommandPolicy(test_command=prepared.test_command),
                    required_command=prepared.test_command,
                    approval_timeout_s=inp.approval_timeout_s,
                ),
                id=agent_id,
                result_type=AgentResult,
                static_summary=f"eval {inp.run_id}: {task.instance_id} with {model.label}"[:200],
            )
            if result.state != "limit_reached" and result.workspace is not None:
                check = await call(
                    EVAL_CHECK,
                    CheckInput(task_digest=task.digest, workspace=result.workspace, run_id=agent_id),
                    summary=f"{task.instance_id}: the hidden tests on {model.label}'s change",
                )
        except (ActivityError, ChildWorkflowError) as exc:
            error = failure_message(exc)[:300]
        category, detail = categorize(result, check, error)
        return TaskOutcome(
            instance_id=task.instance_id,
            model=model.label,
            category=category,
            resolved=category == "resolved",
            steps=result.steps if result else 0,
            tokens=(result.usage.input_tokens + result.usage.output_tokens) if result else 0,
            cost_usd=result.cost_usd if result else 0.0,
            wall_s=(workflow.now() - began).total_seconds(),
            agent_run_id=agent_id,
            detail=detail[:300],
        )
