"""The agent loop: ask the model, run the calls it asks for, keep the books, until an outcome.

Pure: no Temporal, no clock, no I/O of its own. It runs against three protocols: `ModelStep` (one
model call, or one compaction), `ToolRunner` (one tool call) and `RunHost` (the time, the
operator's pause/cancel/approval, the durability checkpoint, the live view). AgentWorkflow
(workflows/agent.py) supplies them as activities and workflow calls, the bench
(shopfloor/bench/workload.py) and the loop-rule tests as plain objects, so all three run this
very code. It stays deterministic as long as its implementations are, which is what lets it run
inside Temporal's workflow sandbox: every await here is a call into one of the protocols.

One turn of `AgentLoop.run`: stop if cancelled → wait while paused → stop at a limit → continue
as new if the host says so → compact if the transcript is too long → one model step (and its
budget accounting; compacted at once and tried again if the provider finds the conversation too
long) → ask the model to go on if its reply was cut off at the output limit
(agents/context_limits.py) → end on an accepted submit or a final answer (nudging once an agent that
owes a submit) → run the calls (each through the refusal ladder) → the post-call bookkeeping
(doom-loop watch, submit record, workspace checkpoint, queued warnings, circuit breakers),
which may end it stuck.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from shopfloor.agents import circuit_breakers, submission
from shopfloor.agents.budget import cost_usd, limit_reached
from shopfloor.agents.circuit_breakers import CIRCUIT_BREAKERS
from shopfloor.agents.context_limits import (
    CONTINUE_CUT_OFF,
    CONTINUE_NOTE,
    MAX_CONTINUATIONS,
    ContextTooLong,
    cut_off_note,
    nothing_to_compact,
    too_long_after_compaction,
    too_long_to_compact,
)
from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.doom_loop import observe
from shopfloor.agents.hooks import checks_submit, hooks_key
from shopfloor.agents.mcp_rules import mcp_decision
from shopfloor.agents.run_state import AgentCarry
from shopfloor.agents.tools import RUN_PYTHON, TOOLS
from shopfloor.models.agent_run import (
    AgentInput,
    AgentResult,
    CommandPolicy,
    CompactInput,
    CompactOutput,
    ModelStepInput,
    ModelStepOutput,
    PermissionRules,
    RunState,
    ToolCallRef,
    ToolInput,
    ToolResult,
)
from shopfloor.models.mcp import split_name
from shopfloor.models.transcript import Usage

EventKind = Literal["model", "tool"]

# --- what the loop runs against -------------------------------------------------------------------


class ModelStep(Protocol):
    """The model: one step of the conversation, or folding older messages into a summary."""

    async def step(self, request: ModelStepInput) -> ModelStepOutput: ...

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput: ...


class ToolRunner(Protocol):
    """The tools: run one call the model asked for (and the loop let through)."""

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult: ...


class HookRunner(Protocol):
    """The repository's before-submit hooks: run them on the workspace an accepted submit hands
    over. The result answers the submit call (ok: they passed and changed nothing)."""

    async def before_submit(self, call: ToolCallRef, request: ToolInput) -> ToolResult: ...


class RunHost(Protocol):
    """Where the loop runs: the time, the operator, the durability checkpoint, the live view."""

    cancel_reason: str | None  # set: the operator cancelled, with this reason

    def now(self) -> float:
        """Epoch seconds (workflow.now() in a workflow)."""
        ...

    async def wait_while_paused(self) -> None: ...

    async def continue_as_new_if_due(self, carry: AgentCarry) -> None:
        """Start afresh with `carry` when history grew long; does not return then."""
        ...

    async def ask_operator(self, call: ToolCallRef, timeout_s: float) -> str | None:
        """None when an operator approved `call`, else the refusal the model reads."""
        ...

    def step_started(self, step: int) -> None: ...

    def has_change(self, name: str) -> bool:
        """Whether this run takes the behaviour named `name` (workflow.patched: runs recorded
        before it existed replay without it)."""
        ...

    def record_event(self, kind: EventKind, summary: str, *, ok: bool = True, preview: str = "") -> None:
        """One line of the live view, against the current step."""
        ...

    def warn(self, text: str) -> None: ...

    def show_tool_warning(self, text: str) -> None:
        """A tool's own warning (e.g. it ran unsandboxed), shown once while it is recent."""
        ...


# --- how a run ends -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completed:
    """The model answered without asking for a tool (an agent that owes no submit)."""

    final_text: str | None
    reply_digest: str
    state: ClassVar[RunState] = "completed"


