"""The agent stages of an issue's pipeline (and of a pull request's review run) as stage
functions over a PipelineContext: child AgentWorkflows with readable ids (`<workflow id>/triage`,
`/fix-2`, `/review-1`), and what follows them on GitHub: the push of a fix to
`shopfloor/issue-<n>`, its pull request (draft when salvaged), and the review posted as a COMMENT
(GitHub forbids approving your own PR; the verdict lives in the workflow).

Limits come from the repository policy: per-agent max_steps, and what is left of the run's cost
budget (budgets.max_cost_usd_per_run) for each child. A model the worker has no price for runs
under the step limits alone, and the progress comment says its cost was not tracked: refusing to
run would make every unpriced (self-hosted) model unusable; the operator prices it in
SHOPFLOOR_PRICES to have the budget enforced.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import record_head
    from shopfloor.agents.outputs import FixResult, ReviewResult
    from shopfloor.agents.permissions import DEFAULT_ASK_COMMANDS
    from shopfloor.agents.policy import RepoPolicy, protected_globs, protected_note
    from shopfloor.agents.registry import get_agent
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentResult,
        CommandHook,
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
        SubmitReviewInput,
    )
    from shopfloor.models.mcp import McpUse
    from shopfloor.workflows.activity_catalogue import (
        FACTORY_GOAL,
        GIT_PUSH_WORKSPACE,
        GITHUB_FIND_OR_CREATE_PR,
        GITHUB_SUBMIT_REVIEW,
        call,
    )
    from shopfloor.workflows.late_cancel import unless_cancelled
    from shopfloor.workflows.live_progress import with_live_progress
    from shopfloor.workflows.pipeline import PipelineContext
    from shopfloor.workflows.repo_profile import test_command_note


def required_test_command(ctx: PipelineContext) -> str | None:
    """The command the fix agent must have run (green) before it submits: the policy's, else the
    one detected from the default branch (None: the repository has no tests shopfloor can find)."""
    return ctx.policy.test_command or ctx.profile.test_command


def agent_commands(ctx: PipelineContext) -> CommandPolicy:
    """How the agents' commands run, from the repository's policy and profile."""
    policy = ctx.policy
    return CommandPolicy(
        network=policy.network_for_commands,
        network_allow=list(policy.network_allow),
        test_command=required_test_command(ctx),
        after_edit=[
            CommandHook(run=h.run, files=list(h.files) if h.files is not None else None, timeout_s=h.timeout_seconds)
            for h in policy.hooks.after_edit
        ],
        before_submit=[CommandHook(run=h.run, timeout_s=h.timeout_seconds) for h in policy.hooks.before_submit],
    )


def agent_permissions(policy: RepoPolicy) -> PermissionRules:
    """The judge's rules: the repository's command rules only add to the defaults."""
    ask, deny = policy.commands.ask, policy.commands.deny
    return PermissionRules(
        protected_paths=protected_globs(policy.protected_paths),
        ask_commands=[*DEFAULT_ASK_COMMANDS, *ask] if ask else None,
        deny_commands=list(deny) if deny else None,
        code_mode=False if not policy.code_mode else None,
    )


# Goals ask for the images the body shows (fetched by the goal's activity, from GitHub's hosts
# only); runs recorded before render their goals without (and so start no fetch on replay).
GOAL_IMAGES_PATCH = "goal-images"


def goal_images() -> bool:
    """Whether this run's goals carry the body's images (decided once, at the first goal)."""
    return workflow.patched(GOAL_IMAGES_PATCH)


def agent_mcp(policy: RepoPolicy) -> McpUse | None:
    """The repository's MCP servers and rules for its agents (None: it names no server)."""
    rules = policy.mcp
    if not rules.servers:
        return None
    return McpUse(servers=list(rules.servers), allow=list(rules.allow), deny=list(rules.deny))


async def render_goal(inp: GoalInput) -> GoalOutput:
    """The goal an agent is given, rendered by an activity (it quotes the untrusted text), with
    the images it shows (digests; their bytes stay in the blob store)."""
    return await call(FACTORY_GOAL, inp, summary=f"{inp.kind} goal for #{inp.number} (round {inp.round})")


UNPRICED_TOKEN_CAP_PATCH = "unpriced-token-cap"


