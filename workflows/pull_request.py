"""PullRequestWorkflow `pr/<owner>/<repo>/<n>`: the one run per pull request opened by a person
(DESIGN §5). For now the durable inbox (workflows/inbox.py); review and merge follow."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.factory import PullRequestInboxInput, PullRequestOutcome
    from shopfloor.models.inbox import PULL_REQUEST_WORKFLOW
    from shopfloor.workflows.inbox import GitHubInbox


@workflow.defn(name=PULL_REQUEST_WORKFLOW)
class PullRequestWorkflow(GitHubInbox):
    KIND = "pull_request"
    CLOSE_EVENT = "pull_request"  # closed, merged or not

    @workflow.init
    def __init__(self, inp: PullRequestInboxInput) -> None:
        super().__init__(inp.repo, inp.number, inp.carry)

    @workflow.run
    async def run(self, inp: PullRequestInboxInput) -> PullRequestOutcome:
        await self.serve(inp.continue_after_events, lambda carry: inp.model_copy(update={"carry": carry}))
        c = self.c
        reason = {"closed": "the pull request was closed", "stopped": f"stopped by @{c.stopped_by}",
                  "idle": "no events for 30 days"}.get(c.state, "")  # fmt: skip
        return PullRequestOutcome(
            state=c.state,
            repo=self.repo,
            number=self.number,
            events_seen=c.events_seen,
            commands_accepted=sum(r.accepted for r in c.commands),
            commands_refused=sum(not r.accepted for r in c.commands),
            stopped_by=c.stopped_by,
            reason=reason,
        )
