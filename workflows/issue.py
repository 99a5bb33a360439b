"""IssueWorkflow `issue/<owner>/<repo>/<n>`: the one run per issue that every event about it
reaches (DESIGN §5). For now it is the durable inbox (workflows/inbox.py); the triage → fix →
review → merge stages follow "received"."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.factory import IssueInboxInput, IssueOutcome
    from shopfloor.models.inbox import ISSUE_WORKFLOW
    from shopfloor.workflows.inbox import GitHubInbox


@workflow.defn(name=ISSUE_WORKFLOW)
class IssueWorkflow(GitHubInbox):
    KIND = "issue"
    CLOSE_EVENT = "issues"

    @workflow.init
    def __init__(self, inp: IssueInboxInput) -> None:
        super().__init__(inp.repo, inp.number, inp.carry)

    # IssueInboxInput is the edge's IssueWorkflowInput plus defaulted fields the workflow
    # passes itself across continue-as-new.
    @workflow.run
    async def run(self, inp: IssueInboxInput) -> IssueOutcome:
        await self.serve(inp.continue_after_events, lambda carry: inp.model_copy(update={"carry": carry}))
        c = self.c
        return IssueOutcome(
            state=c.state,
            repo=self.repo,
            number=self.number,
            events_seen=c.events_seen,
            commands_accepted=sum(r.accepted for r in c.commands),
            commands_refused=sum(not r.accepted for r in c.commands),
            stopped_by=c.stopped_by,
            reason=_reason(c.state, c.stopped_by),
        )


def _reason(state: str, stopped_by: str | None) -> str:
    return {
        "closed": "the issue was closed",
        "stopped": f"stopped by @{stopped_by}",
        "idle": "no events for 30 days",
    }.get(state, "")
