"""The agent loop's rules (agents/loop.py) without a server: the same loop AgentWorkflow runs,
driven here by a scripted model, recording tools and the unattended host."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from shopfloor.agents import submission
from shopfloor.agents.loop import (
    AgentLoop,
    Cancelled,
    Completed,
    Failed,
    LimitReached,
    Stuck,
    Submitted,
    UnattendedHost,
    result_of,
)
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

WORKSPACE = WorkspaceRef(repo="local/sample", path="/nowhere")


def call(name: str, ident: str = "c1", *, args: str = "", decision: str = "allow", **fields: Any) -> ToolCallRef:
    """A call as model_step returns it; equal `args` give equal digests (the doom-loop key)."""
    digest = hashlib.sha256(f"{name}:{args}".encode()).hexdigest()
    risk = "read" if name in ("read_file", "list_dir", "grep", "glob", "read_output", "submit") else "exec"
    return ToolCallRef(
        id=ident,
        name=name,
        summary=f"{name} {args}".strip(),
        args_digest=digest,
        risk=risk,
        decision=decision,
        **fields,
    )  # type: ignore[arg-type]


def reply(step: int, *calls: ToolCallRef, text: str = "", **fields: Any) -> ModelStepOutput:
    return ModelStepOutput(
        transcript=f"t{step}",
        reply_digest=f"r{step}",
        final_text=None if calls else text,
        tool_calls=list(calls),
        usage=Usage(input_tokens=100, output_tokens=10),
        priced=True,
        cost_usd=0.0,
        **fields,
    )


class ScriptedModel:
    """Answers step n with script(n); keeps every request it was sent."""

    def __init__(self, script: Callable[[int], ModelStepOutput], *, on_step: Callable[[int], None] = lambda n: None):
        self.script, self.on_step = script, on_step
        self.requests: list[ModelStepInput] = []

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        self.requests.append(request)
        self.on_step(request.step)
        return self.script(request.step)

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        raise AssertionError("no test here reaches the compaction budget")


class RecordingTools:
    """Every call succeeds with a preview naming it, unless `results` says otherwise."""

    def __init__(self, results: Callable[[ToolInput], ToolResult] | None = None) -> None:
        self.ran: list[ToolInput] = []
        self.results = results

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        self.ran.append(request)
        if self.results is not None:
            return self.results(request)
        return ToolResult(call_id=request.call_id, name=request.name, ok=True, preview=f"ran {request.name}")


def loop_for(
    model: ScriptedModel,
    tools: RecordingTools | None = None,
    *,
    agent: str = "explore",
    max_steps: int = 40,
    host: UnattendedHost | None = None,
) -> tuple[AgentLoop, AgentCarry, UnattendedHost]:
    inp = AgentInput(
        agent=agent, model="scripted:none", goal="the goal", workspace=WORKSPACE, limits=Limits(max_steps=max_steps)
    )
    carry = AgentCarry(workspace=inp.workspace, limits=inp.limits)
    host = host or UnattendedHost(clock=lambda: 1_000.0)
    loop = AgentLoop(
        inp, get_agent(agent), carry, model=model, tools=tools or RecordingTools(), host=host, run_id="test/run"
    )
    return loop, carry, host


async def test_a_final_answer_completes_the_run():
    model = ScriptedModel(
        lambda n: reply(n, call("read_file", args="README.md")) if n == 1 else reply(n, text="It greets.")
    )
    loop, carry, _ = loop_for(model)

    outcome = await loop.run()

    assert outcome == Completed(final_text="It greets.", reply_digest="r2")
    assert model.requests[0].goal == "the goal" and model.requests[1].goal is None
    assert [r.preview for r in model.requests[1].append] == ["ran read_file"]  # the results go with the next step
    result = result_of(outcome, carry)
    assert (result.state, result.steps, result.final_answer) == ("completed", 2, "It greets.")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (200, 20)


async def test_the_step_limit_ends_the_run_before_another_model_call():
    model = ScriptedModel(lambda n: reply(n, call("read_file", args=f"file{n}")))
    loop, carry, _ = loop_for(model, max_steps=3)

    outcome = await loop.run()

    assert outcome == LimitReached("step limit reached: 3 of 3 steps")
    assert len(model.requests) == 3 and carry.spent.steps == 3


async def test_wall_time_is_read_from_the_hosts_clock():
    times = iter([0.0, 0.0, 100.0, 200.0, 300.0])  # the run's start, then one reading before each step
    model = ScriptedModel(lambda n: reply(n, call("read_file", args=f"file{n}")))
    loop, carry, _ = loop_for(model, host=UnattendedHost(clock=lambda: next(times)))
    carry.limits = Limits(max_wall_s=250)

    outcome = await loop.run()

    assert outcome == LimitReached("wall-time limit reached: 5m00s of 4m10s")
    assert len(model.requests) == 3


async def test_the_same_call_warns_on_the_third_time_and_the_fourth_is_stuck():
    model = ScriptedModel(lambda n: reply(n, call("read_file", args="README.md")))
    loop, carry, host = loop_for(model)

    outcome = await loop.run()

    assert isinstance(outcome, Stuck)
    assert (
        outcome.reason
        == "stuck: called read_file with the same arguments 4 times in the last calls, and again after a warning"
    )
    assert len(model.requests) == 4
    warning = "You have called read_file with the same arguments 3 times"
    assert not any(warning in n for r in model.requests[:3] for n in r.inject)
    assert model.requests[3].inject[0].startswith(warning)  # queued for the model after the third result
    assert host.warnings[0].startswith(warning)
    assert result_of(outcome, carry).state == "stuck"


async def test_an_agent_that_owes_a_submit_is_reminded_once_then_fails():
    model = ScriptedModel(lambda n: reply(n, text="Here is my triage, in prose."))
    loop, carry, _ = loop_for(model, agent="triage")

    outcome = await loop.run()

    assert outcome == Failed(submission.no_submit_reason("TriageResult"))
    assert len(model.requests) == 2
    assert model.requests[0].inject == []
    assert model.requests[1].inject == [submission.nudge_text("TriageResult")]
    assert carry.submit.nudged


async def test_an_accepted_submit_ends_the_run_with_its_output():
    output = {"summary": "a bug", "labels": []}
    model = ScriptedModel(
        lambda n: (
            reply(n, call("read_file", args="a"))
            if n == 1
            else reply(n, call("submit"), output=output, output_digest="o2")
        )
    )
    tools = RecordingTools()
    loop, carry, _ = loop_for(model, tools, agent="triage")

    outcome = await loop.run()

    assert outcome == Submitted(output=output, output_digest="o2", reply_digest="r2")
    assert [t.name for t in tools.ran] == ["read_file"]  # submit is no tool run
    result = result_of(outcome, carry)
    assert (result.state, result.output, result.output_digest, result.final_digest) == ("completed", output, "o2", "r2")


async def test_a_refused_submit_is_answered_with_its_error_and_the_run_goes_on():
    refused = call("submit", submit_error="error: invalid TriageResult: summary: Field required.")
    model = ScriptedModel(lambda n: reply(n, refused) if n == 1 else reply(n, call("submit"), output={"x": 1}))
    tools = RecordingTools()
    loop, _, _ = loop_for(model, tools, agent="triage")

    outcome = await loop.run()

    assert isinstance(outcome, Submitted) and tools.ran == []
    assert [(r.ok, r.preview) for r in model.requests[1].append] == [(False, refused.submit_error)]


async def test_cancel_ends_the_run_at_the_next_turn_without_another_model_call():
    host = UnattendedHost(clock=lambda: 0.0)

    def cancel_during_step_two(n: int) -> None:
        if n == 2:
            host.cancel_reason = "cancelled by an operator"

    model = ScriptedModel(lambda n: reply(n, call("read_file", args=f"f{n}")), on_step=cancel_during_step_two)
    tools = RecordingTools()
    loop, carry, _ = loop_for(model, tools, host=host)

    outcome = await loop.run()

    assert outcome == Cancelled("cancelled by an operator")
    assert len(model.requests) == 2 and len(tools.ran) == 2  # step 2's calls still ran: they were asked for
    assert result_of(outcome, carry).reason == "cancelled by an operator"


async def test_the_refusal_ladder_answers_unknown_denied_and_unapproved_calls_without_running_them():
    calls = [
        call("launch_rockets", "c1"),
        call("run_command", "c2", args="rm -rf /", decision="deny", decision_reason="deny rule: rm -rf"),
        call("run_command", "c3", args="git push", decision="ask", decision_reason="ask rule: git push"),
        call("read_file", "c4", args="README.md"),
    ]
    model = ScriptedModel(lambda n: reply(n, *calls) if n == 1 else reply(n, text="done"))
    tools = RecordingTools()
    loop, _, host = loop_for(model, tools, agent="code")

    await loop.run()

    assert [t.call_id for t in tools.ran] == ["c4"]
    answered = {r.call_id: (r.ok, r.preview) for r in model.requests[1].append}
    assert answered["c1"][1].startswith("error: unknown tool 'launch_rockets'; this agent's tools are: ")
    assert answered["c2"] == (False, "denied: deny rule: rm -rf")
    assert answered["c3"] == (False, "rejected: no operator watches this run (the call was not run)")
    assert answered["c4"] == (True, "ran read_file")
    assert [r.call_id for r in model.requests[1].append] == ["c1", "c2", "c3", "c4"]  # in the order asked
    assert [ok for _, kind, _, ok in host.events if kind == "tool"] == [False, False, False, True]


async def test_an_explore_agent_cannot_call_a_tool_outside_its_set():
    model = ScriptedModel(lambda n: reply(n, call("write_file", args="x")) if n == 1 else reply(n, text="ok"))
    tools = RecordingTools()
    loop, _, _ = loop_for(model, tools, agent="explore")

    await loop.run()

    assert tools.ran == []
    assert model.requests[1].append[0].preview.startswith("error: unknown tool 'write_file'")


async def test_a_tool_checkpoint_becomes_the_workspace_and_a_cut_output_becomes_readable():
    edited = WorkspaceRef(repo="o/r", clone_url="file:///r", base_sha="a" * 40, patch_digest="p1")

    def results(req: ToolInput) -> ToolResult:
        if req.name == "write_file":
            return ToolResult(call_id=req.call_id, name=req.name, ok=True, workspace=edited)
        return ToolResult(call_id=req.call_id, name=req.name, ok=True, output_digest="big", output_bytes=10**6)

    script = {
        1: reply(1, call("write_file", args="a")),
        2: reply(2, call("run_tests")),
        3: reply(3, call("read_output")),
    }
    model = ScriptedModel(lambda n: script.get(n) or reply(n, text="done"))
    tools = RecordingTools(results)
    loop, carry, _ = loop_for(model, tools, agent="code")

    await loop.run()

    assert carry.workspace == edited
    assert tools.ran[1].workspace == edited  # the next call works on the checkpoint
    assert tools.ran[2].readable == ["big"]  # read_output may page the cut output
    assert tools.ran[0].readable == [] and tools.ran[1].readable == []
    assert carry.readable_outputs == ["big", "big"]