@dataclass(frozen=True)
class Submitted:
    """The model called submit and the result was accepted."""

    output: dict[str, Any]
    output_digest: str | None
    reply_digest: str
    state: ClassVar[RunState] = "completed"


@dataclass(frozen=True)
class LimitReached:
    reason: str
    state: ClassVar[RunState] = "limit_reached"


@dataclass(frozen=True)
class Stuck:
    """The doom-loop watch saw the same call or error again after warning about it, or a circuit
    breaker tripped after its warning (one tool failing again and again, replies without progress)."""

    reason: str
    state: ClassVar[RunState] = "stuck"


@dataclass(frozen=True)
class Cancelled:
    reason: str
    state: ClassVar[RunState] = "cancelled"


@dataclass(frozen=True)
class Failed:
    reason: str
    state: ClassVar[RunState] = "failed"


Outcome = Completed | Submitted | LimitReached | Stuck | Cancelled | Failed


def result_of(outcome: Outcome, carry: AgentCarry) -> AgentResult:
    """The run's result: the outcome plus what the carry says was spent and checkpointed."""
    spent = carry.spent
    common: dict[str, Any] = {
        "state": outcome.state,
        "steps": spent.steps,
        "usage": Usage(input_tokens=spent.input_tokens, output_tokens=spent.output_tokens),
        "transcript": carry.transcript,
        # A checkout on the worker's own disk is no portable checkpoint.
        "workspace": carry.workspace if carry.workspace.path is None else None,
        "cost_usd": spent.cost_usd,
    }
    match outcome:
        case Completed(final_text=text, reply_digest=digest):
            return AgentResult(**common, final_answer=text, final_digest=digest)
        case Submitted(output=output, output_digest=output_digest, reply_digest=digest):
            return AgentResult(**common, final_digest=digest, output=output, output_digest=output_digest)
        case LimitReached(reason=reason) | Stuck(reason=reason) | Cancelled(reason=reason) | Failed(reason=reason):
            return AgentResult(**common, reason=reason)


# --- the loop -------------------------------------------------------------------------------------


