"""The merge stage, shared by an issue's pipeline and a pull request's review run: wait for CI,
wait for the approval the policy requires, and merge one head with the head-SHA guard; the issue
pipeline also brings its branch up to date with the base first, and deletes the branch and closes
the issue after.

CI: check_run / check_suite / status / workflow_run events routed to the workflow wake the wait
(`PipelineContext.ci_events`), and GitHub's combined status for the head (`github_ci_status`) is
what decides, read on every wake-up and at least every CI_POLL as the fallback for lost webhooks;
a check the base branch's protection requires counts as pending until it reports.
No result within policy.ci_timeout_minutes parks the run. Approval: when the policy wants a human
(require_human_approval, or auto_merge off), a writer's accepted `/shopfloor approve` or APPROVED
review must name the current head: a push after the approval needs a new one. A comment names a
commit (agents/approvals.py): the sha it spells, or the head at its `created_at`; one naming
anything but the current head is refused with a reply that asks for `/shopfloor approve <head>`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import SHORT_SHA, decide
    from shopfloor.agents.github_text import reply_ref, safe_login
    from shopfloor.agents.policy import RepoPolicy
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.git_remote import ProtectedCheckInput, UpdateInput
    from shopfloor.models.github_ops import (
        CiStatusInput,
        CloseIssueInput,
        DeleteBranchInput,
        MergePrInput,
    )
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.workflows.activity_catalogue import (
        GIT_PROTECTED_CHANGES,
        GIT_UPDATE_FROM_BASE,
        GITHUB_CI_STATUS,
        GITHUB_CLOSE_ISSUE,
        GITHUB_DELETE_BRANCH,
        GITHUB_MERGE_PR,
        call,
        failure_message,
        failure_type,
    )
    from shopfloor.workflows.comment_replies import reply_on_github
    from shopfloor.workflows.pipeline import (
        BaseConflicts,
        BaseMergedIn,
        IssueMergeResult,
        Merged,
        MergeRefused,
        MergeResult,
        PipelineContext,
        ProtectedPathsChanged,
    )

CI_POLL = timedelta(minutes=1)
# Histories recorded before an approval named a commit approve the head current when handled.
APPROVAL_NAMES_COMMIT_PATCH = "approval-names-commit"
# Histories recorded before the protected-path check skip it.
PROTECTED_PATHS_PATCH = "protected-paths-before-merge"
CiOutcome = Literal["success", "failure", "timeout", "moved"]


def needs_human(policy: RepoPolicy) -> bool:
    return policy.require_human_approval or not policy.auto_merge


# -- CI --------------------------------------------------------------------------------------------


async def wait_ci(ctx: PipelineContext, head: str, until: Callable[[], bool] | None = None) -> CiOutcome:
    """CI's verdict on `head`; "moved" as soon as `until()` says waiting is pointless."""
    state = ctx.state
    ctx.progress.stage("ci")
    await ctx.progress.show("waiting", waiting_for="ci")
    deadline = workflow.now() + timedelta(minutes=ctx.policy.ci_timeout_minutes)
    while True:
        seen = ctx.ci_events
        status = await call(
            GITHUB_CI_STATUS,
            CiStatusInput(repo=ctx.repo, sha=head, base_branch=ctx.base_branch),
            summary=f"CI status of {head[:12]}",
        )
        state.ci_state = status.state
        if status.state != "pending":
            ctx.progress.outcome(f"CI {status.state}" + (f": {', '.join(status.failing)}" if status.failing else ""))
            return status.state
        left = deadline - workflow.now()
        if left <= timedelta(0):
            never = [c.name for c in status.checks if c.kind == "required"]
            running = [c.name for c in status.checks if c.state == "pending" and c.kind != "required"]
            waiting = [*running, *(f"{name} (required by branch protection; never reported)" for name in never)]
            ctx.progress.outcome("CI timed out" + (f" waiting for {', '.join(waiting)}"[:200] if waiting else ""))
            return "timeout"

        def woken(seen: int = seen) -> bool:  # a CI event since this read, or nothing left to wait for
            return ctx.ci_events > seen or bool(until and until())

        try:
            await workflow.wait_condition(
                woken, timeout=min(CI_POLL, left), timeout_summary=f"CI: read {head[:12]}'s checks again"
            )
        except TimeoutError:
            pass
        if until is not None and until():
            return "moved"


# -- approval --------------------------------------------------------------------------------------


async def approved_head(ctx: PipelineContext, e: RepoEvent) -> str | None:
    """The head a writer's accepted `/shopfloor approve` approves; None when it approves none
    (the maintainer gets a reply saying why and which command would approve the head)."""
    state = ctx.state
    if not workflow.patched(APPROVAL_NAMES_COMMIT_PATCH):
        return state.head_sha
    decision = decide(state.heads, state.head_sha, e.command.args if e.command else "", e.occurred_at)
    if decision.sha is None:
        workflow.logger.info("approval by %s refused: %s", safe_login(e.sender), decision.reason)
        await _refuse_approval(ctx, e, decision.reason)
    return decision.sha


