"""Repository hooks without a server: which after-edit hooks an edit sets off and the command lines
they run (agents/hooks.py), and the loop's before-submit rule (agents/loop.py): an accepted submit
stands only once the hooks passed on exactly the workspace it hands over."""

from __future__ import annotations

import pytest

from shopfloor.agents.hooks import after_edit_commands, checks_submit, hooks_key, submit_refused
from shopfloor.agents.loop import AgentLoop, Stuck, Submitted, UnattendedHost
from shopfloor.agents.registry import AGENTS, get_agent
from shopfloor.agents.run_state import AgentCarry
from shopfloor.models.agent_run import (
    AgentInput,
    CommandHook,
    CommandPolicy,
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

pytestmark = pytest.mark.fast

FMT = CommandHook(run="python tools/fmt.py", files=["*.py"], timeout_s=120)
ALWAYS = CommandHook(run="make tidy", timeout_s=60)
DOCS = CommandHook(run="mdfmt", files=["docs/**", "README.md"])


# --- after-edit: which hooks, which command lines --------------------------------------------------


def test_a_hook_with_files_runs_only_for_matching_paths_which_it_gets_as_arguments():
    assert after_edit_commands([FMT], ["calc/ops.py"]) == [(FMT, "python tools/fmt.py calc/ops.py")]
    assert after_edit_commands([FMT], ["README.md"]) == []
    assert after_edit_commands([DOCS], ["docs/a/b.md"]) == [(DOCS, "mdfmt docs/a/b.md")]
    assert after_edit_commands([DOCS], ["sub/README.md"]) == [(DOCS, "mdfmt sub/README.md")]  # no `/`: any depth
    assert after_edit_commands([DOCS], ["src/docs.py"]) == []


def test_a_hook_without_files_runs_as_written_after_every_edit_in_the_policys_order():
    assert after_edit_commands([ALWAYS, FMT], ["notes.txt"]) == [(ALWAYS, "make tidy")]
    assert after_edit_commands([FMT, ALWAYS], ["a.py"]) == [(FMT, "python tools/fmt.py a.py"), (ALWAYS, "make tidy")]


def test_paths_are_normalized_before_matching_and_appended_shell_quoted():
    assert after_edit_commands([FMT], ["./src/../calc/ops.py"]) == [(FMT, "python tools/fmt.py calc/ops.py")]
    hostile = "a b;rm -rf ~;$(id)`x`.py"
    [(_, line)] = after_edit_commands([FMT], [hostile])
    assert line == "python tools/fmt.py 'a b;rm -rf ~;$(id)`x`.py'"
    [(_, line)] = after_edit_commands([FMT], ["it's.py"])
    assert line == "python tools/fmt.py 'it'\"'\"'s.py'"


def test_a_path_that_looks_like_an_option_is_never_read_as_one():
    [(_, line)] = after_edit_commands([FMT], ["--check.py"])
    assert line == "python tools/fmt.py ./--check.py"


def test_the_same_path_twice_is_passed_once():
    assert after_edit_commands([FMT], ["a.py", "./a.py"]) == [(FMT, "python tools/fmt.py a.py")]


# --- before-submit: what the model reads, when the hooks run again ---------------------------------


def test_a_refused_submit_says_why_and_carries_every_failing_hooks_report():
    text = submit_refused(
        ["before-submit hook `lint`: exit code 1\nE1 bad", "before-submit hook `types`: exit code 2"], changed=False
    )
    assert text.startswith("error: submit refused: the repository's before-submit checks failed")
    assert "exit code 1\nE1 bad" in text and "`types`: exit code 2" in text
    changed = submit_refused([], changed=True)
    assert "changed files" in changed and "run the tests again" in changed


def test_the_hooks_pass_is_remembered_by_the_exact_workspace_state_and_never_for_a_local_checkout():
    ws = WorkspaceRef(repo="acme/calc", clone_url="https://x/acme/calc.git", base_sha="a" * 40, patch_digest="p1")
    assert hooks_key(ws) != hooks_key(ws.model_copy(update={"patch_digest": "p2"}))
    assert hooks_key(ws) != hooks_key(ws.model_copy(update={"base_sha": "b" * 40}))
    assert hooks_key(WorkspaceRef(repo="local/x", path="/somewhere")) is None


# --- the loop: an accepted submit and the hooks -----------------------------------------------------

FIX = {"pr_title": "t", "pr_body": "b", "summary": "s"}
LINT = CommandHook(run="python tools/lint.py", timeout_s=60)
BASE = WorkspaceRef(repo="acme/calc", clone_url="https://x/acme/calc.git", base_sha="a" * 40)


def _ref(name: str, ident: str) -> ToolCallRef:
    return ToolCallRef(id=ident, name=name, summary=name, args_digest=f"{name}-{ident}", risk="read")


class Script:
    """The model: each step's reply from `replies` (a submit is accepted by model_step)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.requests = replies, []

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        self.requests.append(request)
        kind = self.replies[request.step - 1]
        call = _ref(kind, f"c{request.step}")
        output = dict(FIX) if kind == "submit" else None
        return ModelStepOutput(
            transcript=f"t{request.step}",
            reply_digest=f"r{request.step}",
            tool_calls=[call],
            priced=True,
            output=output,
        )

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        raise AssertionError("no compaction here")


class Edits:
    """Tools: every edit_file makes a new patch."""

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        ws = request.workspace.model_copy(update={"patch_digest": f"patch-{call.id}"})
        return ToolResult(call_id=call.id, name=call.name, ok=True, preview="edited", workspace=ws)


class Hooks:
    """The before-submit hooks: fail while `failing` says so; every run recorded."""

    def __init__(self, failing: list[bool]) -> None:
        self.failing, self.ran = failing, []

    async def before_submit(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        self.ran.append(request)
        fail = self.failing.pop(0) if self.failing else False
        preview = "error: submit refused: lint failed" if fail else "before-submit hooks passed"
        return ToolResult(call_id=call.id, name=call.name, ok=not fail, preview=preview, workspace=request.workspace)


def _loop(model: Script, hooks: Hooks | None, before: list[CommandHook]) -> tuple[AgentLoop, AgentCarry]:
    inp = AgentInput(
        agent="fix",
        model="scripted:none",
        goal="g",
        workspace=BASE,
        limits=Limits(max_steps=20),
        commands=CommandPolicy(before_submit=before),
    )
    carry = AgentCarry(workspace=BASE, limits=inp.limits)
    host = UnattendedHost(clock=lambda: 1_000.0)
    loop = AgentLoop(inp, get_agent("fix"), carry, model=model, tools=Edits(), host=host, run_id="r", hooks=hooks)
    return loop, carry


async def test_a_failing_hook_refuses_the_accepted_submit_with_its_report_and_a_later_one_passes():
    model, hooks = Script(["edit_file", "submit", "edit_file", "submit"]), Hooks([True, False])
    loop, carry = _loop(model, hooks, [LINT])

    outcome = await loop.run()

    assert isinstance(outcome, Submitted) and outcome.reply_digest == "r4"
    assert [r.workspace.patch_digest for r in hooks.ran] == ["patch-c1", "patch-c3"]
    assert [r.call_id for r in hooks.ran] == ["c2", "c4"] and hooks.ran[0].commands.before_submit == [LINT]
    [refusal] = model.requests[2].append  # the step after the refused submit reads why
    assert (refusal.call_id, refusal.name, refusal.ok) == ("c2", "submit", False)
    assert "lint failed" in refusal.preview
    assert carry.submit.hooks_passed_on == hooks_key(carry.workspace)


async def test_hooks_run_again_only_once_the_workspace_changed_since_they_passed():
    # A pass recorded on the base: the edit makes a new state, so they run again.
    model, hooks = Script(["edit_file", "submit"]), Hooks([])
    loop, carry = _loop(model, hooks, [LINT])
    carry.submit = carry.submit.model_copy(update={"hooks_passed_on": hooks_key(BASE)})

    assert isinstance(await loop.run(), Submitted)
    assert len(hooks.ran) == 1  # the edit changed the workspace after the recorded pass

    model, hooks = Script(["submit"]), Hooks([])
    loop, carry = _loop(model, hooks, [LINT])
    carry.submit = carry.submit.model_copy(update={"hooks_passed_on": hooks_key(BASE)})
    assert isinstance(await loop.run(), Submitted)
    assert hooks.ran == []  # nothing changed since they passed


async def test_a_run_whose_hooks_cannot_run_never_submits():
    model = Script(["submit"] * 10)
    loop, carry = _loop(model, None, [LINT])

    outcome = await loop.run()

    assert isinstance(outcome, Stuck)  # the same refused submit again and again
    assert all("hooks cannot run here" in r.preview for req in model.requests[1:] for r in req.append)


async def test_without_hooks_the_submit_stands_and_nothing_runs():
    model, hooks = Script(["edit_file", "submit"]), Hooks([True])
    loop, _ = _loop(model, hooks, [])
    assert isinstance(await loop.run(), Submitted)
    assert hooks.ran == []


def test_only_agents_whose_edits_are_handed_on_wait_for_the_hooks():
    assert [name for name in AGENTS if checks_submit(get_agent(name))] == ["fix", "merge"]


async def test_a_reviewers_submit_is_not_held_up_by_the_hooks():
    inp = AgentInput(
        agent="review",
        model="scripted:none",
        goal="g",
        workspace=BASE,
        limits=Limits(max_steps=5),
        commands=CommandPolicy(before_submit=[LINT]),
    )
    model, hooks = Script(["submit"]), Hooks([True])
    carry = AgentCarry(workspace=BASE, limits=inp.limits)
    host = UnattendedHost(clock=lambda: 1_000.0)
    loop = AgentLoop(inp, get_agent("review"), carry, model=model, tools=Edits(), host=host, run_id="r", hooks=hooks)
    assert isinstance(await loop.run(), Submitted)
    assert hooks.ran == []
