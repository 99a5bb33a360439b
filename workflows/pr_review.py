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
from typing import TYPE_CHECKING

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.approvals import record_head
    from shopfloor.agents.outputs import ReviewResult
    from shopfloor.agents.policy import PolicyLoad, RepoPolicy
    from shopfloor.agents.progress import ProgressView
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.factory_run import FactoryState, GoalInput, RepoInfo, RepoInfoInput
    from shopfloor.models.github_ops import CiStatusInput, CiStatusOutput, MergeOutput, MergePrInput
    from shopfloor.models.github_reads import PolicyInput
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.models.pull_request_review import PullChange, PullChangeInput, PullInfo, PullInput, PullReviewCarry
    from shopfloor.search_attributes import SHOPFLOOR_STAGE
    from shopfloor.workflows.commands import WRITE_LEVELS
    from shopfloor.workflows.factory_agents import AgentStages
    from shopfloor.workflows.factory_calls import GIT_RETRY, act, cause, cause_type
    from shopfloor.workflows.inbox import CI_EVENTS
    from shopfloor.workflows.merge_stage import MergeStage, needs_human, protected_changes
    from shopfloor.workflows.progress import ProgressComment

if TYPE_CHECKING:
    from shopfloor.workflows.pull_request import PullRequestWorkflow


class Final(Exception):
    def __init__(self, result: str, reason: str) -> None:
        super().__init__(reason)
        self.result, self.reason = result, reason


