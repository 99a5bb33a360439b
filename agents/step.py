"""One model step's pure parts, either side of the model call: the request (the agent's prompt and
tools, the conversation as the model reads it) and the reply's calls judged into the ToolCallRefs
the loop gets back (a summary, a digest and a verdict each, never the arguments; submit validated).

The permission verdicts themselves are reached in child processes (activities/judging.py, applying
agents/permissions.py): this module only says which calls to ask about and puts the answers
together. The activity that runs a step is activities/model_step.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any, Protocol

from pydantic import ValidationError

from shopfloor.agents.compaction import estimate_tokens, message_meta
from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.images import text_only
from shopfloor.agents.submission import SUBMIT, validate_submission
from shopfloor.agents.summaries import args_preview, summarize_call
from shopfloor.agents.text_actions import text_action_instructions
from shopfloor.agents.tools import DELEGATE, TOOLS, DelegateArgs
from shopfloor.models.agent_run import Decision, Delegation, ModelStepInput, ToolCallRef
from shopfloor.models.transcript import Message, ModelRequest, ToolCall, ToolSpec

SUBMIT_ERROR_CHARS = 2_000  # a refused submit's error travels in history: keep it short

# --- before the call: the request -----------------------------------------------------------------


def step_request(
    agent: AgentDefinition,
    model: str,
    messages: list[Message],
    *,
    text_actions: bool,
    instructions: str = "",
    environment: str = "",
    images: bool = False,
    extra_tools: tuple[ToolSpec, ...] = (),
) -> ModelRequest:
    """What one step sends `model`: the whole conversation so far, the prompt, then the run's
    `environment` section (agents/run_environment.py), the tools, and last (below shopfloor's own
    rules) the repository's `instructions` as rendered for this step. A model that does not take
    `images` reads a note in place of each (agents/images.py)."""
    system, tools = agent.system_prompt(), [*agent.tool_specs(), *extra_tools]  # extra: the run's MCP tools
    if not images:
        messages = text_only(messages)
    if environment:
        system = f"{system}\n\n{environment}"
    if text_actions:
        system = f"{system}\n\n{text_action_instructions(tools)}"
    if instructions:
        system = f"{system}\n\n{instructions}"
    if text_actions:
        return ModelRequest(model=model, system=system, messages=as_text_conversation(messages))
    return ModelRequest(model=model, system=system, messages=messages, tools=tools)


def as_text_conversation(messages: list[Message]) -> list[Message]:
    """For a model without tool calling: its own actions stay text, results come back as user text."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            out.append(Message(role="assistant", content=m.content or "(no text)"))
        elif m.role == "tool":
            out.append(Message(role="user", content=f"Observation from {m.name} ({m.tool_call_id}):\n{m.content}"))
        else:
            out.append(m)
    return out


def conversation_tokens(messages: list[Message], system: str = "") -> int:
    """Estimated size of what the next step sends: the messages, and the system prompt if given."""
    return sum(message_meta(m).tokens for m in messages) + estimate_tokens(system)


# --- after the call: judging the calls ------------------------------------------------------------


class Verdict(Protocol):
    """The permission judge's answer on one call."""

    @property
    def decision(self) -> Decision: ...

    @property
    def reason(self) -> str: ...

    @property
    def runs_required(self) -> bool: ...


def is_submit(agent: AgentDefinition, call: ToolCall) -> bool:
    """A submit the agent owes (judged here, on its arguments) rather than a tool to permit."""
    return call.name == SUBMIT and agent.output_model is not None


def to_permit(agent: AgentDefinition, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls the permission judge must see, in order."""
    return [c for c in calls if not is_submit(agent, c)]


def judge_reply(
    agent: AgentDefinition, inp: ModelStepInput, calls: list[ToolCall], verdicts: Iterator[Verdict]
) -> tuple[list[ToolCallRef], dict[str, Any] | None]:
    """The reply's calls as the loop sees them, and the accepted submit's output (None: none).
    `verdicts` answers `to_permit(agent, calls)`, in the same order."""
    refs: list[ToolCallRef] = []
    output: dict[str, Any] | None = None
    delegates = sum(c.name == DELEGATE for c in calls)
    for call in calls:
        if is_submit(agent, call):
            error, output = judge_submit(inp, agent.output_model or "", call, len(calls))
            refs.append(_ref(call, summary=f"submit {agent.output_model}", risk="read", submit_error=error))
            continue
        verdict = next(verdicts)
        refs.append(
            _ref(
                call,
                summary=summarize_call(call.name, call.arguments),
                risk=TOOLS[call.name].risk if call.name in TOOLS else "exec",
                # Malformed arguments are answered by the tool with an error the model can fix.
                decision="allow" if call.arguments_error else verdict.decision,
                decision_reason=verdict.reason,
                runs_required=verdict.runs_required,
                delegation=delegation(call, delegates) if DELEGATE in agent.tools else None,
            )
        )
    return refs, output


def delegation(call: ToolCall, of: int) -> Delegation | None:
    """What the workflow needs to start a `delegate` call's subagent; None for another tool or
    arguments that do not validate (the permission judge refused those with the reason)."""
    if call.name != DELEGATE or call.arguments_error is not None:
        return None
    try:
        args = DelegateArgs.model_validate(call.arguments)
    except ValidationError:
        return None
    return Delegation(prompt=args.question, max_steps=args.max_steps, of=of)


def judge_submit(
    inp: ModelStepInput, output_model: str, call: ToolCall, calls_in_reply: int
) -> tuple[str | None, dict[str, Any] | None]:
    """(the error the model reads, None) for a refused submit, or (None, the accepted output)."""
    if call.arguments_error is not None:
        return f"error: {call.arguments_error}"[:SUBMIT_ERROR_CHARS], None
    if calls_in_reply > 1:
        # The result must rest on what the model has seen: the other calls' results come first.
        return "error: call submit alone, in a reply of its own, after you have seen your other calls' results.", None
    if inp.submit_refusal:
        return inp.submit_refusal[:SUBMIT_ERROR_CHARS], None
    output, error = validate_submission(output_model, call.arguments)
    if output is None:
        return (error or "error: invalid submission")[:SUBMIT_ERROR_CHARS], None
    # The harness's own record wins over what the model claims (e.g. FixResult.tests_passed).
    output.update({k: v for k, v in inp.recorded.items() if k in output})
    return None, output


def _ref(call: ToolCall, **fields: Any) -> ToolCallRef:
    return ToolCallRef(
        id=call.id,
        name=call.name,
        args_preview=args_preview(call.arguments) if call.arguments_error is None else "(invalid JSON)",
        args_digest=_canonical_digest({"name": call.name, "arguments": call.arguments}),
        **fields,
    )


def _canonical_digest(obj: object) -> str:
    """Equal calls, equal digests: the doom-loop watch's key."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()