async def run_agent(
    ctx: PipelineContext,
    agent: str,
    suffix: str,
    stage: str,
    rendered: GoalOutput | str,
    ws: WorkspaceRef,
    round_: int,
    required_command: str | None = None,
) -> AgentResult:
    """Run `agent` as the child AgentWorkflow `<this workflow's id>/<suffix>` within the policy's
    limits, and add what it spent to the run's state."""
    state, policy, config, progress = ctx.state, ctx.policy, ctx.config, ctx.progress
    goal, images = (rendered, []) if isinstance(rendered, str) else (rendered.goal, rendered.images)
    defaults = get_agent(agent).limits
    steps = getattr(policy.budgets.max_steps, agent, None) or defaults.max_steps
    model = getattr(policy.models, agent, None) or config.model_for(agent, round_)
    budget = policy.budgets.max_cost_usd_per_run if config.is_priced(model) else None
    left = None if budget is None else round(budget - state.cost_usd, 6)
    cap = getattr(policy.budgets.max_cost_usd, agent, None) if config.is_priced(model) else None
    if left is not None and left <= 0:  # spent: no agent starts (it could only overspend)
        why = f"cost limit reached: the run's budget of ${budget:g} is spent (${state.cost_usd:,.4f})"
        progress.stage(stage, agent)
        progress.outcome(f"{agent}: not started ({why})")
        return AgentResult(state="limit_reached", steps=0, reason=why, workspace=ws)
    # A model with no price cannot be held to a cost limit: it is held to a token limit instead,
    # the lower of the operator's and the repository's, and without one it does not start.
    tokens = policy.budgets.max_tokens
    if not config.is_priced(model) and workflow.patched(UNPRICED_TOKEN_CAP_PATCH):
        tokens = config.unpriced_token_cap(tokens)
        if tokens is None:
            why = config.no_token_limit(model)
            progress.stage(stage, agent)
            progress.outcome(f"{agent}: not started ({why})")
            return AgentResult(state="failed", steps=0, reason=why, workspace=ws)
    if agent == "fix":  # the agent that changes files learns the rules the push enforces
        goal = f"{goal}\n\n{protected_note(policy.protected_paths)}"
    child_id = f"{workflow.info().workflow_id}/{suffix}"
    progress.stage(stage, agent)
    tests = test_command_note(ctx.profile, required_command) if agent == "fix" else ""
    if tests:  # while it runs, the comment says which command the fix agent must run green
        progress.outcome(tests, end=False)
    await progress.show("running")
    state.children.append(child_id)
    state.running_agent = child_id  # the pipeline's controls forward to it (workflows/pipeline_controls.py)
    # While it runs, the comment shows its steps (edited by an activity, not from here).
    child = workflow.execute_child_workflow(
        "AgentWorkflow",
        AgentInput(
            agent=agent,
            model=model,
            goal=goal,
            goal_images=images,
            workspace=ws,
            stage=stage,
            issue=ctx.number,
            limits=Limits(
                max_steps=steps,
                max_cost_usd=left if cap is None or left is None else min(left, cap),
                max_tokens=tokens,
            ),
            commands=agent_commands(ctx),
            permissions=agent_permissions(policy),
            required_command=required_command,
            timeouts=Timeouts(model_heartbeat_s=config.model_heartbeat_s),
            approval_timeout_s=policy.approval_timeout_minutes * 60.0,
            instructions=ctx.profile.instructions,
            mcp=agent_mcp(policy),
        ),
        id=child_id,
        result_type=AgentResult,
        static_summary=f"{agent} for {ctx.repo}#{ctx.number} (round {round_}) with {model}",
        static_details=agent_details(agent, ctx, round_, model, ws, steps, required_command),
    )
    result: AgentResult = await with_live_progress(progress, child_id, unless_cancelled(child))
    state.running_agent = None
    state.steps += result.steps
    state.tokens += result.usage.input_tokens + result.usage.output_tokens
    state.cost_usd += result.cost_usd
    if ctx.admission is not None:
        await ctx.admission.report(state.cost_usd)  # the ledger counts spend as it happens
    outcome = result.state if result.state != "completed" else "done"
    if not config.is_priced(model) and model not in progress.view.unpriced_models:
        progress.view.unpriced_models = [*progress.view.unpriced_models, model][-10:]
    progress.outcome(
        f"{agent}: {outcome}" + (f" ({result.reason})" if result.reason else "") + (f"; {tests}" if tests else ""),
        steps=result.steps,
        cost=result.cost_usd,
    )
    return result