class AgentLoop:
    """One agent run's loop over `carry` (which it updates in place: the host checkpoints it)."""

    def __init__(
        self,
        inp: AgentInput,
        agent: AgentDefinition,
        carry: AgentCarry,
        *,
        model: ModelStep,
        tools: ToolRunner,
        host: RunHost,
        run_id: str,
        hooks: HookRunner | None = None,
    ) -> None:
        self.inp, self.agent, self.carry = inp, agent, carry
        self.model, self.tools, self.host = model, tools, host
        self.run_id = run_id  # keys the worker's cached workspace for this run
        self.hooks = hooks  # None: a run with before-submit hooks cannot submit (they never run)

    @property
    def model_name(self) -> str:
        """The model the next step asks: the one an operator switched to, else the run's own."""
        return self.carry.model or self.inp.model

    async def run(self) -> Outcome:
        c = self.carry
        if c.spent.started_at is None:
            c.spent = c.spent.model_copy(update={"started_at": self.host.now()})
        while True:
            if self.host.cancel_reason is not None:
                return Cancelled(self.host.cancel_reason)
            await self.host.wait_while_paused()
            if self.host.cancel_reason is not None:
                return Cancelled(self.host.cancel_reason)
            reason = limit_reached(c.spent, c.limits, self.host.now())
            if reason:
                return LimitReached(reason)
            await self.host.continue_as_new_if_due(c)
            unfoldable = await self._compact_if_needed()
            if unfoldable is not None:
                return unfoldable
            fitted = await self._fitting_model_step(c.spent.steps + 1)
            if isinstance(fitted, Failed):
                return fitted
            out = fitted
            if out.output is not None:  # an accepted submit (always alone in its reply)
                refused = await self._before_submit(out)
                if refused is None:
                    return Submitted(out.output, out.output_digest, out.reply_digest)
                c.pending_tool_results = [refused]  # the next model step reads why
                stuck = self._after_calls(out.tool_calls, [refused])
                if stuck:
                    return Stuck(stuck)
                continue
            answer = self._continue_cut_off(out)
            if answer is None:
                continue  # cut off at the output limit: the model is asked to go on
            out = answer
            if not out.tool_calls and self.agent.output_model:
                # A plain answer does not finish an agent that owes a result: remind it once.
                if c.submit.nudged:
                    return Failed(submission.no_submit_reason(self.agent.output_model))
                c.submit = c.submit.model_copy(update={"nudged": True})
                c.queued_notes.append(submission.nudge_text(self.agent.output_model))
                continue
            if not out.tool_calls:
                return Completed(out.final_text, out.answer_digest or out.reply_digest)
            results = await self._run_calls(out)
            c.pending_tool_results = results  # the next model step sends them
            stuck = self._after_calls(out.tool_calls, results)
            if stuck:
                return Stuck(stuck)

    # -- the model ----------------------------------------------------------------------------

    async def _compact_if_needed(self) -> Failed | None:
        """Compact past the budget; the run's end if even the summarizing request is too long."""
        c, inp = self.carry, self.inp
        budget = inp.compaction_budget_tokens or self.agent.compaction_budget_tokens
        if c.transcript is None or c.context_tokens <= budget:
            return None
        try:
            await self._compact(budget, f"compact transcript ({c.context_tokens} tokens > {budget})")
        except ContextTooLong as exc:
            return Failed(too_long_to_compact(self.model_name, exc.message))
        return None

    async def _compact(self, budget: int, summary: str, *, force: bool = False) -> int:
        """Fold older messages into a summary; how many were folded."""
        c, inp = self.carry, self.inp
        if c.transcript is None:
            return 0
        out = await self.model.compact(
            CompactInput(
                agent=inp.agent, model=self.model_name, transcript=c.transcript, budget_tokens=budget, force=force
            ),
            summary=summary,
        )
        c.transcript, c.context_tokens = out.transcript, out.context_tokens
        cost = out.cost_usd if out.priced else cost_usd(self.model_name, out.usage)
        c.spent = c.spent.after_step(out.usage, cost).model_copy(
            update={"steps": c.spent.steps}  # a compaction costs tokens, not a step
        )
        if out.folded:
            self.host.record_event("model", f"compacted {out.folded} messages into a summary")
        return out.folded

    async def _fitting_model_step(self, step: int) -> ModelStepOutput | Failed:
        """One model step. When the provider finds the conversation too long for the model, the
        transcript is compacted at once, forced (the estimate said it fitted, so it was wrong),
        and the step is tried once more; too long again ends the run."""
        try:
            return await self._model_step(step)
        except ContextTooLong as exc:
            refused = exc.message
        model = self.model_name
        self.host.record_event("model", f"{model}: the conversation is too long for the model", ok=False)
        budget = self.inp.compaction_budget_tokens or self.agent.compaction_budget_tokens
        try:
            folded = await self._compact(budget, "compact transcript (too long for the model)", force=True)
        except ContextTooLong as exc:
            return Failed(too_long_to_compact(model, exc.message))
        if not folded:
            return Failed(nothing_to_compact(model, refused))
        try:
            return await self._model_step(step)
        except ContextTooLong as exc:
            return Failed(too_long_after_compaction(model, exc.message))

    def _continue_cut_off(self, out: ModelStepOutput) -> ModelStepOutput | None:
        """A reply cut off at the output limit without a tool call is not an answer yet: ask the
        model to go on where it stopped (None: asked), at most MAX_CONTINUATIONS times; after that
        the answer says it is incomplete. Any other reply ends a run of cut-off parts."""
        c = self.carry
        if out.tool_calls or out.finish_reason != "length" or not self.host.has_change(CONTINUE_CUT_OFF):
            c.cut_off = []
            return out
        if len(c.cut_off) < MAX_CONTINUATIONS:
            c.cut_off.append(out.reply_digest)
            c.queued_notes.append(CONTINUE_NOTE)
            return None
        note = cut_off_note(len(c.cut_off))
        c.cut_off = []
        self.host.warn(note.strip())
        return out.model_copy(update={"final_text": (out.final_text or "") + note})

    async def _model_step(self, step: int) -> ModelStepOutput:
        c, inp, agent = self.carry, self.inp, self.agent
        self.host.step_started(step)
        required = inp.required_command if agent.submit_requires_command else None
        sent = len(c.queued_notes)  # a note queued while the model is called goes with the next step
        model = self.model_name  # a switch while the model is called takes effect at the next step
        out = await self.model.step(
            ModelStepInput(
                agent=inp.agent,
                model=model,
                instructions=inp.instructions,  # the repository's, for the system prompt
                step=step,
                transcript=c.transcript,
                goal=inp.goal if c.transcript is None else None,
                goal_images=inp.goal_images if c.transcript is None else [],
                append=c.pending_tool_results,
                inject=c.queued_notes[:sent],
                text_actions=inp.text_actions,
                permissions=inp.permissions,
                required_command=required,
                test_command=inp.commands.test_command if required else None,
                submit_refusal=submission.gate_refusal(c.submit, required),
                recorded=submission.recorded_fields(c.submit, required) if agent.output_model else {},
                continues=list(c.cut_off),
                mcp_specs=self.inp.mcp_tools.specs if self.inp.mcp_tools else None,
            )
        )
        c.transcript, c.pending_tool_results, c.context_tokens = out.transcript, [], out.context_tokens
        c.queued_notes = c.queued_notes[sent:]
        self._account_step(out, model)
        asked = ", ".join(call.summary for call in out.tool_calls)
        answered = "reply cut off at the output limit" if out.finish_reason == "length" else "final answer"
        self.host.record_event("model", f"{model}: " + (asked or answered), preview=out.text_preview)
        return out

    def _account_step(self, out: ModelStepOutput, model: str) -> None:
        """Budget accounting: one more step, its tokens and its cost (priced by the worker when it
        could; older histories carry unpriced steps, priced here with the default table, for the
        model that answered)."""
        cost = out.cost_usd if out.priced else cost_usd(model, out.usage)
        self.carry.spent = self.carry.spent.after_step(out.usage, cost)

    # -- the submit's hooks ----------------------------------------------------------------------

    async def _before_submit(self, out: ModelStepOutput) -> ToolResult | None:
        """Run the repository's before-submit hooks on the workspace an accepted submit hands over,
        unless they already passed on exactly this state. None: the submit stands; else the
        result that refuses it (the hooks' reports, and the workspace they changed, if they did)."""
        c, before = self.carry, self.inp.commands.before_submit
        if not before or not checks_submit(self.agent):
            return None
        key = hooks_key(c.workspace)
        if key is not None and c.submit.hooks_passed_on == key:
            return None
        call = out.tool_calls[0]  # the submit, alone in its reply
        if self.hooks is None:
            result = ToolResult(
                call_id=call.id, name=call.name, ok=False, preview="error: the repository's hooks cannot run here"
            )
        else:
            result = await self.hooks.before_submit(call, self._tool_input(out, call))
        self._after_call(call, result)
        if not result.ok:
            return result
        c.submit = c.submit.model_copy(update={"hooks_passed_on": key})
        return None

    # -- the calls ----------------------------------------------------------------------------

    async def _run_calls(self, out: ModelStepOutput) -> list[ToolResult]:
        """Run one reply's calls: consecutive read-only allowed ones concurrently, the others one
        at a time, in order."""
        results: list[ToolResult] = []
        batch: list[ToolCallRef] = []

        async def flush() -> None:
            results.extend(await asyncio.gather(*(self._run_call(out, call) for call in batch)))
            batch.clear()

        for call in out.tool_calls:
            if call.risk == "read" and call.decision == "allow":
                batch.append(call)
                continue
            await flush()
            results.append(await self._run_call(out, call))
        await flush()
        return results

    def _tool_input(self, out: ModelStepOutput, call: ToolCallRef) -> ToolInput:
        """What the activity that runs `call` of reply `out` is given."""
        c = self.carry
        return ToolInput(
            workspace=c.workspace,
            reply_digest=out.reply_digest,
            call_id=call.id,
            name=call.name,
            run_id=self.run_id,
            # Only a tool that runs commands (or hooks) reads the policy; the rest go without it.
            commands=self.inp.commands if _runs_commands(call.name) else CommandPolicy(),
            readable=c.readable_outputs if call.name == "read_output" else [],
            permissions=self.inp.permissions if call.name == RUN_PYTHON else PermissionRules(),
        )

    async def _run_call(self, out: ModelStepOutput, call: ToolCallRef) -> ToolResult:
        refusal = await self._refusal(call)
        if refusal is not None:
            result = ToolResult(call_id=call.id, name=call.name, ok=False, preview=refusal)
        else:
            result = await self.tools.run(call, self._tool_input(out, call))
        self._after_call(call, result)
        return result

    async def _refusal(self, call: ToolCallRef) -> str | None:
        """The refusal ladder, first rung that applies: a submit (model_step judged it, having seen
        the arguments), an unknown tool, a denied call, a call an operator must approve. None: run it."""
        agent = self.agent
        if call.name == submission.SUBMIT and agent.output_model:
            return call.submit_error or "error: submit was not accepted"
        if split_name(call.name) is not None:  # an MCP tool: the repository's rules, judged here
            offered = self.inp.mcp_tools.names if self.inp.mcp_tools else []
            decision, reason = mcp_decision(call.name, offered, self.inp.mcp)
            if decision == "deny":
                return f"denied: {reason}"
            if decision == "ask":
                return await self.host.ask_operator(
                    call.model_copy(update={"decision_reason": reason}), self.inp.approval_timeout_s
                )
            return None
        if call.name not in agent.tools:
            return f"error: unknown tool {call.name!r}; this agent's tools are: {', '.join(agent.tools)}"
        if call.decision == "deny":
            return f"denied: {call.decision_reason}"
        if call.decision == "ask":
            return await self.host.ask_operator(call, self.inp.approval_timeout_s)
        return None

    def _after_call(self, call: ToolCallRef, result: ToolResult) -> None:
        """Bookkeeping as each call comes back: its warning, its output if cut (read_output may
        page it), its line in the live view."""
        if result.warning:
            self.host.show_tool_warning(result.warning)
        if result.output_digest and result.output_bytes > self.agent.tool_output_cap_chars:
            self.carry.readable_outputs.append(result.output_digest)
        self.host.record_event("tool", call.summary, ok=result.ok, preview=result.preview)

    def _after_calls(self, calls: list[ToolCallRef], results: list[ToolResult]) -> str | None:
        """Bookkeeping once a reply's calls are done, in call order: the doom-loop watch, the submit
        record, the workspace checkpoint, a loop warning queued for the model; then the circuit
        breakers (per tool, then for the reply as a whole). The stuck reason, if any."""
        c = self.carry
        breakers = self.host.has_change(CIRCUIT_BREAKERS)
        stop: str | None = None
        for call, result in zip(calls, results, strict=True):
            edited = result.workspace is not None and result.workspace != c.workspace
            c.doom, signal, text = observe(
                c.doom,
                call_key=call.args_digest,
                error_key=None if result.ok else result.preview[:200],
                tool=call.name,
                error_text=None if result.ok else result.preview,
                workspace_changed=edited,
            )
            c.submit = submission.record_call(
                c.submit, edited=edited, ran_required=call.runs_required, ok=result.ok, preview=result.preview
            )
            if result.workspace is not None:
                c.workspace = result.workspace
            if signal == "warn":
                c.queued_notes.append(text)
                self.host.warn(text)
            elif signal == "stuck":
                return text
            if breakers:
                c.breakers, signal, text = circuit_breakers.after_call(
                    c.breakers,
                    tool=call.name,
                    ok=result.ok,
                    workspace_changed=edited and result.ok,
                    stop=c.limits.max_tool_errors,
                )
                stop = stop or self._breaker(signal, text)
        if breakers and stop is None:
            progressed = any(result.ok for result in results)
            c.breakers, signal, text = circuit_breakers.after_reply(
                c.breakers, progressed=progressed, stop=c.limits.max_steps_without_progress
            )
            stop = self._breaker(signal, text)
        return stop

    def _breaker(self, signal: circuit_breakers.BreakerSignal, text: str) -> str | None:
        """A circuit breaker's signal: a warning queued for the model, or the stuck reason."""
        if signal == "warn":
            self.carry.queued_notes.append(text)
            self.host.warn(text)
        return text if signal == "stuck" else None