class PullRequestReview:
    def __init__(self, wf: PullRequestWorkflow, carry: PullReviewCarry | None) -> None:
        k = carry or PullReviewCarry()
        self.wf, self.repo, self.number = wf, wf.repo, wf.number
        self.s: FactoryState = k.state
        self.progress = ProgressComment(workflow.info().workflow_id, wf.repo, wf.number, self.s, wf.publish)
        self.progress.view = ProgressView.model_validate(k.view) if k.view else self.progress.view
        self.progress.view.subject = "pull_request"
        self.agents, self.merging = AgentStages(self), MergeStage(self)
        self.review_requests, self.reviewed_head = k.review_requests, k.reviewed_head
        self.auto_reviews, self.author_permission = k.auto_reviews, k.author_permission
        self.ci_events = 0
        self.wakes = 0  # events that may change what to do next
        self.in_step = False  # reviewing or merging: no continue-as-new, no idle timeout
        self.config = FactoryConfig()
        self.policy = RepoPolicy()
        self.base_branch = "main"
        self.clone_url = ""
        self.author = ""

    # -- what the inbox tells us ---------------------------------------------------------------

    def busy(self) -> bool:
        return self.in_step

    def carry(self) -> PullReviewCarry:
        return PullReviewCarry(
            state=self.s,
            view=self.progress.view.model_dump(mode="json"),
            review_requests=self.review_requests,
            reviewed_head=self.reviewed_head,
            auto_reviews=self.auto_reviews,
            author_permission=self.author_permission,
        )

    async def on_event(self, e: RepoEvent, note: str) -> None:
        s = self.s
        if e.event == "pull_request" and e.head_sha:  # the head, there by GitHub's updated_at at the latest
            record_head(s.heads, e.head_sha, e.occurred_at or workflow.now())
        if e.event in CI_EVENTS:
            self.ci_events += 1
        elif e.command is not None and note.endswith(" accepted"):
            if e.command.name == "review":
                self.review_requests += 1
            elif e.command.name == "approve":
                self._approve(e.sender, await self.merging.approval(e))  # None: refused with a reply
        elif e.event == "pull_request" and e.head_sha and e.head_sha != s.head_sha:
            s.head_sha, s.ci_state = e.head_sha, None  # a push: approvals and the verdict named the old head
        elif e.event == "pull_request_review" and (e.state or "").lower() == "approved" and e.head_sha:
            if await self.wf.permission_of(e.sender) in WRITE_LEVELS:
                self._approve(e.sender, e.head_sha)
        self.wakes += 1

    def _approve(self, sender: str, head: str | None) -> None:
        # The author approving their own change is not the second pair of eyes the policy asks for.
        if head and sender.lower() != self.author.lower() and head not in self.s.approved_heads:
            self.s.approved_heads.append(head)
            del self.s.approved_heads[:-20]

    # -- the run -------------------------------------------------------------------------------

    async def run_when_asked(self) -> None:
        c = self.wf.c
        try:
            await workflow.wait_condition(lambda: self.wakes > 0 or self.s.started)
            self.config = await act("factory_config", None, FactoryConfig, "factory settings")
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not is_cancelled_exception(exc):
                raise
            return
        if not self.config.pipeline:
            return  # this deployment runs pull request workflows as inboxes only
        self.s.started = True
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
                await self._final("failed", cause(exc))
        if c.state == "received":
            c.state = "done"

    async def _loop(self) -> None:
        s, n = self.s, self.number
        info = await act("factory_repo_info", RepoInfoInput(repo=self.repo), RepoInfo, f"repository {self.repo}")
        self.clone_url = info.clone_url
        self.progress.links(workflow_url=self.config.workflow_url(workflow.info().workflow_id))
        while True:
            mark = self.wakes
            pull = await act("github_get_pull", PullInput(repo=self.repo, number=n), PullInfo, f"read PR #{n}")
            if pull.state == "closed":
                raise Final(
                    "closed",
                    "the pull request was merged by a person" if pull.merged else "the pull request was closed",
                )
            self.author, self.base_branch = pull.author, pull.base_ref
            if pull.head_sha != s.head_sha:
                s.head_sha, s.ci_state = pull.head_sha, None
            record_head(s.heads, pull.head_sha, workflow.now())
            s.pr_number, s.pr_url = n, pull.html_url or None
            self.progress.links(pr_url=pull.html_url or None)
            load = await act("github_load_policy", PolicyInput(repo=self.repo), PolicyLoad, f"policy of {self.repo}")
            self.policy = load.policy
            why, why_not = await self._why_review(pull)
            if why is None and self.progress.view.updated_at is None:
                s.waiting_for = "review_command"  # silent on GitHub: the `factory` query says it
            elif why is None and pull.head_sha != self.reviewed_head and self.progress.view.reason != why_not:
                # A new head this run will not review by itself: the comment says why, once.
                await self.progress.show("waiting", waiting_for="review_command", reason=why_not)
            if why is not None and not load.ok:
                self.review_requests = 0
                await self.progress.show("parked", waiting_for="policy", reason="; ".join(load.errors))
            elif why is not None:
                await self._review(pull, why)
                if self.policy.pull_requests.merge and s.verdict == "approve" and s.verdict_head == pull.head_sha:
                    await self._merge(pull)
                elif self.progress.view.state != "waiting":
                    await self.progress.show("waiting", waiting_for="push")
            await workflow.wait_condition(lambda mark=mark: self.wakes > mark)

    async def _why_review(self, pull: PullInfo) -> tuple[str | None, str]:
        """(why this head is reviewed now, or None; and if not, why not)."""
        if self.review_requests:
            return "asked by a maintainer", ""
        mode = self.policy.pull_requests.review
        if pull.head_sha == self.reviewed_head:
            return None, f"{pull.head_sha[:12]} was reviewed"
        if pull.draft:
            return None, "a draft is reviewed once it is ready, or on request"
        if mode == "on_request":
            return None, "the policy reviews pull requests on request only"
        if self.auto_reviews >= self.policy.max_review_rounds:
            return None, f"the {self.auto_reviews} automatic reviews of this run are used up"
        if mode == "members":
            if self.author_permission is None or self.author_permission == "unknown":
                self.author_permission = await self.wf.permission_of(pull.author)
            if self.author_permission not in WRITE_LEVELS:
                return None, "its author is not a member"
            return f"opened by @{pull.author}, a member", ""
        return "the policy reviews every pull request", ""

    async def _review(self, pull: PullInfo, why: str) -> None:
        s, head = self.s, pull.head_sha
        self.in_step = True
        try:
            if why != "asked by a maintainer":
                self.auto_reviews += 1
            self.review_requests, self.reviewed_head = 0, head
            s.review_round += 1
            self.progress.stage("review", "review")
            await self.progress.show("running")
            change = await act(
                "git_pull_request_change",
                PullChangeInput(
                    repo=self.repo, number=self.number, clone_url=self.clone_url, base_ref=pull.base_ref, head_sha=head
                ),
                PullChange,
                f"fetch PR #{self.number} at {head[:12]}",
                timeout_s=900,
                heartbeat_s=120,
                retry=GIT_RETRY,
            )
            ci = await act(
                "github_ci_status", CiStatusInput(repo=self.repo, sha=head), CiStatusOutput, f"CI status of {head[:12]}"
            )
            s.ci_state = ci.state
            goal = await self.agents.goal(
                GoalInput(
                    kind="pr_review",
                    repo=self.repo,
                    number=self.number,
                    issue_digest=pull.text.digest if pull.text else None,
                    title=pull.title,
                    round=s.review_round,
                    patch_digest=change.diff_digest,
                    pr_number=self.number,
                    ci_summary=_ci_summary(ci, head),
                    base_branch=pull.base_ref,
                    author=pull.author,
                )
            )
            res = await self.agents.agent(
                "review", f"review-{s.review_round}", "review", goal, change.workspace, s.review_round
            )
            if res.state != "completed" or res.output is None:
                await self.progress.show(
                    "waiting",
                    waiting_for="review_command",
                    reason=f"review {s.review_round} ended {res.state}: {res.reason or 'no result'}",
                )
                return
            review = ReviewResult.model_validate(res.output)
            await self.agents.post_review(review, head)
            s.verdict, s.verdict_head = review.verdict, head
            self.progress.outcome(f"verdict: {review.verdict} ({why})")
        finally:
            self.in_step = False

    async def _merge(self, pull: PullInfo) -> None:
        s, head, n = self.s, pull.head_sha, self.number
        self.in_step = True
        try:

            def moved() -> bool:
                return s.head_sha != head or self.review_requests > 0

            outcome = await self.merging.wait_ci(head, until=moved)
            if outcome != "success":
                reason = None if outcome == "moved" else f"CI {outcome} on {head[:12]}"
                await self.progress.show("waiting", waiting_for="push", reason=reason)
                return
            if needs_human(self.policy) and head not in s.approved_heads:
                self.progress.stage("merge")
                self.merging.show_head(head)
                await self.progress.show("waiting", waiting_for="approval")
                await workflow.wait_condition(lambda: head in s.approved_heads or moved())
                if moved():
                    return
            self.progress.stage("merge")
            await self.progress.show("running")
            # A person may change protected paths in their pull request; shopfloor leaves merging it to people.
            refused = await protected_changes(self, self.clone_url, pull.base_ref, head, n)
            if refused:
                self.progress.outcome("not merged: protected paths changed")
                await self.progress.show(
                    "waiting", waiting_for="a maintainer to merge or close the pull request", reason=refused
                )
                return
            try:
                out = await act(
                    "github_merge_pr",
                    MergePrInput(
                        repo=self.repo, pr_number=n, head_sha=head, method="squash", title=f"{pull.title} (#{n})"[:250]
                    ),
                    MergeOutput,
                    f"squash-merge PR #{n} at {head[:12]}",
                )
            except ActivityError as exc:
                if cause_type(exc) not in ("GitHubHeadChanged", "GitHubNotMergeable"):
                    raise
                self.progress.outcome("merge refused")
                await self.progress.show("waiting", waiting_for="push", reason=f"the merge was refused: {cause(exc)}")
                return
            s.merged_sha = out.sha
            self.progress.outcome(f"merged as {out.sha[:12]}")
            raise Final("merged", f"merged as {out.sha}")
        finally:
            self.in_step = False

    # -- endings ---------------------------------------------------------------------------------

    async def _cancelled(self) -> None:
        c = self.wf.c
        if c.state == "closed":
            await self._final("closed", "the pull request was closed")
        else:
            why = {"stopped": f"stopped by @{c.stopped_by}", "idle": "no events for 30 days"}.get(c.state, c.state)
            await self._final("cancelled", why)

    async def _final(self, result: str, reason: str) -> None:
        s = self.s
        s.result, s.reason = result, reason  # type: ignore[assignment]
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