def agent_details(
    agent: str, ctx: PipelineContext, round_: int, model: str, ws: WorkspaceRef, steps: int, required: str | None
) -> str:
    """What the Temporal UI shows of an agent run started by the pipeline (its static details)."""
    lines = [
        f"**{agent}** agent, round {round_}, for {ctx.repo}#{ctx.number}, started by `{workflow.info().workflow_id}`",
        f"- model: `{model}`",
        f"- limits: {steps} steps",
        f"- workspace: {ws.repo} at `{(ws.base_sha or '')[:12]}`"
        + (" with earlier changes" if ws.patch_digest else ""),
    ]
    if required:
        lines.append(f"- must pass before it submits: `{required[:200]}`")
    lines.append("- its steps: the `status` query, `shopfloor status` or `shopfloor follow` with this id")
    return "\n".join(lines)


async def push(ctx: PipelineContext, ws: WorkspaceRef, title: str) -> PushOutput:
    """Push the fix's workspace to `shopfloor/issue-<n>` (the push refuses protected paths)."""
    state = ctx.state
    state.branch = f"shopfloor/issue-{ctx.number}"
    out = await call(
        GIT_PUSH_WORKSPACE,
        PushInput(
            workspace=ws,
            branch=state.branch,
            message=f"{title}\n\nFixes #{ctx.number}",
            committed_at=workflow.now(),
            expected_remote_sha=state.head_sha,
            protected_paths=list(ctx.policy.protected_paths),
        ),
        summary=f"push {state.branch}",
    )
    if state.head_sha != out.head_sha:
        state.head_sha, state.ci_state = out.head_sha, None
    record_head(state.heads, out.head_sha, workflow.now())  # pushed by now at the latest: approvals name heads
    return out


async def open_pr(
    ctx: PipelineContext, fix: FixResult | None, *, draft: bool = False, salvage_note: str = ""
) -> PrOutput:
    """Find or open the pull request of the run's branch (draft when salvaged)."""
    state = ctx.state
    title = fix.pr_title if fix else f"WIP: fix #{ctx.number} (salvaged)"
    body = fix.pr_body if fix else ""
    if f"#{ctx.number}" not in body:
        body = f"{body}\n\nFixes #{ctx.number}".strip()
    if salvage_note:
        body = f"{salvage_note}\n\n{body}"
    # The activity cleans the model's title and body of HTML comments (markers) and ends the
    # body with this workflow's marker, which routes comments on the pull request here.
    pr = await call(
        GITHUB_FIND_OR_CREATE_PR,
        FindOrCreatePrInput(
            repo=ctx.repo,
            head=state.branch or "",
            base=ctx.base_branch,
            title=title[:120],
            body=body,
            draft=draft,
            workflow_id=workflow.info().workflow_id,
        ),
        summary=f"{'draft ' if draft else ''}PR for {state.branch}",
    )
    state.pr_number, state.pr_url = pr.number, pr.url  # found by our branch: the PR whose comments command this run
    ctx.progress.links(pr_url=pr.url)
    return pr


async def post_review(ctx: PipelineContext, review: ReviewResult, head: str) -> None:
    """Post the review agent's verdict on the pull request as a COMMENT review of `head`."""
    state = ctx.state
    if state.pr_number is None:
        raise ApplicationError(
            "posting a review before the pull request was opened",
            type=failure_types.INCONSISTENT_WORKFLOW_STATE,
            non_retryable=True,
        )
    verdict = review.verdict.replace("_", " ")
    body = f"**shopfloor review (round {state.review_round}): {verdict}**\n\n{review.summary}"
    comments = [ReviewComment(path=c.path, line=c.line, body=c.body) for c in review.comments]
    summary = f"post review {state.review_round} on PR #{state.pr_number}"
    inp = SubmitReviewInput(
        repo=ctx.repo,
        pr_number=state.pr_number,
        workflow_id=workflow.info().workflow_id,
        round=state.review_round,
        event="COMMENT",
        body=body,
        comments=comments,
        commit_id=head,
    )
    try:
        await call(GITHUB_SUBMIT_REVIEW, inp, summary=summary)
    except ActivityError:
        if not comments:
            raise
        # Line comments GitHub refuses (a line outside the diff): the same review, lines in the body.
        lines = "\n".join(f"- `{c.path}:{c.line}`: {c.body}" for c in comments)
        inp = inp.model_copy(update={"comments": [], "body": f"{body}\n\n{lines}"})
        await call(GITHUB_SUBMIT_REVIEW, inp, summary=summary)
