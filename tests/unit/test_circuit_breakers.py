"""Circuit breakers (agents/circuit_breakers.py): one tool failing again and again, or replies
without a successful call, warn the model once, then stop the run as stuck — even when every
call is different. The rules alone, then through the agent loop with an unattended host."""

from __future__ import annotations

import hashlib

import pytest

from shopfloor.agents import circuit_breakers as cb
from shopfloor.agents.circuit_breakers import BreakerState, after_call, after_reply
from shopfloor.agents.loop import AgentLoop, Completed, Stuck, UnattendedHost, result_of
from shopfloor.agents.registry import get_agent
from shopfloor.agents.run_state import AgentCarry
from shopfloor.models.agent_run import (
    AgentInput,
    CompactInput,
    CompactOutput,
    Limits,
    ModelStepInput,
    ModelStepOutput,
    ToolCallRef,
    ToolInput,
    ToolResult,
    WorkspaceRef,
)
from shopfloor.models.transcript import Usage

pytestmark = pytest.mark.fast

# -- the rules --------------------------------------------------------------------------------


def tool_signals(seq: list[tuple[str, bool] | tuple[str, bool, bool]], **kw) -> list[str]:
    """Signals for (tool, ok[, workspace_changed]) calls in order."""
    state, signals = BreakerState(), []
    for tool, ok, *changed in seq:
        state, signal, _ = after_call(state, tool=tool, ok=ok, workspace_changed=bool(changed and changed[0]), **kw)
        signals.append(signal)
    return signals


def test_the_defaults_warn_at_four_errors_of_one_tool_and_stop_at_six():
    assert (cb.TOOL_ERRORS_STOP, cb.warn_at(cb.TOOL_ERRORS_STOP)) == (6, 4)
    assert (cb.NO_PROGRESS_STOP, cb.warn_at(cb.NO_PROGRESS_STOP)) == (8, 6)
    assert (Limits().max_tool_errors, Limits().max_steps_without_progress) == (6, 8)
    assert tool_signals([("run_command", False)] * 6) == ["ok", "ok", "ok", "warn", "ok", "stuck"]


def test_the_warning_and_the_reason_name_the_tool():
    state = BreakerState()
    texts = []
    for _ in range(6):
        state, signal, text = after_call(state, tool="run_command", ok=False, workspace_changed=False)
        texts.append((signal, text))
    assert texts[3][1].startswith("The run_command tool has failed 4 times in a row")
    assert "2 more times" in texts[3][1]
    assert texts[5] == ("stuck", "stuck: run_command failed 6 times in a row (circuit breaker), after a warning at 4")
    assert state.warnings == 1 and state.tool_errors == {"run_command": 6}


def test_errors_are_counted_per_tool():
    # Two tools failing in turn: each has its own count, so neither reaches 4 within 6 calls.
    seq = [("run_command", False), ("read_file", False)] * 3
    assert tool_signals(seq) == ["ok"] * 6
    # ... but the fourth failure of each warns about that tool.
    assert tool_signals(seq + [("run_command", False), ("read_file", False)])[-2:] == ["warn", "warn"]


def test_other_tools_succeeding_in_between_do_not_reset_a_tools_count():
    seq = [("run_command", False), ("list_dir", True)] * 6
    assert tool_signals(seq)[::2] == ["ok", "ok", "ok", "warn", "ok", "stuck"]


def test_a_success_of_the_tool_resets_its_count_and_its_warning():
    seq = [("run_command", False)] * 4 + [("run_command", True)] + [("run_command", False)] * 6
    assert tool_signals(seq) == ["ok"] * 3 + ["warn", "ok"] + ["ok"] * 3 + ["warn", "ok", "stuck"]


