"""The operator's side of an issue's or a pull request's run: the same controls an agent run takes
(pause, resume, cancel, steer signals; approve, reject, raise_limits, switch_model updates; a
`status` query), applied to the pipeline and forwarded to its running agent run.

A workflow cannot send an update to another workflow, so what goes to the agent run goes by
signal: `pause`, `resume`, `cancel`, `steer`, ANSWER_CALL_SIGNAL (the answer to a waiting call,
as a maintainer's `/shopfloor approve-call` is forwarded in workflows/call_waits.py),
RAISE_LIMITS_SIGNAL and SWITCH_MODEL_SIGNAL. The updates' validators refuse what cannot apply
(no agent running, no call waiting, a malformed model) before anything is recorded, so the
caller gets the reason in words and the history is untouched. Writers' comment commands
(`/shopfloor steer|raise-limits|pause|resume|cancel`) come through `control_command` and get one
reply each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.call_waits import answer_id
    from shopfloor.agents.control_commands import (
        ControlRefused,
        parse_raise_limits,
        parse_steer,
    )
    from shopfloor.agents.github_text import reply_ref, safe_login
    from shopfloor.agents.progress import WAITING_FOR
    from shopfloor.models.agent_run import ApprovalDecision, LimitsRaise, ModelSwitch
    from shopfloor.models.alert_issue import AlertWatch
    from shopfloor.models.call_waits import ANSWER_CALL_SIGNAL, CallAnswer, CallWait, EndedWait
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.models.inbox_state import InboxCarry
    from shopfloor.models.model_spec import ModelSpec
    from shopfloor.models.pipeline_status import STATUS_QUERY, PipelineKind, PipelineStatus
    from shopfloor.workflows.comment_replies import reply_on_github
    from shopfloor.workflows.pipeline import OnPipeline

# The agent run's signal forms of its raise_limits and switch_model updates (workflows/controls.py).
RAISE_LIMITS_SIGNAL = "raise_limits_from_parent"
SWITCH_MODEL_SIGNAL = "switch_model_from_parent"
NO_AGENT_FOR_STEER = "no agent is running; `/shopfloor fix <text>` starts a round"
NO_AGENT = "no agent is running in this run"
STOPPED_BY_OPERATOR = "operator (command line)"


def waiting_words(key: str | None, subject: str, sha: str | None) -> str | None:
    """What a run waits for, in words (the progress comment's sentence, without its markup)."""
    if not key:
        return None
    text = WAITING_FOR.get("approval_of" if key == "approval" and sha else key)
    if text is None:
        return key
    return text.format(subject=subject.replace("_", " "), sha=(sha or "")[:12])


class PipelineControls:
    """Mixed into IssueWorkflow and PullRequestWorkflow (before GitHubInbox)."""

    KIND: ClassVar[str]
    carry: InboxCarry
    repo: str
    number: int

    def controlled(self) -> OnPipeline | None:
        """The run's pipeline (FactoryRun or PullRequestReview), once it exists."""
        return None

    waits_changed: bool
    if TYPE_CHECKING:  # GitHubInbox and CallWaits, mixed in after this class, define them

        def publish(self) -> None: ...

        def _mirror_waits(self) -> None: ...

        def _remember_end(self, end: EndedWait) -> None: ...

    # -- what operators read --------------------------------------------------------------------

    def running_agent(self) -> str | None:
        run = self.controlled()
        if run is None or not run.state.started or run.state.result not in ("", "parked"):
            return None
        return run.state.running_agent

    @workflow.query(name=STATUS_QUERY)
    def pipeline_status(self) -> PipelineStatus:
        c, run = self.carry, self.controlled()
        kind: PipelineKind = "pull_request" if self.KIND == "pull_request" else "issue"
        st = PipelineStatus(
            workflow_id=workflow.info().workflow_id,
            kind=kind,
            repo=self.repo,
            number=self.number,
            state=c.state if c.state != "received" else "received",
            paused=c.paused,
            stopped_by=c.stopped_by,
            pending=list(c.call_waits),
        )
        if run is None or not run.state.started:
            return st
        s, v = run.state, run.progress.view
        st.started = True
        st.stage, st.state = v.stage, v.state
        st.waiting_for = waiting_words(s.waiting_for, v.subject, v.approve_sha)
        st.reason = v.reason
        st.pr_number, st.pr_url, st.head_sha = s.pr_number, s.pr_url, s.head_sha
        st.cost_usd = s.cost_usd
        st.agent_runs, st.running_agent = list(s.children), self.running_agent()
        st.warnings = [f"cost not tracked for {m} (no price)" for m in v.unpriced_models] + list(v.problems)
        return st

    # -- signals: the pipeline and its running agent --------------------------------------------

    @workflow.signal(name="pause")
    async def pause_pipeline(self) -> None:
        self.carry.paused = True
        self.publish()
        await self._to_agent("pause")

    @workflow.signal(name="resume")
    async def resume_pipeline(self) -> None:
        self.carry.paused = False
        self.publish()
        await self._to_agent("resume")

    @workflow.signal(name="cancel")
    def cancel_pipeline(self, reason: str = "") -> None:
        """End the run as `/shopfloor stop` does: the pipeline is cancelled, and with it its running
        agent run, which ends with its last checkpoint. (Not by the agent's own `cancel` signal: an
        agent ending first would look to the pipeline like a failed stage.)"""
        c = self.carry
        if c.state == "received":
            c.state, c.stopped_by = "stopped", STOPPED_BY_OPERATOR
            workflow.logger.info("cancelled by an operator: %s", reason or "no reason given")

    @workflow.signal(name="steer")
    async def steer_pipeline(self, text: str) -> None:
        if text.strip() and not await self._to_agent("steer", text):
            workflow.logger.warning("steer dropped: %s", NO_AGENT)

    # -- updates: the caller learns whether it took effect ----------------------------------------

    def _waiting_call(self, decision: ApprovalDecision) -> CallWait:
        waiting = self.carry.call_waits
        if decision.call_id is not None:
            named = [w for w in waiting if decision.call_id in (w.call_id, answer_id(w.call_id))]
            if len(named) != 1:
                raise ValueError(
                    f"no call {decision.call_id!r} is waiting for approval in this run"
                    if not named
                    else f"several waiting calls go by {decision.call_id!r}: answer on the agent run "
                    f"({', '.join(sorted({w.workflow_id for w in named}))})"
                )
            return named[0]
        if len(waiting) != 1:
            raise ValueError(
                "no call is waiting for approval in this run"
                if not waiting
                else "several calls wait: name one with --call "
                + ", ".join(answer_id(w.call_id) or w.call_id for w in waiting)
            )
        return waiting[0]

    async def _answer(self, decision: ApprovalDecision, approved: bool) -> str:
        wait = self._waiting_call(decision)
        note = decision.note or ("" if approved else "rejected by an operator")
        answer = CallAnswer(call_id=wait.call_id, step=wait.step, approved=approved, note=note)
        try:
            await workflow.get_external_workflow_handle(wait.workflow_id).signal(ANSWER_CALL_SIGNAL, answer)
        except FailureError:
            raise ApplicationError(f"the agent run {wait.workflow_id} that waited on it has ended") from None
        self.carry.call_waits = [x for x in self.carry.call_waits if x.key != wait.key]
        self._remember_end(EndedWait(key=wait.key, call_id=wait.call_id, ended="approved" if approved else "rejected"))
        self.waits_changed = True
        self._mirror_waits()
        return wait.call_id

    @workflow.update(name="approve")
    async def approve_call(self, decision: ApprovalDecision) -> str:
        return await self._answer(decision, True)

    @approve_call.validator
    def _validate_approve(self, decision: ApprovalDecision) -> None:
        self._waiting_call(decision)

    @workflow.update(name="reject")
    async def reject_call(self, decision: ApprovalDecision) -> str:
        return await self._answer(decision, False)

    @reject_call.validator
    def _validate_reject(self, decision: ApprovalDecision) -> None:
        self._waiting_call(decision)

    @workflow.update(name="raise_limits")
    async def raise_agent_limits(self, change: LimitsRaise) -> str:
        """Forward to the running agent run; returns its id."""
        return await self._to_agent_or_fail(RAISE_LIMITS_SIGNAL, change)

    @raise_agent_limits.validator
    def _validate_raise(self, change: LimitsRaise) -> None:
        if all(v is None for v in change.model_dump().values()):
            raise ValueError("name at least one limit to raise")
        if self.running_agent() is None:
            raise ValueError(f"{NO_AGENT}: there are no limits to raise")

    @workflow.update(name="switch_model")
    async def switch_agent_model(self, switch: ModelSwitch) -> str:
        """Forward to the running agent run (from its next step on); returns its id."""
        return await self._to_agent_or_fail(SWITCH_MODEL_SIGNAL, switch)

    @switch_agent_model.validator
    def _validate_switch(self, switch: ModelSwitch) -> None:
        ModelSpec.parse(switch.model)  # ValueError in words
        if self.running_agent() is None:
            raise ValueError(f"{NO_AGENT}: the next agent run starts with the configured model")

    # -- forwarding -------------------------------------------------------------------------------

    async def _to_agent(self, signal: str, *args: Any) -> str | None:
        """Signal the running agent run; its id, or None when none runs (or it just ended)."""
        agent = self.running_agent()
        if agent is None:
            return None
        try:
            await workflow.get_external_workflow_handle(agent).signal(signal, args=list(args))
        except FailureError as exc:
            workflow.logger.warning("%s not delivered to %s: %s", signal, agent, exc)
            return None
        return agent

    async def _to_agent_or_fail(self, signal: str, arg: Any) -> str:
        agent = await self._to_agent(signal, arg)
        if agent is None:
            raise ApplicationError(f"{NO_AGENT} (its agent run ended meanwhile)")
        return agent

    # -- writers' comment commands -----------------------------------------------------------------

    async def control_command(self, e: RepoEvent) -> str:
        """An accepted `/shopfloor steer|raise-limits|pause|resume|cancel`: apply it, reply once.
        Returns a note for the event log."""
        name = e.command.name if e.command else ""
        args = e.command.args if e.command else ""
        c = self.carry
        try:
            match name:
                case "pause":
                    c.paused = True
                    agent = await self._to_agent("pause")
                    said = "paused: the run holds before its next step" + (" (its agent too)" if agent else "")
                case "resume":
                    c.paused = False
                    agent = await self._to_agent("resume")
                    said = "resumed"
                case "cancel":  # as `stop`: cancelling the pipeline cancels its running agent run
                    c.state, c.stopped_by = "stopped", e.sender
                    said = "cancelled: the run ends; its running agent keeps its last checkpoint"
                case "steer":
                    said = await self._steer_from_comment(e.sender, args)
                case "raise-limits":
                    said = await self._raise_from_comment(args)
                case _:
                    return f"command {name} accepted"
        except ControlRefused as refused:
            await self._control_reply(e, name, f"did nothing: {refused}")
            return f"command {name} refused: {refused}"[:200]
        run = self.controlled()
        if name not in ("pause", "resume") or (run is not None and run.state.started):
            # An inbox with no pipeline (yet) has nothing to hold: its progress comment, once there
            # is one, says it waits for a resume.
            await self._control_reply(e, name, said)
        return f"command {name} accepted"

    async def _steer_from_comment(self, sender: str, args: str) -> str:
        model, text = parse_steer(args)
        agent = self.running_agent()
        if agent is None:
            raise ControlRefused(NO_AGENT_FOR_STEER)
        said: list[str] = []
        if model is not None:
            allowed = self._repo_models()
            if model not in allowed:
                listed = ", ".join(f"`{m}`" for m in allowed) if allowed else "none (SHOPFLOOR_REPO_MODELS is empty)"
                raise ControlRefused(
                    f"that model is not one this shopfloor lets repositories choose (allowed: {listed})"
                )
            if await self._to_agent(SWITCH_MODEL_SIGNAL, ModelSwitch(model=model, by=f"@{safe_login(sender)}")) is None:
                raise ControlRefused(NO_AGENT_FOR_STEER)
            said.append(f"the running agent switches to `{model}` from its next step")
        if text:
            if await self._to_agent("steer", f"(from @{safe_login(sender)}) {text}") is None:
                raise ControlRefused(NO_AGENT_FOR_STEER)
            said.append("your message reaches the running agent before its next step")
        return "; ".join(said)

    async def _raise_from_comment(self, args: str) -> str:
        change = parse_raise_limits(args)
        if self.running_agent() is None:
            raise ControlRefused(f"{NO_AGENT}: there are no limits to raise")
        if await self._to_agent(RAISE_LIMITS_SIGNAL, change) is None:
            raise ControlRefused(f"{NO_AGENT}: there are no limits to raise")
        parts = [
            f"{change.max_steps} steps" if change.max_steps else "",
            f"${change.max_cost_usd:g}" if change.max_cost_usd else "",
        ]
        return f"the running agent's limits are now: {', '.join(p for p in parts if p)}"

    def _repo_models(self) -> list[str]:
        run = self.controlled()
        return list(run.config.repo_models) if run is not None else []

    async def _control_reply(self, e: RepoEvent, name: str, text: str) -> None:
        who = safe_login(e.sender)
        await reply_on_github(
            self.repo,
            self.number,
            kind=f"control-{reply_ref(e.comment_id, e.delivery_id)}",
            body=f"@{who} `/shopfloor {name}`: {text}",
            summary=f"reply to /shopfloor {name} from {who}",
        )


def alert_status(watch: AlertWatch) -> PipelineStatus:
    """An alert run's `status`: its phase, the issue it filed, its assessing agent runs. The
    controls do not apply to it: it runs no pipeline of its own (the issue's run does the work, and
    takes them), and its assessing agent is a short, read-only run under a wall-clock limit."""
    wid = workflow.info().workflow_id
    s = watch
    return PipelineStatus(
        workflow_id=wid,
        kind="alert",
        repo=s.repo or "",
        number=s.issue_number,
        started=True,
        stage=s.phase,
        state=s.phase,
        reason=s.assessment or None,
        cost_usd=s.assess_cost_usd,
        warnings=[f"last error (retrying): {s.last_error[:200]}"] if s.last_error else [],
        agent_runs=[f"{wid}/assess-{n}" for n in range(1, s.assessments + 1)],
    )
