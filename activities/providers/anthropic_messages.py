"""Anthropic's Messages API with tools."""

from __future__ import annotations

import time
from typing import Any

import anthropic
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

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    # The reply filled the context window: cut off like max_tokens (the loop asks it to go on).
    "model_context_window_exceeded": "length",
}


class AnthropicMessagesProvider:
    def __init__(self, model: str, api_key: str | None, base_url: str | None, timeout_s: float = 600) -> None:
        self.model = model
        self.label = f"anthropic:{model}"
        # Passed explicitly so the SDK never falls back to environment variables or profiles.
        self.base_url = base_url or ANTHROPIC_DEFAULT_BASE_URL
        if not api_key:
            raise ModelCallError(f"{self.label}: no API key: set ANTHROPIC_API_KEY", retryable=False)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=0,  # Temporal owns retries
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_output_tokens,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools)
        started = time.monotonic()
        try:
            response = await self._client.messages.create(**params)
            reply = parse_anthropic_response(response)
        except Exception as exc:
            error = to_model_call_error(
                exc,
                label=self.label,
                model=self.model,
                base_url=self.base_url,
                key_env="ANTHROPIC_API_KEY",
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


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as alternating user/assistant turns of content blocks.

    Tool results travel inside a user turn, so consecutive tool messages (and any user or
    mid-conversation system text right after them) merge into one user turn, results first.
    """
    out: list[dict[str, Any]] = []

    def add_user_block(block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})

    for m in messages:
        if m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
            if not blocks:
                # The API rejects empty assistant turns; keep the turn so the history stays true.
                blocks.append({"type": "text", "text": "(no reply)"})
            out.append({"role": "assistant", "content": blocks})
        elif m.role == "tool":
            add_user_block(
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id or "",
                    "content": m.content or "(no output)",
                    "is_error": m.is_error,
                }
            )
        elif m.content:
            # user text, or a system note injected mid-run (the API has only a top-level system)
            add_user_block({"type": "text", "text": m.content})
    return out


def parse_anthropic_response(response: Any) -> ModelReply:
    texts: list[str] = []
    calls: list[ToolCall] = []
    previous_was_text = False
    for block in response.content:
        if block.type == "text":
            if texts and not previous_was_text:
                texts.append("\n\n")  # text split by a tool call reads as separate paragraphs
            texts.append(block.text)
            previous_was_text = True
            continue
        previous_was_text = False
        if block.type == "tool_use":
            value = block.input
            if isinstance(value, dict):
                calls.append(ToolCall(id=block.id, name=block.name, arguments=value))
            else:
                calls.append(
                    ToolCall(
                        id=block.id,
                        name=block.name,
                        arguments={},
                        arguments_error=f"arguments must be a JSON object, got {type(value).__name__}: "
                        f"{str(value)[:200]}",
                    )
                )
    usage = response.usage
    # Count cached prompt tokens too, so budgets mean the same as OpenAI's prompt_tokens.
    input_tokens = (
        (usage.input_tokens or 0)
        + (getattr(usage, "cache_read_input_tokens", None) or 0)
        + (getattr(usage, "cache_creation_input_tokens", None) or 0)
    )
    return ModelReply(
        message=Message(role="assistant", content="".join(texts), tool_calls=calls),
        finish_reason=_STOP.get(response.stop_reason or "", "other"),
        usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens or 0),
    )
