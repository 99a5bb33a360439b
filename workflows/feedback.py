"""People's feedback for an issue run's next fix round: what a writer asks for on the run's pull
request (a changes_requested review's body, a line comment, with its file and line) or in a
`/shopfloor fix <instructions>` comment, kept for the pipeline (workflows/factory_run.py).

Who counts: only a writer (write, maintain or admin, from `permission_of`, cached like commands'),
and a review or line comment only on the run's own pull request (the number it recorded when it
found or created the PR by its branch): one routed here from any other pull request is ignored.
A non-writer's changes_requested review or line comment starts nothing and gets one reply (the
commands' refusal, keyed by the review, so a review and its line comments share it). Bots never
get here (the edge and the inbox drop them).

What is kept: references (snapshot digests) and short previews, at most FEEDBACK_KEPT items; the
goal activity reads and quotes the text. The line comments of one review arrive as separate
deliveries, in any order: `gathered` waits until none came for GATHER, so one review is one round.
Histories recorded before feedback counted replay without it (patch FEEDBACK_PATCH).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.github_text import reply_ref, safe_login
    from shopfloor.models.factory_run import FactoryState, FeedbackItem, FeedbackKind
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.workflows.commands import WRITE_LEVELS
    from shopfloor.workflows.comment_replies import reply_on_github

if TYPE_CHECKING:
    from shopfloor.workflows.issue import IssueWorkflow

FEEDBACK_PATCH = "people-feedback-drives-fix-rounds"
FEEDBACK_KEPT = 20  # items waiting for the next round; older ones give way
PREVIEW_CHARS = 120
GATHER = timedelta(seconds=5)  # no new feedback for this long: the review is complete
GATHER_MAX = 12  # waits at most, so a steady trickle of comments cannot hold the round forever
FINISHED = ("merged", "salvaged", "failed", "cancelled", "closed")
REFUSED_WHAT = "this review or line comment"


class PeopleFeedback:
    """The feedback an issue run's pipeline has not acted on yet (`state.feedback`)."""

    def __init__(self, issue_workflow: IssueWorkflow, state: FactoryState) -> None:
        self.issue_workflow = issue_workflow
        self.state = state
        self.arrived = 0  # items taken in, ever (gathering waits for this to stop growing)
        self._enabled: bool | None = None

    def enabled(self) -> bool:
        """Whether this run acts on feedback (False only when replaying a history from before)."""
        if self._enabled is None:
            self._enabled = workflow.patched(FEEDBACK_PATCH)
        return self._enabled

    def ready(self) -> bool:
        return bool(self.state.feedback)

    def asked(self) -> list[FeedbackItem]:
        """What maintainers asked for with `/shopfloor fix <text>` so far (for triage's goal)."""
        return [i for i in self.state.feedback if i.kind == "instructions"]

    def take(self) -> list[FeedbackItem]:
        """Everything waiting, for the fix round starting now."""
        items, self.state.feedback = list(self.state.feedback), []
        return items

    async def gathered(self) -> None:
        """Wait until no feedback arrived for GATHER: a review's line comments are one round."""
        for _ in range(GATHER_MAX):
            try:
                await workflow.wait_condition(
                    self._more_since(self.arrived),
                    timeout=GATHER,
                    timeout_summary="feedback: gather a review's comments",
                )
            except TimeoutError:
                return

    def _more_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self.arrived > seen

    # -- what the inbox hands over --------------------------------------------------------------

    async def on_instructions(self, e: RepoEvent) -> None:
        """An accepted `/shopfloor fix <instructions>` (the inbox checked the sender's access)."""
        if e.command is None or not e.command.args.strip() or e.text is None or not self.enabled():
            return
        self._add(e, "instructions", preview=e.command.args)

    async def on_review(self, e: RepoEvent) -> None:
        """A changes_requested review: its body is feedback when a writer wrote it on our PR."""
        if not await self._from_writer_on_our_pr(e):
            return
        if e.text is not None and e.text.chars > 0:  # a review of line comments only: they come one by one
            self._add(e, "review")

    async def on_line_comment(self, e: RepoEvent) -> None:
        if await self._from_writer_on_our_pr(e) and e.text is not None:
            self._add(e, "line_comment")

    async def _from_writer_on_our_pr(self, e: RepoEvent) -> bool:
        state = self.state
        if state.pr_number is None or e.number != state.pr_number or not self.enabled():
            # Not the pull request this run opened (or none yet): its comments are not for this run.
            workflow.logger.info("feedback from #%s ignored: not this run's pull request", e.number)
            return False
        permission = await self.issue_workflow.permission_of(e.sender)
        if permission not in WRITE_LEVELS:
            await self.issue_workflow._refuse(e, permission, feedback=REFUSED_WHAT)
            return False
        if state.result in FINISHED:
            await self._finished(e)
            return False
        return True

    def _add(self, e: RepoEvent, kind: FeedbackKind, preview: str | None = None) -> None:
        if e.text is None:
            return
        for item in self.state.feedback:  # the same review or comment once, however it came again
            if item.kind == kind and (item.comment_id, item.review_id) == (e.comment_id, e.review_id):
                return
        item = FeedbackItem(
            kind=kind,
            author=e.sender,
            digest=e.text.digest,
            preview=(preview if preview is not None else e.text.preview)[:PREVIEW_CHARS],
            path=e.path if kind == "line_comment" else None,
            line=e.line if kind == "line_comment" else None,
            review_id=e.review_id,
            comment_id=e.comment_id,
        )
        self.state.feedback = [*self.state.feedback, item][-FEEDBACK_KEPT:]
        self.arrived += 1

    async def _finished(self, e: RepoEvent) -> None:
        """One reply (per review) that the run is over: feedback starts nothing any more."""
        who = safe_login(e.sender)
        ref = reply_ref(e.review_id if e.review_id is not None else e.comment_id, e.delivery_id)
        body = (
            f"@{who} this shopfloor run is finished ({self.state.result}), so it does not act on feedback "
            "any more. Open an issue (or reopen this one) for more work."
        )
        await reply_on_github(
            self.issue_workflow.repo,
            self.issue_workflow.number,
            kind=f"finished-{ref}",
            body=body,
            summary=f"tell {who} the run is finished",
        )