async def _refuse_approval(ctx: PipelineContext, e: RepoEvent, reason: str) -> None:
    body = f"@{safe_login(e.sender)} `/shopfloor approve` was not applied: {reason} Nothing was merged."
    # The refusal stands either way; the reply is a courtesy.
    await reply_on_github(
        ctx.repo,
        e.number or ctx.number,
        kind=f"approval-{reply_ref(e.comment_id, e.delivery_id)}",
        body=body,
        summary=f"refuse an approval by {safe_login(e.sender)}",
    )


async def wait_approval(
    ctx: PipelineContext, head: str, *, force: bool = False, until: Callable[[], bool] | None = None
) -> bool:
    """Wait until `head` is approved when the policy (or `force`: the review neither approved nor
    requested changes) wants a human to. False: `until()` turned true first (nothing to merge)."""
    state = ctx.state
    if not (force or needs_human(ctx.policy)) or head in state.approved_heads:
        return True
    ctx.progress.stage("merge")
    ctx.progress.view.approve_sha = head[:SHORT_SHA]  # the commit `/shopfloor approve <sha>` takes
    await ctx.progress.show("waiting", waiting_for="approval")
    await workflow.wait_condition(lambda: head in state.approved_heads or bool(until and until()))
    return not (until and until())


# -- the merge -------------------------------------------------------------------------------------


async def protected_changes(ctx: PipelineContext, clone_url: str, head: str) -> str | None:
    """Why the pull request at `head` is not merged by shopfloor: it changes protected paths
    (read from git at the head, whatever pushed it). None: it may be merged."""
    number = ctx.state.pr_number
    if number is None:
        raise ApplicationError(
            "checking protected paths before the pull request was opened",
            type=failure_types.INCONSISTENT_WORKFLOW_STATE,
            non_retryable=True,
        )
    if not workflow.patched(PROTECTED_PATHS_PATCH):
        return None
    check = await call(
        GIT_PROTECTED_CHANGES,
        ProtectedCheckInput(
            repo=ctx.repo,
            clone_url=clone_url,
            base_ref=ctx.base_branch,
            head_sha=head,
            number=number,
            protected_paths=list(ctx.policy.protected_paths),
        ),
        summary=f"protected paths in PR #{number} at {head[:12]}",
    )
    return check.message or None


async def merge_pull_request(
    ctx: PipelineContext, clone_url: str, head: str, title: str, message: str | None = None
) -> MergeResult:
    """Squash-merge the run's pull request at `head` (and only at `head`), unless it changes
    protected paths or GitHub refuses; the one way both runs merge."""
    state = ctx.state
    refused = await protected_changes(ctx, clone_url, head)
    if refused:
        return ProtectedPathsChanged(refused)
    number = state.pr_number or 0  # protected_changes raised when there is none
    try:
        out = await call(
            GITHUB_MERGE_PR,
            MergePrInput(repo=ctx.repo, pr_number=number, head_sha=head, method="squash", title=title, message=message),
            summary=f"squash-merge PR #{number} at {head[:12]}",
        )
    except ActivityError as exc:
        if failure_type(exc) in failure_types.MERGE_REFUSED:  # not this head, not now: no error
            return MergeRefused(failure_message(exc))
        raise
    state.merged_sha = out.sha
    ctx.progress.outcome(f"merged as {out.sha[:12]}")
    return Merged(out.sha)


async def update_and_merge(
    ctx: PipelineContext, ws: WorkspaceRef, head: str, title: str, message: str
) -> IssueMergeResult:
    """The issue pipeline's merge: bring the branch up to date with its base (a moved base means
    CI and review again), merge, then delete the branch and close the issue."""
    state = ctx.state
    ctx.progress.stage("merge")
    await ctx.progress.show("running")
    up = await call(
        GIT_UPDATE_FROM_BASE,
        UpdateInput(workspace=ws, base_branch=ctx.base_branch),
        summary=f"update {state.branch} from {ctx.base_branch}",
    )
    if up.status == "conflicts":
        ctx.progress.outcome(f"conflicts with {ctx.base_branch}: {', '.join(up.conflicts)[:150]}")
        return BaseConflicts(up.workspace, up.conflicts)
    if up.status == "merged":
        ctx.progress.outcome(f"{ctx.base_branch} moved: merged it in; CI and review again")
        return BaseMergedIn(up.workspace)
    result = await merge_pull_request(ctx, ws.clone_url or "", head, f"{title} (#{state.pr_number})", message)
    match result:
        case ProtectedPathsChanged():
            ctx.progress.outcome("merge refused: protected paths changed")
        case MergeRefused():
            ctx.progress.outcome("merge blocked")
        case Merged():
            await _tidy_after_merge(ctx)
    return result


async def _tidy_after_merge(ctx: PipelineContext) -> None:
    state = ctx.state
    try:
        await call(
            GITHUB_DELETE_BRANCH,
            DeleteBranchInput(repo=ctx.repo, branch=state.branch or ""),
            summary=f"delete branch {state.branch}",
        )
    except ActivityError as exc:  # a leftover branch is untidy, not a failure of the merge
        workflow.logger.warning("branch not deleted: %s", exc)
    await call(
        GITHUB_CLOSE_ISSUE,
        CloseIssueInput(repo=ctx.repo, issue_number=ctx.number),
        summary=f"close issue #{ctx.number}",
    )
