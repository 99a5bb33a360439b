"""The merge stage of an issue's pipeline: wait for CI, wait for the approval the
policy requires, bring the branch up to date with its base, merge with the head-SHA guard, delete
the branch and close the issue.

CI: check_run / check_suite / status / workflow_run events routed to the issue workflow wake the
wait (`FactoryRun.ci_events`), and GitHub's combined status for the head (`github_ci_status`) is
what decides, read on every wake-up and at least every CI_POLL as the fallback for lost webhooks.
No result within policy.ci_timeout_minutes parks the run. Approval: when the policy wants a human
(require_human_approval, or auto_merge off), a writer's accepted `/shopfloor approve` or APPROVED
review must name the current head: a push after the approval needs a new one. A comment names a
commit (agents/approvals.py): the sha it spells, or the head at its `created_at`; one naming
anything but the current head is refused with a reply that asks for `/shopfloor approve <head>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import SHORT_SHA, decide
    from shopfloor.agents.policy import RepoPolicy
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.git_remote import ProtectedCheckInput, ProtectedCheckOutput, UpdateInput, UpdateOutput
    from shopfloor.models.github_ops import (
        CiStatusInput,
        CiStatusOutput,
        CloseIssueInput,
        CloseIssueOutput,
        CommentOutput,
        DeleteBranchInput,
        DeleteBranchOutput,
        MergeOutput,
        MergePrInput,
        UpsertCommentInput,
    )
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.workflows.commands import safe_login
    from shopfloor.workflows.factory_calls import GIT_RETRY, act, cause, cause_type

if TYPE_CHECKING:
    from shopfloor.workflows.factory_run import FactoryRun

CI_POLL = timedelta(minutes=1)
# Histories recorded before an approval named a commit approve the head current when handled.
APPROVAL_NAMES_COMMIT_PATCH = "approval-names-commit"
CiOutcome = Literal["success", "failure", "timeout", "moved"]
MergeStatus = Literal["merged", "conflicts", "moved", "blocked"]


def needs_human(policy: RepoPolicy) -> bool:
    return policy.require_human_approval or not policy.auto_merge


async def protected_changes(run: Any, clone_url: str, base_ref: str, head: str, number: int) -> str | None:
    """Why pull request `number` at `head` is not merged by shopfloor: it changes protected paths
    (read from git at the head, whatever pushed it). None: it may be merged. Histories recorded
    before this check skip it."""
    if not workflow.patched("protected-paths-before-merge"):
        return None
    check = await act(
        "git_protected_changes",
        ProtectedCheckInput(
            repo=run.repo,
            clone_url=clone_url,
            base_ref=base_ref,
            head_sha=head,
            number=number,
            protected_paths=list(run.policy.protected_paths),
        ),
        ProtectedCheckOutput,
        f"protected paths in PR #{number} at {head[:12]}",
        timeout_s=900,
        heartbeat_s=120,
        retry=GIT_RETRY,
    )
    return check.message or None


class MergeStage:
    def __init__(self, run: FactoryRun) -> None:
        self.run = run

    async def wait_ci(self, head: str, until: Callable[[], bool] | None = None) -> CiOutcome:
        """CI's verdict on `head`; "moved" as soon as `until()` says waiting is pointless."""
        run, s = self.run, self.run.s
        run.progress.stage("ci")
        await run.progress.show("waiting", waiting_for="ci")
        deadline = workflow.now() + timedelta(minutes=run.policy.ci_timeout_minutes)
        while True:
            seen = run.ci_events
            st = await act(
                "github_ci_status", CiStatusInput(repo=run.repo, sha=head), CiStatusOutput, f"CI status of {head[:12]}"
            )
            s.ci_state = st.state
            if st.state != "pending":
                run.progress.outcome(f"CI {st.state}" + (f": {', '.join(st.failing)}" if st.failing else ""))
                return st.state
            left = deadline - workflow.now()
            if left <= timedelta(0):
                run.progress.outcome("CI timed out")
                return "timeout"
            try:
                await workflow.wait_condition(
                    lambda seen=seen: run.ci_events > seen or bool(until and until()), timeout=min(CI_POLL, left)
                )
            except TimeoutError:
                pass
            if until is not None and until():
                return "moved"

    async def approval(self, e: RepoEvent) -> str | None:
        """The head a writer's accepted `/shopfloor approve` approves; None when it approves none
        (the maintainer gets a reply saying why and which command would approve the head)."""
        s = self.run.s
        if not workflow.patched(APPROVAL_NAMES_COMMIT_PATCH):
            return s.head_sha
        decision = decide(s.heads, s.head_sha, e.command.args if e.command else "", e.occurred_at)
        if decision.sha is None:
            workflow.logger.info("approval by %s refused: %s", safe_login(e.sender), decision.reason)
            await self._refuse_approval(e, decision.reason)
        return decision.sha

    async def _refuse_approval(self, e: RepoEvent, reason: str) -> None:
        run = self.run
        ref = str(e.comment_id) if e.comment_id is not None else re.sub(r"[^A-Za-z0-9_.-]", "", e.delivery_id)[:64]
        body = f"@{safe_login(e.sender)} `/shopfloor approve` was not applied: {reason} Nothing was merged."
        try:
            await act(
                "github_upsert_comment",
                UpsertCommentInput(
                    repo=run.repo,
                    issue_number=e.number or run.number,
                    workflow_id=workflow.info().workflow_id,
                    kind=f"approval-{ref}",
                    body=body,
                ),
                CommentOutput,
                f"refuse an approval by {safe_login(e.sender)}",
            )
        except ActivityError as exc:  # the refusal stands either way; the reply is a courtesy
            workflow.logger.warning("approval refusal not posted: %s", exc)

    def show_head(self, head: str) -> None:
        """The progress comment's approval line names `head`, the commit `/shopfloor approve <sha>` takes."""
        self.run.progress.view.approve_sha = head[:SHORT_SHA]

    async def wait_approval(self, head: str, *, force: bool = False) -> None:
        """`force`: a human must approve whatever the policy says (the review neither approved
        nor requested changes)."""
        run, s = self.run, self.run.s
        if not (force or needs_human(run.policy)) or head in s.approved_heads:
            return
        run.progress.stage("merge")
        self.show_head(head)
        await run.progress.show("waiting", waiting_for="approval")
        await workflow.wait_condition(lambda: head in s.approved_heads)

    async def merge(self, ws: WorkspaceRef, head: str, title: str, message: str) -> tuple[MergeStatus, Any]:
        run, s = self.run, self.run.s
        run.progress.stage("merge")
        await run.progress.show("running")
        up = await act(
            "git_update_from_base",
            UpdateInput(workspace=ws, base_branch=run.base_branch),
            UpdateOutput,
            f"update {s.branch} from {run.base_branch}",
            timeout_s=900,
            heartbeat_s=120,
            retry=GIT_RETRY,
        )
        if up.status == "conflicts":
            run.progress.outcome(f"conflicts with {run.base_branch}: {', '.join(up.conflicts)[:150]}")
            return "conflicts", up
        if up.status == "merged":
            run.progress.outcome(f"{run.base_branch} moved: merged it in; CI and review again")
            return "moved", up
        if s.pr_number is None:
            raise ApplicationError(
                "checking protected paths before the pull request was opened",
                type="InconsistentWorkflowState",
                non_retryable=True,
            )
        refused = await protected_changes(run, ws.clone_url or "", run.base_branch, head, s.pr_number)
        if refused:
            run.progress.outcome("merge refused: protected paths changed")
            return "blocked", refused
        try:
            out = await act(
                "github_merge_pr",
                MergePrInput(
                    repo=run.repo,
                    pr_number=s.pr_number,
                    head_sha=head,
                    method="squash",
                    title=f"{title} (#{s.pr_number})",
                    message=message,
                ),
                MergeOutput,
                f"squash-merge PR #{s.pr_number} at {head[:12]}",
            )
        except ActivityError as exc:
            if cause_type(exc) in ("GitHubHeadChanged", "GitHubNotMergeable"):
                run.progress.outcome("merge blocked")
                return "blocked", cause(exc)
            raise
        s.merged_sha = out.sha
        run.progress.outcome(f"merged as {out.sha[:12]}")
        try:
            await act(
                "github_delete_branch",
                DeleteBranchInput(repo=run.repo, branch=s.branch or ""),
                DeleteBranchOutput,
                f"delete branch {s.branch}",
            )
        except ActivityError as exc:  # a leftover branch is untidy, not a failure of the merge
            workflow.logger.warning("branch not deleted: %s", exc)
        await act(
            "github_close_issue",
            CloseIssueInput(repo=run.repo, issue_number=run.number),
            CloseIssueOutput,
            f"close issue #{run.number}",
        )
        return "merged", out