def test_a_successful_edit_resets_every_count_but_a_failed_one_does_not():
    edit_ok = ("edit_file", True, True)
    edit_failed_but_changed = ("run_command", False, True)  # e.g. a build that wrote files and failed
    seq = [("run_tests", False)] * 3 + [edit_ok] + [("run_tests", False)] * 3
    assert tool_signals(seq) == ["ok"] * 7
    seq = [("run_command", False)] * 3 + [edit_failed_but_changed]
    assert tool_signals(seq)[-1] == "warn"


def test_a_lower_stop_and_an_off_switch():
    assert tool_signals([("grep", False)] * 3, stop=3) == ["warn", "ok", "stuck"]
    assert tool_signals([("grep", False)] * 2, stop=2) == ["warn", "stuck"]
    assert tool_signals([("grep", False)] * 20, stop=None) == ["ok"] * 20


def test_replies_without_a_successful_call_warn_at_six_and_stop_at_eight():
    state, signals, texts = BreakerState(), [], []
    for _ in range(8):
        state, signal, text = after_reply(state, progressed=False)
        signals.append(signal)
        texts.append(text)
    assert signals == ["ok"] * 5 + ["warn", "ok", "stuck"]
    assert texts[5].startswith("Your last 6 steps made no progress")
    assert texts[7] == "stuck: 8 steps in a row without a successful tool call (circuit breaker), after a warning at 6"


def test_a_reply_with_a_successful_call_resets_the_no_progress_count():
    state = BreakerState()
    for progressed in [False] * 6 + [True] + [False] * 7:
        state, signal, _ = after_reply(state, progressed=progressed)
        assert signal != "stuck"
    assert state.idle_replies == 7 and state.idle_warned and state.warnings == 2
    assert after_reply(state, progressed=False)[1] == "stuck"
    assert after_reply(state, progressed=False, stop=None)[1] == "ok"


def test_the_state_round_trips_through_json_and_the_given_state_is_kept():
    state = BreakerState()
    new, _, _ = after_call(state, tool="run_command", ok=False, workspace_changed=False)
    assert state.tool_errors == {}  # not modified
    assert BreakerState.model_validate_json(new.model_dump_json()) == new
    # A carry recorded before the breakers existed reads with fresh ones.
    old = AgentCarry(workspace=WORKSPACE, limits=Limits()).model_dump(by_alias=True)
    del old["breakers"], old["limits"]["max_tool_errors"], old["limits"]["max_steps_without_progress"]
    carry = AgentCarry.model_validate(old)
    assert carry.breakers == BreakerState() and carry.limits.max_tool_errors == 6


# -- through the loop -------------------------------------------------------------------------

WORKSPACE = WorkspaceRef(repo="local/sample", path="/nowhere")
COMMANDS = ["false", "exit 3", "ls /nonexistent", "cat /nope", "test -f x", "grep zzz README.md", "exit 1", "false 2"]


def command(n: int) -> ToolCallRef:
    text = COMMANDS[(n - 1) % len(COMMANDS)]
    return ToolCallRef(
        id=f"c{n}",
        name="run_command",
        summary=f"run_command {text}",
        args_digest=hashlib.sha256(text.encode()).hexdigest(),  # all different: no doom loop
        risk="exec",
        decision="allow",
    )


def reply(step: int, *calls: ToolCallRef, text: str = "") -> ModelStepOutput:
    return ModelStepOutput(
        transcript=f"t{step}",
        reply_digest=f"r{step}",
        final_text=None if calls else text,
        tool_calls=list(calls),
        usage=Usage(input_tokens=100, output_tokens=10),
        priced=True,
        cost_usd=0.0,
    )


class Model:
    def __init__(self, script) -> None:
        self.script, self.requests = script, []

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        self.requests.append(request)
        return self.script(request.step)

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        raise AssertionError("no compaction here")


class Tools:
    """run_command fails (exit code 1) unless `succeeds(call_id)`; every other tool succeeds."""

    def __init__(self, succeeds=lambda call_id: False) -> None:
        self.succeeds = succeeds

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        ok = request.name != "run_command" or self.succeeds(request.call_id)
        return ToolResult(
            call_id=request.call_id, name=request.name, ok=ok, preview="ok" if ok else f"{request.call_id}: exit code 1"
        )


