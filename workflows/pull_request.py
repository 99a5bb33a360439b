"""PullRequestWorkflow `pr/<owner>/<repo>/<n>`: the one run per pull request opened by a person
(docs/design.md, The factory workflows): the durable inbox (workflows/inbox.py) and, beside it, the
review run (workflows/pr_review.py): review, and merge where the repository's policy allows.

Like IssueWorkflow, the inbox handles events one at a time while the review run is a second task
of the same workflow. Unlike an issue's pipeline, a review run has no natural end before the pull
request closes, so it is carried across continue-as-new between reviews (PullReviewCarry).
Histories recorded before the review run existed replay as inbox-only runs (REVIEW_PATCH).
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.progress import ProgressView
    from shopfloor.models.factory_run import FactoryState
    from shopfloor.models.inbox import PULL_REQUEST_WORKFLOW, RepoEvent
    from shopfloor.models.inbox_state import PullRequestInboxInput, PullRequestOutcome
    from shopfloor.models.ledger import ADMISSION_SIGNAL, AdmissionReply
    from shopfloor.workflows.inbox import GitHubInbox
    from shopfloor.workflows.pipeline import OnPipeline
    from shopfloor.workflows.pipeline_controls import PipelineControls
    from shopfloor.workflows.pr_review import PullRequestReview
    from shopfloor.workflows.progress import ProgressComment

REVIEW_PATCH = "pr-review-v1"


@workflow.defn(name=PULL_REQUEST_WORKFLOW)
class PullRequestWorkflow(PipelineControls, GitHubInbox):
    KIND = "pull_request"
    CLOSE_EVENT = "pull_request"  # closed, merged or not

    @workflow.init
    def __init__(self, inp: PullRequestInboxInput) -> None:
        super().__init__(inp.repo, inp.number, inp.carry)
        self.review: PullRequestReview | None = None
        self._review_carry = inp.review

    @workflow.run
    async def run(self, inp: PullRequestInboxInput) -> PullRequestOutcome:
        task: asyncio.Task[None] | None = None
        if workflow.patched(REVIEW_PATCH):
            self.review = PullRequestReview(self, self._review_carry)
            task = asyncio.create_task(self.review.run_when_asked())
            self.watch_work(task)
        await self.serve(inp.continue_after_events, self._next_input(inp))
        if task is not None:
            if not task.done():
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass  # cancelled before its first step
        c = self.carry
        review = self.review.state if self.review and self.review.state.started else None
        reason = {
            "closed": "the pull request was closed",
            "stopped": f"stopped by @{c.stopped_by}",
            "idle": "no events for 30 days",
        }.get(c.state, "")
        if review is not None and review.result:
            reason = f"{review.result}: {review.reason}" if review.reason else review.result
        return PullRequestOutcome(
            state=c.state,
            repo=self.repo,
            number=self.number,
            events_seen=c.events_seen,
            commands_accepted=sum(r.accepted for r in c.commands),
            commands_refused=sum(not r.accepted for r in c.commands),
            stopped_by=c.stopped_by,
            reason=reason,
            factory=review,
        )

    def _next_input(self, inp: PullRequestInboxInput):  # noqa: ANN202 - a closure over inp
        return lambda carry: inp.model_copy(
            update={"carry": carry, "review": self.review.carry() if self.review else None}
        )

    # -- the review run's view of the inbox ----------------------------------------------------

    def busy(self) -> bool:
        return self.review is not None and self.review.busy()

    async def after_event(self, e: RepoEvent, note: str) -> None:
        if self.review is not None:
            await self.review.on_event(e, note)

    def extra_details(self) -> list[str]:
        return self.review.progress.details() if self.review and self.review.state.started else []

    def progress_comment(self) -> ProgressComment | None:
        return self.review.progress if self.review and self.review.state.started else None

    def controlled(self) -> OnPipeline | None:
        return self.review  # operators' controls (workflows/pipeline_controls.py)

    # -- what operators read ----------------------------------------------------------------------

    @workflow.query(name="progress")
    def progress(self) -> ProgressView | None:
        return self.review.progress.view if self.review else None

    @workflow.query(name="factory")
    def factory_state(self) -> FactoryState:
        return self.review.state if self.review else FactoryState()

    @workflow.signal(name=ADMISSION_SIGNAL)
    def ledger_admission(self, reply: AdmissionReply) -> None:
        """The spend ledger's answer to a review's request to start (workflows/ledger.py)."""
        if self.review is not None:
            self.review.admission.on_reply(reply)
