"""OpenAI Chat Completions with function tools: OpenAI itself and every compatible server
(vLLM, Ollama, llama.cpp, LM Studio) reached through a base URL."""

from __future__ import annotations

import json
import time
from typing import Any

import openai
import structlog

from shopfloor.activities.providers.errors import to_model_call_error
from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import (
    FinishReason,
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolSpec,
    Usage,
)

log = structlog.get_logger(__name__)

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local OpenAI-compatible servers ignore the key, but the SDK insists on having one.
PLACEHOLDER_API_KEY = "not-needed"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


class OpenAIChatProvider:
    def __init__(self, model: str, api_key: str | None, base_url: str | None, timeout_s: float = 600) -> None:
        self.model = model
        self.label = f"openai:{model}"
        # Passed explicitly so the SDK never falls back to environment variables.
        self.base_url = base_url or OPENAI_DEFAULT_BASE_URL
        self._official = base_url is None
        if not api_key and base_url is None:
            raise ModelCallError(
                f"{self.label}: no API key: set OPENAI_API_KEY "
                "(or OPENAI_BASE_URL for an OpenAI-compatible server that needs none)",
                retryable=False,
            )
        self._client = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=0,  # Temporal owns retries
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.system, request.messages),
        }
        if request.tools:
            params["tools"] = to_openai_tools(request.tools)
        # OpenAI's own newer models reject max_tokens; compatible servers may not know the new name.
        params["max_completion_tokens" if self._official else "max_tokens"] = request.max_output_tokens
        started = time.monotonic()
        try:
            response = await self._client.chat.completions.create(**params)
            reply = parse_openai_response(response, label=self.label)
        except Exception as exc:
            error = to_model_call_error(
                exc, label=self.label, model=self.model, base_url=self.base_url, key_env="OPENAI_API_KEY"
            )
            # debug only: the model_step activity logs failures with the run's context
            log.debug("model call failed", model=self.label, error=str(error), retryable=error.retryable)
            raise error from exc
        log.debug(
            "model call",
            model=self.label,
            seconds=round(time.monotonic() - started, 3),
            finish_reason=reply.finish_reason,
            tool_calls=len(reply.message.tool_calls),
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
        )
        return reply

    async def aclose(self) -> None:
        await self._client.close()


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in messages:
        if m.role == "tool":
            # Chat Completions has no error flag on tool results: the content says it.
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                # null content is the documented shape of a tool-call-only assistant turn.
                entry["content"] = m.content or None
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def parse_tool_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict, or ({}, what is wrong) so the model can read it and try again."""
    if raw is None or not raw.strip():
        return {}, None  # some servers send "" for a call without arguments
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {shown}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}: {raw[:200]}"
    return value, None


def parse_openai_response(response: Any, *, label: str) -> ModelReply:
    if not response.choices:
        # A compatible server that answers 200 with nothing in it: likely transient.
        raise ModelCallError(f"{label}: the reply has no choices", retryable=True)
    choice = response.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(message.tool_calls or []):
        function = getattr(tc, "function", None)
        if function is None:
            continue  # custom (non-function) tools are never offered, so never expected
        arguments, problem = parse_tool_arguments(function.arguments)
        calls.append(
            ToolCall(
                id=tc.id or f"call_{i}",
                name=function.name,
                arguments=arguments,
                arguments_error=problem,
            )
        )
    finish = _FINISH.get(choice.finish_reason or "", "other")
    if calls and finish == "stop":
        finish = "tool_calls"  # some compatible servers say "stop" even when calling tools
    usage = response.usage
    return ModelReply(
        message=Message(role="assistant", content=message.content or "", tool_calls=calls),
        finish_reason=finish,
        usage=Usage(
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=(usage.completion_tokens or 0) if usage else 0,
        ),
    )
