"""Tool calls an issue's or a pull request's agent runs wait on an operator for: kept as the agent
runs signal them, shown on the progress comment and by the `waiting_calls` query, and answered
by a maintainer's `/shopfloor approve-call <id>` / `reject-call <id>`, forwarded to the agent run.

An agent run (workflows/controls.py) signals `call_wait` when a wait starts and again when it
ends. The notices are keyed (agent run, step, call id), so a repeated or late one changes nothing:
a start after its end stays ended. The waits live in the inbox's carry, which continue-as-new
keeps. A command is checked for write access before it gets here (workflows/commands.py); one
that names no waiting call gets one reply (upserted per comment, so a redelivery never posts
twice) and does nothing else.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.call_waits import answer_id, parse_answer
    from shopfloor.agents.github_text import reply_ref, safe_login
    from shopfloor.agents.progress import MAX_WAITING_CALLS
    from shopfloor.models.call_waits import (
        ANSWER_CALL_SIGNAL,
        CALL_WAIT_SIGNAL,
        WAITING_CALLS_QUERY,
        CallAnswer,
        CallWait,
        CallWaitNotice,
        EndedWait,
    )
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.models.inbox_state import InboxCarry
    from shopfloor.workflows.comment_replies import reply_on_github
    from shopfloor.workflows.progress import ProgressComment

# Histories recorded before a shown wait waited for the live view to stop upsert it at once.
WAITS_AFTER_LIVE_VIEW_PATCH = "waits-after-live-view"
ENDED_KEPT = 50
_ENDED = {
    "approved": "approved already",
    "rejected": "rejected already",
    "timed out": "refused when nobody answered in time",
    "cancelled": "refused when its run was cancelled",
}


class CallWaits:
    carry: InboxCarry
    repo: str
    number: int
    waits_changed: bool = False  # the progress comment does not show the waits as they are yet

    def progress_comment(self) -> ProgressComment | None:
        """The run's progress comment, once its pipeline (or review) has one."""
        return None

    # -- what the agent runs send -----------------------------------------------------------------

    @workflow.signal(name=CALL_WAIT_SIGNAL)
    def call_wait(self, notice: CallWaitNotice) -> None:
        w, c = notice.wait, self.carry
        if not w.workflow_id.startswith(f"{workflow.info().workflow_id}/"):
            workflow.logger.warning("call_wait from %s ignored: not an agent run of this run", w.workflow_id)
            return
        ended = next((e for e in c.call_waits_ended if e.key == w.key), None)
        if notice.ended is None:
            if ended is not None or any(x.key == w.key for x in c.call_waits):
                return  # its end came first, or a repeat
            c.call_waits = [*c.call_waits, w][-MAX_WAITING_CALLS:]
        else:
            c.call_waits = [x for x in c.call_waits if x.key != w.key]
            if ended is not None:
                ended.ended = notice.ended  # the agent run's word on how it ended is the last one
            else:
                self._remember_end(EndedWait(key=w.key, call_id=w.call_id, ended=notice.ended))
        self.waits_changed = True
        self._mirror_waits()

    @workflow.query(name=WAITING_CALLS_QUERY)
    def waiting_calls(self) -> list[CallWait]:
        return list(self.carry.call_waits)

    # -- the progress comment -----------------------------------------------------------------------

    def _mirror_waits(self) -> None:
        progress = self.progress_comment()
        if progress is not None:
            # A wait past its refusal time is over even if its end never came (its run was terminated).
            now = workflow.now()
            progress.view.waiting_calls = [w for w in self.carry.call_waits if w.until > now]

    async def show_waits(self) -> None:
        """Upsert the progress comment with the waits as they are (the inbox's loop calls this)."""
        self.waits_changed = False
        progress = self.progress_comment()
        if progress is None or progress.view.final:
            return
        self._mirror_waits()
        waiting = {w.workflow_id for w in progress.view.waiting_calls}
        if progress.live_view_of in waiting and workflow.patched(WAITS_AFTER_LIVE_VIEW_PATCH):
            # The live view stops when its agent run waits; an edit it makes meanwhile (rendered
            # before the wait came) must not land over the comment that asks for the answer.
            stopped = progress.live_views_stopped
            await workflow.wait_condition(lambda: progress.live_views_stopped != stopped)
        await progress.refresh()

    # -- a maintainer's answer ----------------------------------------------------------------------

    async def answer_call(self, e: RepoEvent, approved: bool) -> str:
        """`/shopfloor approve-call <id> [note]` or `reject-call <id> [why]` from a writer: forward it
        to the agent run that waits. Returns a note for the event log."""
        name = "approve-call" if approved else "reject-call"
        given, note = parse_answer(e.command.args if e.command else "")
        waiting = self.carry.call_waits
        if not given:
            ids = ", ".join(f"`{answer_id(w.call_id)}`" for w in waiting if answer_id(w.call_id))
            now = f" Waiting now: {ids}." if ids else " No tool call is waiting now."
            await self._reply(e, name, f"names no call: comment `/shopfloor {name} <id>`.{now}")
            return f"{name}: no id given"
        matches = [w for w in waiting if answer_id(w.call_id) == given]
        if not matches:
            ended = next((x for x in reversed(self.carry.call_waits_ended) if answer_id(x.call_id) == given), None)
            why = (
                f"call `{given}` no longer waits: it was {_ENDED[ended.ended]}."
                if ended is not None
                else f"no tool call `{given}` waits for an answer in this run."
            )
            await self._reply(e, name, why)
            return f"{name} {given}: nothing waits"
        if len(matches) > 1:  # ids a comment cannot tell apart: the CLI names the agent run and the call
            where = f"`shopfloor status {workflow.info().workflow_id}` lists them"
            await self._reply(
                e, name, f"several waiting calls go by `{given}`; answer from the command line ({where})."
            )
            return f"{name} {given}: ambiguous"
        (wait,) = matches
        answer = CallAnswer(call_id=wait.call_id, step=wait.step, approved=approved, note=note)
        try:
            await workflow.get_external_workflow_handle(wait.workflow_id).signal(ANSWER_CALL_SIGNAL, answer)
        except FailureError as exc:
            workflow.logger.warning("answer to %s not delivered: %s", wait.workflow_id, exc)
            await self._reply(e, name, f"could not reach the agent run that waited on `{given}`: it has ended.")
            return f"{name} {given}: the agent run has ended"
        self.carry.call_waits = [x for x in waiting if x.key != wait.key]
        self._remember_end(EndedWait(key=wait.key, call_id=wait.call_id, ended="approved" if approved else "rejected"))
        self.waits_changed = True
        self._mirror_waits()
        return f"{name} {given}: {'approved' if approved else 'rejected'} by @{e.sender}"

    def _remember_end(self, end: EndedWait) -> None:
        self.carry.call_waits_ended = [*self.carry.call_waits_ended, end][-ENDED_KEPT:]

    async def _reply(self, e: RepoEvent, name: str, text: str) -> None:
        who = safe_login(e.sender)
        await reply_on_github(
            self.repo,
            self.number,
            kind=f"call-answer-{reply_ref(e.comment_id, e.delivery_id)}",
            body=f"@{who} `/shopfloor {name}` did nothing: {text}",
            summary=f"reply to /shopfloor {name} from {who}",
        )
