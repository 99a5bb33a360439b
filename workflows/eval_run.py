"""EvalWorkflow `eval/<run id>`: every task of a suite through the fix agent (or the whole
factory), with each model, then the hidden check of each change, then the report.

`--agents fix`: each (task, model) pair is a child AgentWorkflow `eval/<run id>/<task>/<model>`
between two activities (`eval_prepare`, `eval_check`). `--agents factory`: the pair's task is
published as its own repository on the GitHub simulator with its issue (`eval_publish`), whose
IssueWorkflow triages, fixes, opens the pull request, waits for CI and reviews as for any issue;
`eval_factory_wait` follows it until it waits for the merge approval (or ends), the check runs on
the pull request's head, and `eval_factory_stop` ends the run unmerged.

At most `concurrency` pairs run at once. A crashed worker costs nothing done: a finished child,
wait or check is in the history and is not run again, and the next worker goes on from there.
History holds each task's blob digest and outcome, never its hidden tests or the agents'
transcripts.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from shopfloor.evals.scoring import categorize, categorize_factory
    from shopfloor.models.agent_run import AgentInput, AgentResult, CommandPolicy, Limits, WorkspaceRef
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
        FactoryEnd,
        FactoryStopInput,
        FactoryWaitInput,
        PublishedTask,
        PublishInput,
        ReportOutput,
        TaskOutcome,
    )
    from shopfloor.models.eval_task import TaskRef
    from shopfloor.workflows.activity_catalogue import (
        EVAL_CHECK,
        EVAL_FACTORY_STOP,
        EVAL_FACTORY_WAIT,
        EVAL_PREPARE,
        EVAL_PUBLISH,
        EVAL_REPORT,
        call,
        failure_message,
    )

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
        if inp.agents == "factory":
            return await self._one_factory(inp, task, model)
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

    async def _one_factory(self, inp: EvalRunInput, task: TaskRef, model: EvalModel) -> TaskOutcome:
        began = workflow.now()
        check_id = f"{workflow.info().workflow_id}/{task.instance_id}/{_slug(model.label)}"
        published: PublishedTask | None = None
        end: FactoryEnd | None = None
        check: CheckOutput | None = None
        error: str | None = None
        try:
            published = await call(
                EVAL_PUBLISH,
                PublishInput(
                    task_digest=task.digest,
                    eval_run=inp.run_id,
                    model=model.for_task(task.instance_id),
                    max_steps=inp.max_steps,
                    max_cost_usd=inp.max_cost_usd,
                    approval_timeout_s=inp.approval_timeout_s,
                ),
                summary=f"{task.instance_id}: its repository and issue on the simulator, for {model.label}"[:200],
            )
            end = await call(
                EVAL_FACTORY_WAIT,
                FactoryWaitInput(workflow_id=published.workflow_id, timeout_s=inp.factory_timeout_s),
                summary=f"{task.instance_id}: {published.workflow_id} until it waits to merge"[:200],
                timeout=timedelta(seconds=inp.factory_timeout_s + 300),
            )
            if end.head_sha and end.result != "salvaged":
                check = await call(
                    EVAL_CHECK,
                    CheckInput(
                        task_digest=task.digest,
                        workspace=WorkspaceRef(
                            repo=published.repo, clone_url=published.clone_url, base_sha=end.head_sha
                        ),
                        run_id=check_id,
                        diff_base=published.base_sha,
                    ),
                    summary=f"{task.instance_id}: the hidden tests on PR #{end.pr_number} ({model.label})"[:200],
                )
        except (ActivityError, ChildWorkflowError) as exc:
            error = failure_message(exc)[:300]
        except asyncio.CancelledError:
            await self._stop(published, "the eval was cancelled")
            raise
        await self._stop(published, "the eval took its change")
        category, detail = categorize_factory(end, check, error)
        fixes = [c for c in (end.children if end else []) if c.rsplit("/", 1)[-1].startswith("fix-")]
        return TaskOutcome(
            instance_id=task.instance_id,
            model=model.label,
            category=category,
            resolved=category == "resolved",
            steps=end.steps if end else 0,
            tokens=end.tokens if end else 0,
            cost_usd=end.cost_usd if end else 0.0,
            wall_s=(workflow.now() - began).total_seconds(),
            agent_run_id=fixes[-1] if fixes else "",
            factory_run_id=published.workflow_id if published else "",
            pr_url=(
                f"{published.clone_url.removesuffix('.git')}/pull/{end.pr_number}"
                if published and end and end.pr_number
                else ""
            ),
            detail=detail[:300],
        )

    async def _stop(self, published: PublishedTask | None, reason: str) -> None:
        """End the task's factory run unmerged (it waits for an approval nobody will give)."""
        if published is None:
            return
        try:
            await call(
                EVAL_FACTORY_STOP,
                FactoryStopInput(workflow_id=published.workflow_id, reason=reason),
                summary=f"stop {published.workflow_id}: {reason}"[:200],
            )
        except ActivityError as exc:  # the run waits on; the eval's result does not depend on it
            workflow.logger.warning("could not stop %s: %s", published.workflow_id, failure_message(exc))
