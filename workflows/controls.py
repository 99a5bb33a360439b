"""The operator's side of an agent run: status query, pause/resume/cancel/steer signals and
approve/reject/raise_limits/switch_model updates, plus the live status they read and write."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.call_waits import answer_id
    from shopfloor.agents.run_state import AgentCarry
    from shopfloor.models.agent_run import (
        AgentInput,
        AgentStatus,
        ApprovalDecision,
        Limits,
        LimitsRaise,
        ModelSwitch,
        PendingApproval,
        StepEvent,
        ToolCallRef,
    )
    from shopfloor.models.call_waits import (
        ANSWER_CALL_SIGNAL,
        CALL_WAIT_SIGNAL,
        CallAnswer,
        CallWait,
        CallWaitNotice,
        WaitEnd,
    )
    from shopfloor.models.model_spec import ModelSpec
    from shopfloor.models.transcript import Usage

EVENTS_KEPT = 30
# Histories recorded before a wait was signalled to the parent run (the signals are new commands).
WAITS_TO_PARENT_PATCH = "call-waits-signalled-to-parent"
# The parents that show their agents' waits; an alert's assessment has no one to show them to.
PARENTS_SHOWING_WAITS = ("issue/", "pr/")


def _switched_model(switch: ModelSwitch) -> str:
    """The `provider:model` to switch to, normalized; ValueError (the update's refusal) when it is
    malformed or names a provider shopfloor does not have. Whether this worker holds the
    provider's credentials shows at the next step (a rejected model call, one clear line)."""
    spec = ModelSpec.parse(switch.model)
    if any(ch.isspace() or not ch.isprintable() for ch in spec.model):
        raise ValueError(f"model {switch.model!r} is not of the form provider:model (a model name has no spaces)")
    return str(spec)


class AgentControls:
    def __init__(self, inp: AgentInput, carry: AgentCarry) -> None:
        self.carry = carry
        self.cancel_reason: str | None = None
        self._pending: dict[str, PendingApproval] = {}
        self._answers: dict[str, tuple[bool, str]] = {}  # call id -> (approved, note)
        self.live = AgentStatus(
            agent=inp.agent,
            model=carry.model or inp.model,
            repo=inp.workspace.repo,
            stage=inp.stage,
            max_steps=carry.limits.max_steps,
            paused=carry.paused,
            started_from=inp.start_from.describe() if inp.start_from is not None else None,
        )

    # -- what operators read ------------------------------------------------------------------

    @workflow.query(name="status")
    def status(self) -> AgentStatus:
        return self.live

    # -- signals: fire and forget (also what webhooks send with signal-with-start) -------------

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self.carry.paused = True
        self.publish()

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self.carry.paused = False
        self.publish()

    @workflow.signal(name="cancel")
    def cancel(self, reason: str = "") -> None:
        self.cancel_reason = reason or "cancelled by an operator"
        for call_id in self._pending:
            self._answers.setdefault(call_id, (False, "the run is being cancelled"))

    @workflow.signal(name="steer")
    def steer(self, text: str) -> None:
        """A message from the operator, given to the model before its next step."""
        if text.strip():
            self.carry.queued_notes.append(f"Message from the operator: {text.strip()}")
            self.event(self.live.step, "model", f"operator: {text.strip()[:80]}")

    # -- updates: the caller learns whether it took effect -------------------------------------

    def _pending_call(self, decision: ApprovalDecision) -> str:
        if decision.call_id is not None:
            # By its id, or by the id a comment can carry (answer_id), as the progress comment shows it.
            named = [c for c in self._pending if decision.call_id in (c, answer_id(c)) and c not in self._answers]
            if len(named) != 1:
                raise ValueError(f"no call {decision.call_id!r} is waiting for approval")
            return named[0]
        waiting = [c for c in self._pending if c not in self._answers]
        if len(waiting) != 1:
            raise ValueError(
                "no call is waiting for approval" if not waiting else f"several calls wait: name one of {waiting}"
            )
        return waiting[0]

    @workflow.update(name="approve")
    def approve(self, decision: ApprovalDecision) -> str:
        call_id = self._pending_call(decision)
        self._answers[call_id] = (True, decision.note)
        return call_id

    @approve.validator
    def _validate_approve(self, decision: ApprovalDecision) -> None:
        self._pending_call(decision)

    @workflow.update(name="reject")
    def reject(self, decision: ApprovalDecision) -> str:
        call_id = self._pending_call(decision)
        self._answers[call_id] = (False, decision.note or "rejected by an operator")
        return call_id

    @reject.validator
    def _validate_reject(self, decision: ApprovalDecision) -> None:
        self._pending_call(decision)

    @workflow.signal(name=ANSWER_CALL_SIGNAL)
    def answer_call(self, answer: CallAnswer) -> None:
        """An answer a parent run forwards (a maintainer's comment); a call no longer waiting is left alone."""
        pending = self._pending.get(answer.call_id)
        if pending is None or pending.step != answer.step or answer.call_id in self._answers:
            return
        note = answer.note if answer.approved or answer.note else "rejected by a maintainer"
        self._answers[answer.call_id] = (answer.approved, note)

    @workflow.update(name="raise_limits")
    def raise_limits(self, change: LimitsRaise) -> Limits:
        raised = {k: v for k, v in change.model_dump().items() if v is not None}
        self.carry.limits = self.carry.limits.model_copy(update=raised)
        self.live.max_steps = self.carry.limits.max_steps
        self.publish()
        return self.carry.limits

    @raise_limits.validator
    def _validate_raise(self, change: LimitsRaise) -> None:
        if all(v is None for v in change.model_dump().values()):
            raise ValueError("name at least one limit to raise")

    @workflow.signal(name="raise_limits_from_parent")
    def raise_limits_from_parent(self, change: LimitsRaise) -> None:
        """A raise a parent run forwards (`shopfloor raise-limits` on its id, a writer's
        `/shopfloor raise-limits`): a workflow cannot send another an update. The parent checked
        who asked; an empty one changes nothing."""
        raised = {k: v for k, v in change.model_dump().items() if v is not None}
        if raised:
            self.carry.limits = self.carry.limits.model_copy(update=raised)
            self.live.max_steps = self.carry.limits.max_steps
            self.publish()

    @workflow.update(name="switch_model")
    def switch_model(self, switch: ModelSwitch) -> str:
        """Use another model from the next step on (a step under way finishes with the one it
        asked); returns the model now in use."""
        return self._switch_model(switch)

    @switch_model.validator
    def _validate_switch(self, switch: ModelSwitch) -> None:
        _switched_model(switch)

    @workflow.signal(name="switch_model_from_parent")
    def switch_model_from_parent(self, switch: ModelSwitch) -> None:
        """A switch a parent run forwards (a maintainer's `/shopfloor steer --model`); the parent
        checked who asked and that the operator allows the model. A malformed one is a warning."""
        try:
            self._switch_model(switch)
        except ValueError as exc:
            self.warn(f"model not switched: {exc}")

    def _switch_model(self, switch: ModelSwitch) -> str:
        model = _switched_model(switch)
        if model != self.live.model:
            self.carry.model = self.live.model = model
            by = " ".join(switch.by.split())[:80] or "an operator"
            self.event(self.live.step, "model", f"model switched to {model} by {by}")
        return model

    # -- used by the loop ---------------------------------------------------------------------

    async def wait_while_paused(self) -> None:
        if self.carry.paused:
            self.publish()
            await workflow.wait_condition(lambda: not self.carry.paused or self.cancel_reason is not None)

    async def ask_operator(self, call: ToolCallRef, timeout_s: float) -> str | None:
        """Wait for an operator's answer on `call`; None when approved, else the refusal text."""
        # Call ids may come again in a later reply (text actions number theirs per reply): an
        # answer given for an earlier call must not answer this one.
        self._answers.pop(call.id, None)
        since = workflow.now()
        pending = PendingApproval(
            call_id=call.id,
            tool=call.name,
            summary=call.summary,
            reason=call.decision_reason,
            step=self.live.step,
            since=since,
            until=since + timedelta(seconds=timeout_s),
        )
        self._pending[call.id] = pending
        self.publish()
        ended: WaitEnd = "cancelled"
        try:
            await self._tell_parent(pending, None)
            await workflow.wait_condition(
                lambda: call.id in self._answers or self.cancel_reason is not None, timeout=timedelta(seconds=timeout_s)
            )
            approved, note = self._answers.get(call.id, (False, "the run is being cancelled"))
            ended = "approved" if approved else "cancelled" if self.cancel_reason is not None else "rejected"
        except TimeoutError:
            approved, note = False, f"no operator answered within {timeout_s:.0f} s"
            ended = "timed out"
        finally:
            del self._pending[call.id]
            self.publish()
            await self._tell_parent(pending, ended)
        self.event(self.live.step, "tool", f"{'approved' if approved else 'rejected'}: {call.summary}", ok=approved)
        return None if approved else f"rejected: {note} (the call was not run)"

    async def _tell_parent(self, pending: PendingApproval, ended: WaitEnd | None) -> None:
        """Signal the parent run (an issue's or a pull request's) that a wait started or ended, so
        its progress comment shows it. Without the parent's latest run id: a parent that continued
        as new gets it too. A parent that is gone is no reason to fail the agent."""
        parent = workflow.info().parent
        if parent is None or not parent.workflow_id.startswith(PARENTS_SHOWING_WAITS):
            return
        if not workflow.patched(WAITS_TO_PARENT_PATCH):
            return
        wait = CallWait(
            workflow_id=workflow.info().workflow_id,
            agent=self.live.agent,
            call_id=pending.call_id,
            step=pending.step,
            summary=pending.summary[:300],
            reason=pending.reason[:300],
            since=pending.since or workflow.now(),
            until=pending.until or workflow.now(),
        )
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                CALL_WAIT_SIGNAL, CallWaitNotice(wait=wait, ended=ended)
            )
        except FailureError as exc:
            workflow.logger.warning("the parent run was not told of the wait on %s: %s", pending.call_id, exc)

    def warn(self, text: str) -> None:
        self.live.warnings = [*self.live.warnings[-4:], text]
        self.publish()

    def event(self, step: int, kind: str, summary: str, *, ok: bool = True, preview: str = "") -> None:
        self.carry.seq += 1
        event = StepEvent(seq=self.carry.seq, step=step, kind=kind, summary=summary, ok=ok, preview=preview[:160])  # type: ignore[arg-type]
        self.live.events = [*self.live.events[-(EVENTS_KEPT - 1) :], event]
        self.publish()

    def publish(self) -> None:
        s, c = self.live, self.carry
        s.usage = Usage(input_tokens=c.spent.input_tokens, output_tokens=c.spent.output_tokens)
        s.cost_usd = c.spent.cost_usd
        s.paused = c.paused
        s.pending = list(self._pending.values())
        s.workspace = c.workspace if c.workspace.path is None else None
        state = "paused" if c.paused and s.state == "running" else s.state
        lines = [
            f"**{s.agent}** on `{s.repo}` · {s.model}",
            f"state: **{state}** · step {s.step}/{c.limits.max_steps} · "
            f"tokens {c.spent.tokens} · ${c.spent.cost_usd:.4f}",
        ]
        if s.started_from:
            lines.append(s.started_from)
        if s.reason:
            lines.append(f"reason: {s.reason}")
        lines += [f"waiting for approval: `{p.summary}` ({p.reason})" for p in s.pending]
        lines += [f"warning: {w}" for w in s.warnings[-2:]]
        lines += [f"- {'✓' if e.ok else '✗'} step {e.step}: {e.summary}" for e in s.events[-8:]]
        workflow.set_current_details("\n".join(lines))