def loop_for(model: Model, *, agent: str = "code", **limits) -> tuple[AgentLoop, AgentCarry, UnattendedHost]:
    inp = AgentInput(agent=agent, model="scripted:none", goal="g", workspace=WORKSPACE, limits=Limits(**limits))
    carry = AgentCarry(workspace=inp.workspace, limits=inp.limits)
    host = UnattendedHost(clock=lambda: 1_000.0)
    return AgentLoop(inp, get_agent(agent), carry, model=model, tools=Tools(), host=host, run_id="r"), carry, host


async def test_different_failing_commands_warn_the_model_then_stop_the_run_as_stuck():
    model = Model(lambda n: reply(n, command(n)))
    loop, carry, host = loop_for(model)

    outcome = await loop.run()

    reason = "stuck: run_command failed 6 times in a row (circuit breaker), after a warning at 4"
    assert outcome == Stuck(reason)
    assert len(model.requests) == 6  # stopped right after the sixth failure, long before the step limit
    assert not any(model.requests[n].inject for n in range(4))
    assert model.requests[4].inject[0].startswith("The run_command tool has failed 4 times in a row")
    assert host.warnings == [model.requests[4].inject[0]]
    assert carry.doom.warnings == 0  # every call differs: the doom-loop watch saw nothing
    result = result_of(outcome, carry)
    assert (result.state, result.reason, result.steps) == ("stuck", reason, 6)


async def test_failing_calls_of_different_tools_stop_the_run_for_lack_of_progress():
    def script(n: int) -> ModelStepOutput:
        # A run_command that fails, then an unknown tool (refused: an error result), in turn.
        if n % 2:
            return reply(n, command(n))
        bogus = command(n).model_copy(update={"name": f"tool_{n}", "summary": f"tool_{n}"})
        return reply(n, bogus)

    model = Model(script)
    loop, carry, host = loop_for(model, max_tool_errors=None)

    outcome = await loop.run()

    assert outcome == Stuck(
        "stuck: 8 steps in a row without a successful tool call (circuit breaker), after a warning at 6"
    )
    assert len(model.requests) == 8
    assert model.requests[6].inject[0].startswith("Your last 6 steps made no progress")


async def test_a_command_that_succeeds_now_and_then_keeps_the_run_going():
    model = Model(lambda n: reply(n, command(n)) if n < 12 else reply(n, text="done"))
    loop, carry, host = loop_for(model, agent="code")
    loop.tools = Tools(succeeds=lambda call_id: int(call_id[1:]) % 3 == 0)  # every third command passes

    outcome = await loop.run()

    assert outcome == Completed(final_text="done", reply_digest="r12")
    assert host.warnings == [] and carry.breakers.tool_errors == {"run_command": 2}


async def test_off_switches_leave_the_run_to_the_step_limit():
    model = Model(lambda n: reply(n, command(n)))
    loop, carry, host = loop_for(model, max_steps=10, max_tool_errors=None, max_steps_without_progress=None)

    outcome = await loop.run()

    assert outcome.state == "limit_reached" and len(model.requests) == 10
    assert host.warnings == []


async def test_a_host_without_the_change_runs_without_breakers():
    """A run recorded before the breakers existed (workflow.patched false) replays without them."""
    model = Model(lambda n: reply(n, command(n)) if n <= 10 else reply(n, text="gave up"))
    loop, carry, host = loop_for(model)
    host.has_change = lambda name: name != cb.CIRCUIT_BREAKERS  # type: ignore[method-assign]

    outcome = await loop.run()

    assert outcome == Completed(final_text="gave up", reply_digest="r11")
    assert host.warnings == [] and carry.breakers == BreakerState()
