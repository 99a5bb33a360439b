"""Context limits: the providers' "too long for the context window" answers are told apart from
other refusals, and the loop compacts and tries again once; a reply cut off at the output limit is
continued (bounded) and joined; a cut-off reply's last call is not run.

The loop runs here without a server against a scripted ModelStep (tests/workflows/
test_context_limits.py runs the same over the fake provider and Temporal); the classification
tests build the SDKs' own exceptions, and one test per API reads the fake server's real answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import anthropic
import openai
import pytest

from shopfloor.activities.model_step import model_call_failure
from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.activities.providers.base import ContextTooLong as ProviderContextTooLong
from shopfloor.activities.providers.errors import to_model_call_error
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider
from shopfloor.agents.compaction import MessageMeta, plan_compaction
from shopfloor.agents.context_limits import (
    CONTINUE_NOTE,
    CUT_OFF_CALL_ERROR,
    MAX_CONTINUATIONS,
    ContextTooLong,
    cut_off_note,
    mark_cut_off_call,
)
from shopfloor.agents.loop import AgentLoop, Completed, Failed, UnattendedHost, result_of
from shopfloor.agents.registry import get_agent
from shopfloor.agents.run_state import AgentCarry
from shopfloor.models import failure_types
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
from shopfloor.models.transcript import Message, ModelRequest, ToolCall, Usage
from shopfloor.testing import FakeModelServer, ScriptTurn

try:  # the HTTP library the installed SDKs are built on
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

OPENAI_TOO_LONG = {
    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 "
    "tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded",
}
ANTHROPIC_TOO_LONG = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "prompt is too long: 208656 tokens > 200000 maximum"},
}


def _response(status: int, url: str) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", url))


def _openai_error(status: int, body: dict) -> openai.APIStatusError:
    # The SDK keeps only the inner "error" object as `body`, as it does for a real answer.
    cls = openai.BadRequestError if status == 400 else openai.APIStatusError
    return cls(body.get("message", "error"), response=_response(status, "http://x/v1/chat/completions"), body=body)


def _anthropic_error(status: int, body: dict) -> anthropic.APIStatusError:
    cls = anthropic.BadRequestError if status == 400 else anthropic.APIStatusError
    return cls("error", response=_response(status, "http://x/v1/messages"), body=body)


def _mapped(exc: Exception):
    return to_model_call_error(exc, label="p:m", model="m", base_url="http://x", key_env="K")


# -- telling "too long" apart -------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize(
    "exc",
    [
        _openai_error(400, OPENAI_TOO_LONG),
        _anthropic_error(400, ANTHROPIC_TOO_LONG),
        # Anthropic when the prompt and max_tokens together pass the window
        _anthropic_error(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
                    "decrease input length or `max_tokens` and try again",
                },
            },
        ),
        # vLLM and other OpenAI-compatible servers: no code, the message says it
        _openai_error(
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 131072 tokens. However, you requested "
                "351430 tokens. Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
            },
        ),
        # llama.cpp's server
        _openai_error(
            400,
            {"message": "the request exceeds the available context size", "type": "exceed_context_size_error"},
        ),
    ],
    ids=["openai", "anthropic", "anthropic-with-max-tokens", "vllm", "llama-cpp"],
)
def test_too_long_for_the_context_window_is_its_own_final_failure(exc: Exception) -> None:
    error = _mapped(exc)
    assert isinstance(error, ProviderContextTooLong)
    assert (error.retryable, error.status, error.retry_after) == (False, 400, None)
    assert str(error).startswith("p:m: 400 Bad Request: the conversation is too long for model 'm': ")
    failure = model_call_failure(error)
    assert failure.type == failure_types.MODEL_CONTEXT_TOO_LONG and failure.non_retryable
    assert failure.message == str(error)


@pytest.mark.fast
@pytest.mark.parametrize(
    "exc",
    [
        _openai_error(400, {"message": "Invalid value for 'tools'.", "type": "invalid_request_error", "code": None}),
        _anthropic_error(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: 9999 > 4096"}}
        ),
        # the same words with another status are not this refusal (a proxy's 413, a rate limit)
        _openai_error(413, OPENAI_TOO_LONG),
        _anthropic_error(429, ANTHROPIC_TOO_LONG),
    ],
    ids=["openai-other-400", "anthropic-other-400", "413", "429"],
)
def test_other_refusals_stay_what_they_were(exc: Exception) -> None:
    error = _mapped(exc)
    assert not isinstance(error, ProviderContextTooLong)
    assert model_call_failure(error).type != failure_types.MODEL_CONTEXT_TOO_LONG


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_the_fake_server_refuses_a_prompt_over_its_window_in_the_providers_words(api: str) -> None:
    request = ModelRequest(model="m", system="s", messages=[Message(role="user", content="x" * 400)])
    with FakeModelServer([ScriptTurn(content="never")], context_window_tokens=50) as server:
        if api == "openai":
            provider = OpenAIChatProvider("m", "sk-test", server.openai_base_url)
        else:
            provider = AnthropicMessagesProvider("m", "sk-test", server.anthropic_base_url)
        try:
            with pytest.raises(ProviderContextTooLong) as info:
                await provider.complete(request)
        finally:
            await provider.aclose()
        logged = server.requests
    assert [r.status for r in logged] == [400]
    if api == "openai":
        assert "This model's maximum context length is 50 tokens. However, your messages resulted in" in str(info.value)
    else:
        assert re.search(r"prompt is too long: \d+ tokens > 50 maximum$", str(info.value))


# -- the forced plan ----------------------------------------------------------------------------


@pytest.mark.fast
def test_a_forced_plan_folds_a_transcript_the_estimate_says_fits() -> None:
    messages = [MessageMeta(role="user", tokens=50)] + [
        MessageMeta(role=role, tokens=100) for role in ["assistant", "user"] * 5
    ]
    assert plan_compaction(messages, budget_tokens=80_000) is None  # the estimate: it fits
    plan = plan_compaction(messages, budget_tokens=80_000, force=True)
    assert plan is not None and plan.keep[0] == 0 and plan.summarize[0] == 1
    kept = sum(messages[i].tokens for i in plan.keep[1:])
    assert kept <= 0.6 * (sum(m.tokens for m in messages) // 2)  # against half the total
    # Nothing older than the newest turn: nothing to fold, forced or not.
    assert plan_compaction(messages[:2], budget_tokens=80_000, force=True) is None


@pytest.mark.fast
def test_a_cut_off_replys_last_call_is_refused_and_the_ones_before_it_stand() -> None:
    message = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="a", name="read_file", arguments={"path": "a"}),
            ToolCall(id="b", name="write_file", arguments={"path": "b", "content": "half a fi"}),
        ],
    )
    marked = mark_cut_off_call(message)
    assert [c.arguments_error for c in marked.tool_calls] == [None, CUT_OFF_CALL_ERROR]
    assert mark_cut_off_call(Message(role="assistant", content="text")).tool_calls == []


# -- the loop -----------------------------------------------------------------------------------


def _reply(step: int, *calls: ToolCallRef, text: str = "", finish: str = "stop", **fields) -> ModelStepOutput:
    return ModelStepOutput(
        transcript=f"t{step}",
        reply_digest=f"r{step}",
        final_text=None if calls else text,
        tool_calls=list(calls),
        finish_reason=finish,
        usage=Usage(input_tokens=100, output_tokens=10),
        priced=True,
        cost_usd=0.0,
        context_tokens=500,
        **fields,
    )


class Model:
    """A ModelStep whose steps follow `script` (which may raise ContextTooLong) and whose
    compactions fold `folded` messages."""

    def __init__(
        self,
        script: Callable[[ModelStepInput, int], ModelStepOutput],
        folded: int = 4,
        compaction_too_long: bool = False,
    ) -> None:
        self.script, self.folded, self.compaction_too_long = script, folded, compaction_too_long
        self.steps: list[ModelStepInput] = []
        self.compactions: list[CompactInput] = []

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        self.steps.append(request)
        return self.script(request, len(self.steps))

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        self.compactions.append(request)
        if self.compaction_too_long:
            raise ContextTooLong(TOO_LONG)
        return CompactOutput(
            transcript=f"compacted-{len(self.compactions)}",
            folded=self.folded,
            context_tokens=100,
            usage=Usage(input_tokens=1000, output_tokens=50),
            priced=True,
            cost_usd=0.0,
        )


class Tools:
    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        return ToolResult(call_id=request.call_id, name=request.name, ok=True, preview="read it")


def _loop(
    model: Model, *, agent: str = "explore", budget: int | None = None
) -> tuple[AgentLoop, AgentCarry, UnattendedHost]:
    inp = AgentInput(
        agent=agent,
        compaction_budget_tokens=budget,
        model="openai:m",
        goal="the goal",
        workspace=WorkspaceRef(repo="local/sample", path="/nowhere"),
        limits=Limits(max_steps=40),
    )
    carry = AgentCarry(workspace=inp.workspace, limits=inp.limits)
    host = UnattendedHost(clock=lambda: 1_000.0)
    loop = AgentLoop(inp, get_agent(agent), carry, model=model, tools=Tools(), host=host, run_id="test/run")
    return loop, carry, host


def _read(n: int) -> ToolCallRef:
    return ToolCallRef(id=f"c{n}", name="read_file", summary=f"read_file f{n}", args_digest=f"d{n}")


TOO_LONG = "openai:m: 400 Bad Request: the conversation is too long for model 'm': too long"


@pytest.mark.fast
async def test_too_long_compacts_at_once_forced_and_tries_the_step_once_more() -> None:
    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        if n == 1:
            return _reply(1, _read(1))
        if n == 2:
            raise ContextTooLong(TOO_LONG)
        return _reply(3, text="It greets.")

    model = Model(script)
    loop, carry, host = _loop(model)

    outcome = await loop.run()

    assert outcome == Completed(final_text="It greets.", reply_digest="r3")
    assert len(model.compactions) == 1 and model.compactions[0].force
    assert model.compactions[0].transcript == "t1" and model.compactions[0].budget_tokens == 80_000
    # The retried step is the same step: on the compacted transcript, the results still to send.
    first_try, retry = model.steps[1], model.steps[2]
    assert (first_try.step, retry.step) == (2, 2)
    assert first_try.transcript == "t1" and retry.transcript == "compacted-1"
    assert [r.preview for r in retry.append] == ["read it"]
    result = result_of(outcome, carry)
    assert result.steps == 2 and result.usage.input_tokens == 100 * 2 + 1000  # the refusal cost nothing
    assert any("too long for the model" in e[2] and not e[3] for e in host.events)
    assert any(e[2] == "compacted 4 messages into a summary" for e in host.events)


@pytest.mark.fast
async def test_too_long_again_after_the_compaction_fails_the_run_with_a_clear_reason() -> None:
    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        if n == 1:
            return _reply(1, _read(1))
        raise ContextTooLong(TOO_LONG)

    model = Model(script)
    loop, carry, _ = _loop(model)

    outcome = await loop.run()

    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("the conversation is too long for openai:m even after compaction (")
    assert len(model.compactions) == 1 and len(model.steps) == 3  # one retry, no more
    assert result_of(outcome, carry).state == "failed"


@pytest.mark.fast
@pytest.mark.parametrize("folded", [0, None], ids=["nothing-to-fold", "first-step"])
async def test_too_long_with_nothing_to_compact_fails_without_a_pointless_retry(folded: int | None) -> None:
    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        if n == 1 and folded is not None:
            return _reply(1, _read(1))
        raise ContextTooLong(TOO_LONG)

    model = Model(script, folded=folded or 0)
    loop, _, _ = _loop(model)

    outcome = await loop.run()

    assert isinstance(outcome, Failed) and "nothing older in it to compact" in outcome.reason
    assert len(model.steps) == (2 if folded is not None else 1)
    assert len(model.compactions) == (1 if folded is not None else 0)  # no transcript yet: nothing to ask


@pytest.mark.fast
async def test_a_cut_off_answer_is_continued_and_the_parts_joined() -> None:
    parts = ["The answer beg", "ins here and ", "ends here."]

    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        last = n == len(parts)
        return _reply(
            n,
            text="".join(parts[:n]),  # model_step joins the parts it is told this reply continues
            finish="stop" if last else "length",
            answer_digest="joined" if last else None,
        )

    model = Model(script)
    loop, carry, _ = _loop(model)

    outcome = await loop.run()

    assert outcome == Completed(final_text="The answer begins here and ends here.", reply_digest="joined")
    assert [r.continues for r in model.steps] == [[], ["r1"], ["r1", "r2"]]
    assert [r.inject for r in model.steps] == [[], [CONTINUE_NOTE], [CONTINUE_NOTE]]
    assert carry.cut_off == [] and result_of(outcome, carry).final_digest == "joined"


@pytest.mark.fast
async def test_an_answer_still_cut_off_after_the_continuations_completes_with_a_note() -> None:
    model = Model(lambda request, n: _reply(n, text="x" * n, finish="length"))
    loop, carry, host = _loop(model)

    outcome = await loop.run()

    assert len(model.steps) == MAX_CONTINUATIONS + 1
    assert model.steps[-1].continues == [f"r{n}" for n in range(1, MAX_CONTINUATIONS + 1)]
    assert isinstance(outcome, Completed)
    assert outcome.final_text == "x" * (MAX_CONTINUATIONS + 1) + cut_off_note(MAX_CONTINUATIONS)
    assert "incomplete" in (outcome.final_text or "") and carry.cut_off == []
    assert host.warnings == [cut_off_note(MAX_CONTINUATIONS).strip()]


@pytest.mark.fast
async def test_a_tool_call_ends_a_run_of_cut_off_parts() -> None:
    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        if n == 1:
            return _reply(1, text="Let me look", finish="length")
        if n == 2:
            return _reply(2, _read(2), finish="length")  # cut with a call: the call is answered
        return _reply(3, text="done")

    model = Model(script)
    loop, _, _ = _loop(model)

    outcome = await loop.run()

    assert outcome == Completed(final_text="done", reply_digest="r3")
    assert [r.continues for r in model.steps] == [[], ["r1"], []]
    assert [r.preview for r in model.steps[2].append] == ["read it"]


@pytest.mark.fast
@pytest.mark.parametrize("proactive", [True, False], ids=["past-the-budget", "forced"])
async def test_a_summarizing_request_too_long_itself_ends_the_run_with_a_reason_not_an_error(proactive: bool) -> None:
    def script(request: ModelStepInput, n: int) -> ModelStepOutput:
        if n == 1:
            return _reply(1, _read(1))  # context_tokens=500: past a budget of 100
        raise ContextTooLong(TOO_LONG)

    model = Model(script, compaction_too_long=True)
    loop, _, _ = _loop(model, budget=100 if proactive else None)

    outcome = await loop.run()

    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("the conversation is too long for openai:m, and so is the part of it to summarize")
    assert len(model.compactions) == 1 and model.compactions[0].force is not proactive
    assert len(model.steps) == (1 if proactive else 2)