def _runs_commands(tool: str) -> bool:
    """Whether `tool` runs commands (its own, or the repository's hooks after an edit or before
    a submit): every tool but the read-only ones. An unknown name is refused before it runs."""
    known = TOOLS.get(tool)
    return known is None or known.risk != "read" or tool == RUN_PYTHON  # its program: a process with limits


# --- a host for runs outside Temporal -------------------------------------------------------------


class UnattendedHost:
    """A RunHost with nobody at the controls, for runs outside Temporal (the bench, tests): the
    clock is given, nothing pauses, history never grows, a call that needs approval is refused.
    Events and warnings are kept in lists; set `cancel_reason` to stop the run at its next turn."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.cancel_reason: str | None = None
        self.step = 0
        self.events: list[tuple[int, EventKind, str, bool]] = []  # (step, kind, summary, ok)
        self.warnings: list[str] = []

    def now(self) -> float:
        return self.clock()

    async def wait_while_paused(self) -> None:
        return None

    async def continue_as_new_if_due(self, carry: AgentCarry) -> None:
        return None

    async def ask_operator(self, call: ToolCallRef, timeout_s: float) -> str | None:
        return "rejected: no operator watches this run (the call was not run)"

    def step_started(self, step: int) -> None:
        self.step = step

    def has_change(self, name: str) -> bool:
        return True  # nothing recorded to replay

    def record_event(self, kind: EventKind, summary: str, *, ok: bool = True, preview: str = "") -> None:
        self.events.append((self.step, kind, summary, ok))

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def show_tool_warning(self, text: str) -> None:
        if text not in self.warnings:
            self.warn(text)
