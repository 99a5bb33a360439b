"""A person's pull request: review it, and merge it where the repository's policy allows
(docs/design.md, The factory workflows), run by PullRequestWorkflow beside its event inbox.

When: a head is reviewed once, automatically when `pull_requests.review` allows it (`members`:
the author has write access; `everyone`; never for drafts), and again whenever a writer comments
`/shopfloor review`. Automatic reviews are bounded by `max_review_rounds` per run; a stranger's
pull request costs nothing until a maintainer asks. Nothing is posted on a pull request
shopfloor does not review.

How: the head and base are fetched into the worker's mirror and the change (merge-base..head)
stored as a blob (`git_pull_request_change`); a review child AgentWorkflow (`<id>/review-<n>`)
reads the head in a workspace, may run the tests, and returns a verdict that is posted as a
COMMENT review (the verdict lives in the workflow: a bot's APPROVE would count towards branch
protection's required approvals, which must stay with people).

Merge (only with `pull_requests.merge: true`): CI green on the head, shopfloor's own verdict
`approve` on that head, and the approval policy met — a writer other than the author approving
that head (an APPROVED review or `/shopfloor approve`). A new push resets all three. A
`/shopfloor approve` names a commit — the sha it spells, or the head at the comment's created_at
(the run records each head with the time GitHub says the pull request was updated to it) — and is
refused with a reply when that is not the current head (workflows/merge_stage.py). The merge is
a squash with the head-SHA guard; the author's branch is left alone.

The progress comment follows the issue pipeline's rules (one, updated in place, ending in a final
state), but only once a review started: until then the run is silent on GitHub.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import record_head
    from shopfloor.agents.outputs import ReviewResult
    from shopfloor.agents.policy import within_operator_bounds
    from shopfloor.agents.progress import ProgressView
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.factory_run import GoalInput, PipelineResult, RepoInfoInput
    from shopfloor.models.github_ops import CiStatusInput, CiStatusOutput
    from shopfloor.models.github_reads import PolicyInput
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.models.pull_request_review import PullChangeInput, PullInfo, PullInput, PullReviewCarry
    from shopfloor.search_attributes import SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import (
        FACTORY_CONFIG,
        FACTORY_REPO_INFO,
        GIT_PULL_REQUEST_CHANGE,
        GITHUB_CI_STATUS,
        GITHUB_GET_PULL,
        GITHUB_LOAD_POLICY,
        call,
        failure_message,
    )
    from shopfloor.workflows.admission import Admission
    from shopfloor.workflows.commands import WRITE_LEVELS
    from shopfloor.workflows.factory_agents import goal_images, post_review, render_goal, run_agent
    from shopfloor.workflows.inbox import CI_EVENTS
    from shopfloor.workflows.merge_stage import approved_head, merge_pull_request, wait_approval, wait_ci
    from shopfloor.workflows.pipeline import (
        Final,
        Merged,
        MergeRefused,
        OnPipeline,
        PipelineContext,
        ProtectedPathsChanged,
    )
    from shopfloor.workflows.progress import ProgressComment
    from shopfloor.workflows.repo_profile import REPO_PROFILE_PATCH, WORKSPACE_SETUP_PATCH, read_profile
    from shopfloor.workflows.workspace_setup import prepare_environment

if TYPE_CHECKING:
    from shopfloor.workflows.pull_request import PullRequestWorkflow

ASKED = "asked by a maintainer"


@dataclass(frozen=True)
class ReviewDecision:
    """Whether this head is reviewed now: `why` it is, or (None) `why_not`."""

    why: str | None
    why_not: str = ""


class PullRequestReview(OnPipeline):
    """A pull request's review run, as a task beside the PullRequestWorkflow's inbox."""

    def __init__(self, pull_request_workflow: PullRequestWorkflow, carry: PullReviewCarry | None) -> None:
        carried = carry or PullReviewCarry()
        self.pull_request_workflow = pull_request_workflow
        self.repo, self.number = pull_request_workflow.repo, pull_request_workflow.number
        progress = ProgressComment(
            workflow.info().workflow_id,
            pull_request_workflow.repo,
            pull_request_workflow.number,
            carried.state,
            pull_request_workflow.publish,
        )
        progress.view = ProgressView.model_validate(carried.view) if carried.view else progress.view
        progress.view.subject = "pull_request"
        self.ctx = PipelineContext(repo=self.repo, number=self.number, state=carried.state, progress=progress)
        self.admission = Admission(self.repo)  # the review under way's place in the spend ledger
        self.review_requests, self.reviewed_head = carried.review_requests, carried.reviewed_head
        self.auto_reviews, self.author_permission = carried.auto_reviews, carried.author_permission
        # Events that may change what to do next; one carried over is served first.
        self.wakes = 1 if carried.woken else 0
        self.served = 0  # `wakes` when the run last went back to waiting, every one of them served
        self.serving = True  # False once the run ended (or this deployment runs no reviews)
        self.in_step = False  # reviewing or merging: no continue-as-new, no idle timeout
        self.clone_url = ""
        self.author = ""
        self.default_head: str | None = None  # the default branch's head when the policy was read

    # -- what the inbox tells us ---------------------------------------------------------------

    def busy(self) -> bool:
        return self.in_step

    def carry(self) -> PullReviewCarry:
        return PullReviewCarry(
            state=self.state,
            view=self.progress.view.model_dump(mode="json"),
            review_requests=self.review_requests,
            reviewed_head=self.reviewed_head,
            auto_reviews=self.auto_reviews,
            author_permission=self.author_permission,
            woken=self.serving and self.wakes > self.served,
        )

    async def on_event(self, e: RepoEvent, note: str) -> None:
        state = self.state
        if e.event == "pull_request" and e.head_sha:  # the head, there by GitHub's updated_at at the latest
            record_head(state.heads, e.head_sha, e.occurred_at or workflow.now())
        if e.event in CI_EVENTS:
            self.ctx.ci_events += 1
        elif e.command is not None and note.endswith(" accepted"):
            if e.command.name == "review":
                self.review_requests += 1
            elif e.command.name == "approve":
                self._approve(e.sender, await approved_head(self.ctx, e))  # None: refused with a reply
        elif e.event == "pull_request" and e.head_sha and e.head_sha != state.head_sha:
            state.head_sha, state.ci_state = e.head_sha, None  # a push: approvals and the verdict named the old head
        elif e.event == "pull_request_review" and (e.state or "").lower() == "approved" and e.head_sha:
            if await self.pull_request_workflow.permission_of(e.sender) in WRITE_LEVELS:
                self._approve(e.sender, e.head_sha)
        self.wakes += 1

    def _approve(self, sender: str, head: str | None) -> None:
        # The author approving their own change is not the second pair of eyes the policy asks for.
        approved = self.state.approved_heads
        if head and sender.lower() != self.author.lower() and head not in approved:
            approved.append(head)
            del approved[:-20]

    # -- the run -------------------------------------------------------------------------------

    async def run_when_asked(self) -> None:
        inbox = self.pull_request_workflow.carry  # what the inbox keeps: commands, its state
        try:
            await workflow.wait_condition(lambda: self.wakes > 0 or self.state.started)
            self.ctx.config = await call(FACTORY_CONFIG, None, summary="factory settings")
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not is_cancelled_exception(exc):
                raise
            return
        if not self.ctx.config.pipeline:
            self.serving = False
            return  # this deployment runs pull request workflows as inboxes only
        self.state.started = True
        try:
            await self._loop()
        except asyncio.CancelledError:
            await self._cancelled()
        except Final as f:
            await self._final(f.result, f.reason)
        except (ActivityError, ChildWorkflowError, ApplicationError, ValidationError) as exc:
            if is_cancelled_exception(exc):
                await self._cancelled()
            else:
                await self._final("failed", failure_message(exc))
        self.serving = False
        if inbox.state == "received":
            inbox.state = "done"

    async def _loop(self) -> None:
        ctx, state, n = self.ctx, self.state, self.number
        info = await call(FACTORY_REPO_INFO, RepoInfoInput(repo=self.repo), summary=f"repository {self.repo}")
        self.clone_url = info.clone_url
        ctx.progress.links(workflow_url=ctx.config.workflow_url(workflow.info().workflow_id))
        while True:
            mark = self.wakes
            pull = await call(GITHUB_GET_PULL, PullInput(repo=self.repo, number=n), summary=f"read PR #{n}")
            if pull.state == "closed":
                raise Final(
                    "closed",
                    "the pull request was merged by a person" if pull.merged else "the pull request was closed",
                )
            self.author, ctx.base_branch = pull.author, pull.base_ref
            if pull.head_sha != state.head_sha:
                state.head_sha, state.ci_state = pull.head_sha, None
            record_head(state.heads, pull.head_sha, workflow.now())
            state.pr_number, state.pr_url = n, pull.html_url or None
            ctx.progress.links(pr_url=pull.html_url or None)
            load = await call(GITHUB_LOAD_POLICY, PolicyInput(repo=self.repo), summary=f"policy of {self.repo}")
            load = within_operator_bounds(load, ctx.config.repo_models)
            ctx.progress.view.problems = list(load.errors)  # each one on the comment, whole
            ctx.policy = load.policy
            self.default_head = load.commit or info.head_sha  # the profile's commit, never the PR's head
            decision = await self._decide_review(pull)
            view = ctx.progress.view
            if decision.why is None and view.updated_at is None:
                state.waiting_for = "review_command"  # silent on GitHub: the `factory` query says it
            elif decision.why is None and pull.head_sha != self.reviewed_head and view.reason != decision.why_not:
                # A new head this run will not review by itself: the comment says why, once.
                await ctx.progress.show("waiting", waiting_for="review_command", reason=decision.why_not)
            if decision.why is not None and not load.ok:
                self.review_requests = 0
                await ctx.progress.show("parked", waiting_for="policy", reason="; ".join(load.errors))
            elif decision.why is not None:
                await self._review(pull, decision.why)
                if (
                    ctx.policy.pull_requests.merge
                    and state.verdict == "approve"
                    and state.verdict_head == pull.head_sha
                ):
                    await self._merge(pull)
                elif ctx.progress.view.state != "waiting":
                    await ctx.progress.show("waiting", waiting_for="push")

            def woken(mark: int = mark) -> bool:  # an event since this pass read the pull request
                return self.wakes > mark

            self.served = mark
            await workflow.wait_condition(woken)

    async def _decide_review(self, pull: PullInfo) -> ReviewDecision:
        """Whether this head is reviewed now, and why (or why not)."""
        if self.review_requests:
            return ReviewDecision(ASKED)
        mode = self.policy.pull_requests.review
        if pull.head_sha == self.reviewed_head:
            return ReviewDecision(None, f"{pull.head_sha[:12]} was reviewed")
        if pull.draft:
            return ReviewDecision(None, "a draft is reviewed once it is ready, or on request")
        if mode == "on_request":
            return ReviewDecision(None, "the policy reviews pull requests on request only")
        if self.auto_reviews >= self.policy.max_review_rounds:
            return ReviewDecision(None, f"the {self.auto_reviews} automatic reviews of this run are used up")
        if mode == "members":
            if self.author_permission is None or self.author_permission == "unknown":
                self.author_permission = await self.pull_request_workflow.permission_of(pull.author)
            if self.author_permission not in WRITE_LEVELS:
                return ReviewDecision(None, "its author is not a member")
            return ReviewDecision(f"opened by @{pull.author}, a member")
        return ReviewDecision("the policy reviews every pull request")

    async def _review(self, pull: PullInfo, why: str) -> None:
        ctx, state, head = self.ctx, self.state, pull.head_sha
        self.in_step = True
        # Each review is a run of its own in the spend ledger: asked for, waited for, counted.
        self.admission = ctx.admission = Admission(self.repo, f"review-{state.review_round + 1}", state.cost_usd)
        try:
            if why != ASKED:
                self.auto_reviews += 1
            self.review_requests, self.reviewed_head = 0, head
            state.review_round += 1
            await self.admission.admit(ctx.config, ctx.policy, ctx.progress)
            ctx.progress.stage("review", "review")
            await ctx.progress.show("running")
            change = await call(
                GIT_PULL_REQUEST_CHANGE,
                PullChangeInput(
                    repo=self.repo, number=self.number, clone_url=self.clone_url, base_ref=pull.base_ref, head_sha=head
                ),
                summary=f"fetch PR #{self.number} at {head[:12]}",
            )
            ci = await call(
                GITHUB_CI_STATUS, CiStatusInput(repo=self.repo, sha=head), summary=f"CI status of {head[:12]}"
            )
            state.ci_state = ci.state
            if workflow.patched(REPO_PROFILE_PATCH) and self.default_head:
                # The reviewer's instructions come from the default branch: a pull request that
                # edits AGENTS.md does not change what its own review agent is told.
                base = WorkspaceRef(repo=self.repo, clone_url=self.clone_url, base_sha=self.default_head)
                ctx.profile = await read_profile(ctx, base)
            workspace = change.workspace  # the pull request's head
            if workflow.patched(WORKSPACE_SETUP_PATCH):
                # The head, prepared by the default branch's setup commands (the PR's own are not run).
                workspace = await prepare_environment(ctx, workspace)
            goal = await render_goal(
                GoalInput(
                    kind="pr_review",
                    repo=self.repo,
                    number=self.number,
                    issue_digest=pull.text.digest if pull.text else None,
                    title=pull.title,
                    round=state.review_round,
                    patch_digest=change.diff_digest,
                    pr_number=self.number,
                    ci_summary=_ci_summary(ci, head),
                    base_branch=pull.base_ref,
                    author=pull.author,
                    images=goal_images(),
                )
            )
            res = await run_agent(
                ctx, "review", f"review-{state.review_round}", "review", goal, workspace, state.review_round
            )
            if self.pull_request_workflow.carry.state != "received":
                # Stopped or cancelled while the agent ran: the agent ended with it (the cancel this
                # task got went to the child), so the run ends here too.
                raise asyncio.CancelledError
            if res.state != "completed" or res.output is None:
                await ctx.progress.show(
                    "waiting",
                    waiting_for="review_command",
                    reason=f"review {state.review_round} ended {res.state}: {res.reason or 'no result'}",
                )
                return
            review = ReviewResult.model_validate(res.output)
            await post_review(ctx, review, head)
            state.verdict, state.verdict_head = review.verdict, head
            ctx.progress.outcome(f"verdict: {review.verdict} ({why})")
        finally:
            self.in_step = False
            await self.admission.report(state.cost_usd, final=True)  # its slot in the ledger is free
            ctx.admission = None

    async def _merge(self, pull: PullInfo) -> None:
        ctx, state, head, n = self.ctx, self.state, pull.head_sha, self.number
        self.in_step = True
        try:

            def moved() -> bool:
                return state.head_sha != head or self.review_requests > 0

            outcome = await wait_ci(ctx, head, until=moved)
            if outcome != "success":
                reason = None if outcome == "moved" else f"CI {outcome} on {head[:12]}"
                await ctx.progress.show("waiting", waiting_for="push", reason=reason)
                return
            if not await wait_approval(ctx, head, until=moved):
                return
            ctx.progress.stage("merge")
            await ctx.progress.show("running")
            # A person may change protected paths in their pull request; shopfloor leaves merging it to people.
            match await merge_pull_request(ctx, self.clone_url, head, f"{pull.title} (#{n})"[:250]):
                case ProtectedPathsChanged(reason):
                    ctx.progress.outcome("not merged: protected paths changed")
                    await ctx.progress.show(
                        "waiting", waiting_for="a maintainer to merge or close the pull request", reason=reason
                    )
                case MergeRefused(reason):
                    ctx.progress.outcome("merge refused")
                    await ctx.progress.show("waiting", waiting_for="push", reason=f"the merge was refused: {reason}")
                case Merged(sha):
                    raise Final("merged", f"merged as {sha}")
        finally:
            self.in_step = False

    # -- endings ---------------------------------------------------------------------------------

    async def _cancelled(self) -> None:
        inbox = self.pull_request_workflow.carry
        if inbox.state == "closed":
            await self._final("closed", "the pull request was closed")
        else:
            ended_by = {"stopped": f"stopped by @{inbox.stopped_by}", "idle": "no events for 30 days"}
            await self._final("cancelled", ended_by.get(inbox.state, inbox.state))

    async def _final(self, result: PipelineResult, reason: str) -> None:
        state = self.state
        state.result, state.reason = result, reason
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set("done")])
        if self.progress.view.updated_at is None:
            return  # nothing was ever posted on this pull request: nothing to close on GitHub
        if result in ("merged", "closed"):
            self.progress.stage("done")
        await self.progress.show(result, reason=None if result == "merged" else reason)


def _ci_summary(ci: CiStatusOutput, head: str) -> str:
    if ci.state == "success":
        return f"CI passed on {head[:12]}."
    if ci.state == "failure":
        return f"CI failed on {head[:12]}: {', '.join(ci.failing)[:300]}."
    return f"CI has not finished on {head[:12]}" + ("." if ci.total else " (no checks reported yet).")
