"""The agent stages of an issue's pipeline as child AgentWorkflows with readable ids
(`<issue workflow id>/triage`, `/fix-2`, `/review-1`), and what follows them on GitHub: the push
of a fix to `shopfloor/issue-<n>`, its pull request (draft when salvaged), and the review posted
as a COMMENT (GitHub forbids approving your own PR; the verdict lives in the workflow).

Limits come from the repository policy: per-agent max_steps, and what is left of the run's cost
budget (budgets.max_cost_usd_per_run) for each child. A model the worker has no price for runs
under the step limits alone, and the progress comment says its cost was not tracked: refusing to
run would make every unpriced (self-hosted) model unusable; the operator prices it in
SHOPFLOOR_PRICES to have the budget enforced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import record_head
    from shopfloor.agents.outputs import FixResult, ReviewResult
    from shopfloor.agents.policy import protected_globs, protected_note
    from shopfloor.agents.registry import get_agent
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentResult,
        CommandPolicy,
        Limits,
        PermissionRules,
        Timeouts,
        WorkspaceRef,
    )
    from shopfloor.models.factory_run import GoalInput, GoalOutput
    from shopfloor.models.git_remote import PushInput, PushOutput
    from shopfloor.models.github_ops import (
        FindOrCreatePrInput,
        PrOutput,
        ReviewComment,
        ReviewOutput,
        SubmitReviewInput,
    )
    from shopfloor.workflows.factory_calls import GIT_RETRY, act

if TYPE_CHECKING:
    from shopfloor.workflows.factory_run import FactoryRun

DEFAULT_TEST_COMMAND = "python -m pytest -q"


class AgentStages:
    def __init__(self, run: FactoryRun) -> None:
        self.run = run

    def test_command(self) -> str:
        return self.run.policy.test_command or DEFAULT_TEST_COMMAND

    async def goal(self, inp: GoalInput) -> str:
        out = await act("factory_goal", inp, GoalOutput, f"{inp.kind} goal for #{inp.number} (round {inp.round})")
        return out.goal

    async def agent(
        self,
        agent: str,
        suffix: str,
        stage: str,
        goal: str,
        ws: WorkspaceRef,
        round_: int,
        required_command: str | None = None,
    ) -> AgentResult:
        run, s, policy = self.run, self.run.s, self.run.policy
        defaults = get_agent(agent).limits
        steps = getattr(policy.budgets.max_steps, agent, None) or defaults.max_steps
        model = run.config.model_for(agent, round_)
        budget = policy.budgets.max_cost_usd_per_run if run.config.is_priced(model) else None
        left = None if budget is None else round(budget - s.cost_usd, 6)
        if left is not None and left <= 0:  # spent: no agent starts (it could only overspend)
            why = f"cost limit reached: the run's budget of ${budget:g} is spent (${s.cost_usd:,.4f})"
            run.progress.stage(stage, agent)
            run.progress.outcome(f"{agent}: not started ({why})")
            return AgentResult(state="limit_reached", steps=0, reason=why, workspace=ws)
        if agent == "fix":  # the agent that changes files learns the rules the push enforces
            goal = f"{goal}\n\n{protected_note(policy.protected_paths)}"
        child_id = f"{workflow.info().workflow_id}/{suffix}"
        run.progress.stage(stage, agent)
        await run.progress.show("running")
        s.children.append(child_id)
        result: AgentResult = await workflow.execute_child_workflow(
            "AgentWorkflow",
            AgentInput(
                agent=agent,
                model=model,
                goal=goal,
                workspace=ws,
                stage=stage,
                issue=run.number,
                limits=Limits(max_steps=steps, max_cost_usd=left),
                commands=CommandPolicy(
                    network=policy.network_for_commands,
                    network_allow=list(policy.network_allow),
                    test_command=policy.test_command,
                ),
                permissions=PermissionRules(protected_paths=protected_globs(policy.protected_paths)),
                required_command=required_command,
                timeouts=Timeouts(model_heartbeat_s=run.config.model_heartbeat_s),
            ),
            id=child_id,
            result_type=AgentResult,
            static_summary=f"{agent} for {run.repo}#{run.number} (round {round_}) with {model}",
        )
        s.steps += result.steps
        s.tokens += result.usage.input_tokens + result.usage.output_tokens
        s.cost_usd += result.cost_usd
        outcome = result.state if result.state != "completed" else "done"
        if not run.config.is_priced(model) and model not in run.progress.view.unpriced_models:
            run.progress.view.unpriced_models = [*run.progress.view.unpriced_models, model][-10:]
        run.progress.outcome(
            f"{agent}: {outcome}" + (f" ({result.reason})" if result.reason else ""),
            steps=result.steps,
            cost=result.cost_usd,
        )
        return result

    async def push(self, ws: WorkspaceRef, title: str) -> PushOutput:
        run, s = self.run, self.run.s
        s.branch = f"shopfloor/issue-{run.number}"
        out = await act(
            "git_push_workspace",
            PushInput(
                workspace=ws,
                branch=s.branch,
                message=f"{title}\n\nFixes #{run.number}",
                committed_at=workflow.now(),
                expected_remote_sha=s.head_sha,
                protected_paths=list(run.policy.protected_paths),
            ),
            PushOutput,
            f"push {s.branch}",
            timeout_s=900,
            heartbeat_s=120,
            retry=GIT_RETRY,
        )
        if s.head_sha != out.head_sha:
            s.head_sha, s.ci_state = out.head_sha, None
        record_head(s.heads, out.head_sha, workflow.now())  # pushed by now at the latest: approvals name heads
        return out

    async def open_pr(self, fix: FixResult | None, *, draft: bool = False, salvage_note: str = "") -> PrOutput:
        run, s = self.run, self.run.s
        title = fix.pr_title if fix else f"WIP: fix #{run.number} (salvaged)"
        body = fix.pr_body if fix else ""
        if f"#{run.number}" not in body:
            body = f"{body}\n\nFixes #{run.number}".strip()
        if salvage_note:
            body = f"{salvage_note}\n\n{body}"
        # The activity cleans the model's title and body of HTML comments (markers) and ends the
        # body with this workflow's marker, which routes comments on the pull request here.
        pr = await act(
            "github_find_or_create_pr",
            FindOrCreatePrInput(
                repo=run.repo,
                head=s.branch or "",
                base=run.base_branch,
                title=title[:120],
                body=body,
                draft=draft,
                workflow_id=workflow.info().workflow_id,
            ),
            PrOutput,
            f"{'draft ' if draft else ''}PR for {s.branch}",
        )
        s.pr_number, s.pr_url = pr.number, pr.url  # found by our branch: the PR whose comments command this run
        run.progress.links(pr_url=pr.url)
        return pr

    async def post_review(self, review: ReviewResult, head: str) -> None:
        run, s = self.run, self.run.s
        if s.pr_number is None:
            raise ApplicationError(
                "posting a review before the pull request was opened",
                type="InconsistentWorkflowState",
                non_retryable=True,
            )
        body = f"**shopfloor review (round {s.review_round}): {review.verdict.replace('_', ' ')}**\n\n{review.summary}"
        comments = [ReviewComment(path=c.path, line=c.line, body=c.body) for c in review.comments]
        inp = SubmitReviewInput(
            repo=run.repo,
            pr_number=s.pr_number,
            workflow_id=workflow.info().workflow_id,
            round=s.review_round,
            event="COMMENT",
            body=body,
            comments=comments,
            commit_id=head,
        )
        try:
            await act("github_submit_review", inp, ReviewOutput, f"post review {s.review_round} on PR #{s.pr_number}")
        except ActivityError:
            if not comments:
                raise
            # Line comments GitHub refuses (a line outside the diff): the same review, lines in the body.
            lines = "\n".join(f"- `{c.path}:{c.line}`: {c.body}" for c in comments)
            inp = inp.model_copy(update={"comments": [], "body": f"{body}\n\n{lines}"})
            await act("github_submit_review", inp, ReviewOutput, f"post review {s.review_round} on PR #{s.pr_number}")
