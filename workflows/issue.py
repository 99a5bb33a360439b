"""IssueWorkflow `issue/<owner>/<repo>/<n>`: the one run per issue that every event about it
reaches: the durable inbox (workflows/inbox.py) and, once a trigger fixed the issue's
text, the factory pipeline beside it (workflows/factory_run.py): triage → policy gate → fix → PR
→ CI → review ⇄ fix → merge.

Concurrency: the inbox's loop handles one event at a time (commands, permission checks) while the
pipeline runs as a second task of the same workflow and waits on what the events record. The
pipeline ends the inbox (state "done") when it finishes; the inbox ending first (issue closed,
`/shopfloor stop`, idle) cancels the pipeline, which still writes its final progress state.
Histories recorded before the pipeline existed replay as inbox-only runs (patch PIPELINE_PATCH).

A new run (not a continue-as-new) first reads the issue on GitHub: a closed (or deleted) issue
gets nothing. Signal-with-start starts a new run on the id of a finished one when a starting event
comes (opened, reopened, the trigger label, a command), so an old event — a captured delivery
replayed under a new delivery id days later — would otherwise triage and fix a closed issue
again. Nothing is posted then: the events are recorded as ignored, and the run ends "closed".
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.progress import ProgressView
    from shopfloor.models.factory_run import FactoryState
    from shopfloor.models.inbox import ISSUE_WORKFLOW, IssueTextInput, RepoEvent
    from shopfloor.models.inbox_state import EventRecord, IssueInboxInput, IssueOutcome
    from shopfloor.models.ledger import ADMISSION_SIGNAL, AdmissionReply
    from shopfloor.search_attributes import SHOPFLOOR_ISSUE, SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import FACTORY_ISSUE_STATE, call
    from shopfloor.workflows.factory_run import FactoryRun
    from shopfloor.workflows.inbox import EVENTS_KEPT, GitHubInbox, remember
    from shopfloor.workflows.pipeline import OnPipeline
    from shopfloor.workflows.pipeline_controls import PipelineControls
    from shopfloor.workflows.progress import ProgressComment

PIPELINE_PATCH = "issue-pipeline-v1"
PARKED_END_PATCH = "issue-parked-end-v1"
OPEN_CHECK_PATCH = "issue-new-run-reads-state"


@workflow.defn(name=ISSUE_WORKFLOW)
class IssueWorkflow(PipelineControls, GitHubInbox):
    KIND = "issue"
    CLOSE_EVENT = "issues"

    @workflow.init
    def __init__(self, inp: IssueInboxInput) -> None:
        super().__init__(inp.repo, inp.number, inp.carry)
        self.factory: FactoryRun | None = None

    # IssueInboxInput is the edge's IssueWorkflowInput plus defaulted fields the workflow
    # passes itself across continue-as-new.
    @workflow.run
    async def run(self, inp: IssueInboxInput) -> IssueOutcome:
        pipeline: asyncio.Task[None] | None = None
        if inp.carry is None and workflow.patched(OPEN_CHECK_PATCH):
            why = await self._not_open_on_github()
            if why:
                return self._nothing_to_do(why)
        if workflow.patched(PIPELINE_PATCH):
            self.factory = FactoryRun(self)
            pipeline = asyncio.create_task(self.factory.run_when_triggered())
            self.watch_work(pipeline)
        await self.serve(inp.continue_after_events, lambda carry: inp.model_copy(update={"carry": carry}))
        if pipeline is not None:
            if not pipeline.done():
                pipeline.cancel()
            try:
                await pipeline
            except asyncio.CancelledError:
                pass  # cancelled before its first step (the inbox ended in the same activation)
            # A pipeline that ended parked (a refused merge) was waiting for people; the issue is
            # closed or stopped now, so its comment must not keep asking them.
            if (
                self.factory is not None
                and self.factory.state.result == "parked"
                and workflow.patched(PARKED_END_PATCH)
            ):
                await self.factory.finish_cancelled()
        c = self.carry
        factory = self.factory.state if self.factory and self.factory.state.started else None
        return IssueOutcome(
            state=c.state,
            repo=self.repo,
            number=self.number,
            events_seen=c.events_seen,
            commands_accepted=sum(r.accepted for r in c.commands),
            commands_refused=sum(not r.accepted for r in c.commands),
            stopped_by=c.stopped_by,
            reason=_reason(c.state, c.stopped_by, factory),
            factory=factory,
        )

    # -- a new run of a closed issue --------------------------------------------------------------

    async def _not_open_on_github(self) -> str | None:
        """Why this new run must do nothing (the issue is not open on GitHub), or None."""
        try:
            # A new run waits for GitHub's answer rather than guess: a few seconds normally, at most an hour.
            st = await call(
                FACTORY_ISSUE_STATE,
                IssueTextInput(repo=self.repo, number=self.number),
                summary=f"is #{self.number} open on GitHub?",
            )
        except ActivityError as exc:
            # Unknown state: doing nothing is safe, and a later event (or the reconciler) starts it.
            workflow.logger.warning("issue %s#%s: state unreadable, nothing done: %s", self.repo, self.number, exc)
            return "the issue's state could not be read from GitHub, so nothing was started"
        if st.state == "open":
            return None
        if st.state == "missing":
            return "the issue is not on GitHub (deleted, transferred, or not visible to shopfloor)"
        return "the issue is closed on GitHub: an event about it does not start work again (reopen it first)"

    def _nothing_to_do(self, why: str) -> IssueOutcome:
        c = self.carry
        c.state = "closed"
        workflow.upsert_search_attributes(
            [
                SHOPFLOOR_REPO.value_set(self.repo),
                SHOPFLOOR_ISSUE.value_set(self.number),
                SHOPFLOOR_STAGE.value_set("closed"),
            ]
        )
        for e in self._queue:
            remember(
                c.events,
                EventRecord(
                    delivery_id=e.delivery_id,
                    event=e.event,
                    action=e.action,
                    sender=e.sender,
                    at=workflow.now(),
                    note=f"ignored: {why}",
                ),
                EVENTS_KEPT,
            )
        self._queue.clear()
        workflow.logger.info("issue %s#%s: new run ended at once: %s", self.repo, self.number, why)
        self.publish()
        return IssueOutcome(state="closed", repo=self.repo, number=self.number, reason=why)

    # -- the pipeline's view of the inbox -------------------------------------------------------

    def busy(self) -> bool:
        return self.factory is not None and self.factory.busy()

    def may_continue_as_new(self) -> bool:
        # The pipeline's state lives in this run (children, waits): only an inbox that has not
        # started one may continue as new.
        return self.factory is None or not self.factory.state.started

    def own_pull_request(self) -> int | None:
        return self.factory.state.pr_number if self.factory is not None else None  # commands from its PR only

    async def after_event(self, e: RepoEvent, note: str) -> None:
        if self.factory is not None:
            await self.factory.on_event(e, note)

    def extra_details(self) -> list[str]:
        return self.factory.progress.details() if self.factory and self.factory.state.started else []

    def progress_comment(self) -> ProgressComment | None:
        return self.factory.progress if self.factory and self.factory.state.started else None

    def controlled(self) -> OnPipeline | None:
        return self.factory  # operators' controls (workflows/pipeline_controls.py)

    # -- what operators read ----------------------------------------------------------------------

    @workflow.query(name="progress")
    def progress(self) -> ProgressView | None:
        return self.factory.progress.view if self.factory else None

    @workflow.query(name="factory")
    def factory_state(self) -> FactoryState:
        return self.factory.state if self.factory else FactoryState()

    @workflow.signal(name=ADMISSION_SIGNAL)
    def ledger_admission(self, reply: AdmissionReply) -> None:
        """The spend ledger's answer to the pipeline's request to start (workflows/ledger.py)."""
        if self.factory is not None:
            self.factory.admission.on_reply(reply)


def _reason(state: str, stopped_by: str | None, factory: FactoryState | None) -> str:
    if factory is not None and factory.result:
        return f"{factory.result}: {factory.reason}" if factory.reason else factory.result
    return {
        "closed": "the issue was closed",
        "stopped": f"stopped by @{stopped_by}",
        "idle": "no events for 30 days",
    }.get(state, "")
