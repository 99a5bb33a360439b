"""OpenAI Chat Completions with function tools, streamed: OpenAI itself and every compatible
server (vLLM, Ollama, llama.cpp, LM Studio) reached through a base URL.

Calls use `stream: true` (with `stream_options.include_usage`), so the text reaches `on_text` as the
model writes it; the chunks' deltas (content, and tool calls by index with their arguments
concatenated) build the same reply the non-streamed response would (`parse_openai_response`).
A compatible server that sends no usage gives 0 tokens, as without streaming.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
import structlog
from openai.types.chat import ChatCompletion

from shopfloor.activities.providers.errors import to_model_call_error
from shopfloor.activities.providers.wire import JoinedMessages, RenderCache, wire_array, wire_json, wire_object
from shopfloor.agents.images import omitted_note
from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import (
    FinishReason,
    ImageRef,
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolSpec,
    Usage,
)

log = structlog.get_logger(__name__)

# What `chat.completions.create` passes the client besides the body: bearer auth only.
_CREATE_OPTIONS: openai.RequestOptions = {"security": {"bearer_auth": True}}

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
                f"{self.label}: no API key in the worker's environment: set OPENAI_API_KEY where the worker runs "
                "(or OPENAI_BASE_URL for an OpenAI-compatible server that needs none)",
                retryable=False,
            )
        self._client = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=0,  # Temporal owns retries
        )
        # The bytes of the images of the request being encoded (set and cleared within request_bytes,
        # which never awaits): images are content-addressed, so a cached rendering stays true.
        self._image_data: Mapping[str, str] = {}
        self._rendered = RenderCache(lambda m: wire_json(to_openai_message(m, self._image_data)), len)
        self._joined = JoinedMessages(self._rendered)

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions body for `request`, keys in the order `chat.completions.create`
        writes them, so the bytes sent are the SDK's own."""
        return self._body(request, to_openai_messages(request.system, request.messages, request.image_data))

    def request_bytes(self, request: ModelRequest) -> bytes:
        """`wire_json(request_body(request))`, with each message encoded once while it lasts."""
        parts = [wire_json({"role": "system", "content": request.system})] if request.system else []
        self._image_data = request.image_data
        try:
            if request.messages:
                parts.append(self._joined(request.messages))  # the messages' items, joined already
        finally:
            self._image_data = {}
        return wire_object(self._body(request, None), messages=wire_array(parts))

    def _body(self, request: ModelRequest, messages: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "stream": True, "messages": messages}
        # OpenAI's own newer models reject max_tokens; compatible servers may not know the new name.
        body["max_completion_tokens" if self._official else "max_tokens"] = request.max_output_tokens
        body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        return body

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        started = time.monotonic()
        try:
            # The SDK's own client (auth, errors, no retries, SSE parsing), but not its
            # `chat.completions.create`: that one walks the whole conversation in Python on every
            # call (its request transform), a cost that grows with the transcript. The body here
            # is the bytes the SDK would send, each message encoded once (request_bytes).
            stream = await self._client.post(
                "/chat/completions",
                cast_to=ChatCompletion,
                content=self.request_bytes(request),
                options=_CREATE_OPTIONS,
                stream=True,
                # Chunks as the JSON the SDK decoded from each event (its errors raised as
                # before): building a ChatCompletionChunk model for every token costs more than
                # the step's own work, and StreamedReply reads a few keys.
                stream_cls=openai.AsyncStream[object],
            )
            reply = StreamedReply()
            async for chunk in stream:
                text = reply.add(chunk)
                if text and on_text is not None:
                    on_text(text)
            result = reply.result(label=self.label)
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
            finish_reason=result.finish_reason,
            tool_calls=len(result.message.tool_calls),
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
        )
        return result

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


def to_openai_messages(
    system: str, messages: list[Message], image_data: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, *(to_openai_message(m, image_data) for m in messages)]


def openai_image_part(image: ImageRef, data: str) -> dict[str, Any]:
    """An image as a Chat Completions content part: a data URL of its base64 bytes."""
    return {"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{data}"}}


def to_openai_message(m: Message, image_data: Mapping[str, str] | None = None) -> dict[str, Any]:
    if m.role == "tool":
        # Chat Completions has no error flag on tool results: the content says it.
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant":
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
        return entry
    if m.images:
        # A text part, then an image part per image (one whose bytes are missing: its note).
        data = image_data or {}
        text = "\n".join([m.content, *(omitted_note(i) for i in m.images if i.digest not in data)]).strip()
        images = [openai_image_part(i, data[i.digest]) for i in m.images if i.digest in data]
        return {"role": m.role, "content": [{"type": "text", "text": text}, *images]}
    return {"role": m.role, "content": m.content}


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
    """The reply in a non-streamed Chat Completions response."""
    if not response.choices:
        # A compatible server that answers 200 with nothing in it: likely transient.
        raise ModelCallError(f"{label}: the reply has no choices", retryable=True)
    choice = response.choices[0]
    message = choice.message
    calls = [
        (tc.id, tc.function.name, tc.function.arguments)
        for tc in message.tool_calls or []
        # custom (non-function) tools are never offered, so never expected
        if getattr(tc, "function", None) is not None
    ]
    usage = response.usage
    return _reply(
        message.content or "",
        calls,
        choice.finish_reason,
        (usage.prompt_tokens or 0) if usage else 0,
        (usage.completion_tokens or 0) if usage else 0,
    )


@dataclass
class _CallDeltas:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedReply:
    """A streamed reply as its chunks arrive: `add` each one, then `result`."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, _CallDeltas] = field(default_factory=dict)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    choices_seen: bool = False

    def add(self, chunk: Any) -> str:
        """Take one chunk in (its JSON, as the SDK's stream decodes it); return the text it adds."""
        usage = _get(chunk, "usage")
        if usage is not None:  # the last chunk's, with include_usage (some servers send it on each)
            self.input_tokens = _get(usage, "prompt_tokens") or 0
            self.output_tokens = _get(usage, "completion_tokens") or 0
        text = ""
        for choice in _get(chunk, "choices") or []:
            if _get(choice, "index") != 0:
                continue  # n=1 is all shopfloor asks for
            self.choices_seen = True
            delta = _get(choice, "delta")
            if delta is not None:
                text = _get(delta, "content") or ""
                if text:
                    self.content.append(text)
                for tc in _get(delta, "tool_calls") or []:
                    index = _get(tc, "index")
                    entry = self.calls.setdefault(index if isinstance(index, int) else 0, _CallDeltas())
                    entry.id = entry.id or _get(tc, "id")
                    function = _get(tc, "function")
                    if function is not None:
                        # The name comes whole in the call's first delta; later ones repeat it at most.
                        entry.name = entry.name or (_get(function, "name") or "")
                        if arguments := _get(function, "arguments"):
                            entry.arguments.append(arguments)
            if finish_reason := _get(choice, "finish_reason"):
                self.finish_reason = finish_reason
        return text

    def result(self, *, label: str) -> ModelReply:
        if not self.choices_seen:
            raise ModelCallError(f"{label}: the reply has no choices", retryable=True)
        if self.finish_reason is None:
            # The stream ended without saying the reply was done: a connection cut short.
            raise ModelCallError(f"{label}: the streamed reply ended before it was complete", retryable=True)
        calls = [(c.id, c.name, "".join(c.arguments)) for _, c in sorted(self.calls.items())]
        return _reply("".join(self.content), calls, self.finish_reason, self.input_tokens, self.output_tokens)


def _get(data: Any, key: str) -> Any:
    """`data[key]`, or None when it is missing or `data` is no JSON object (a server's mistake)."""
    return data.get(key) if isinstance(data, dict) else None


def _reply(
    content: str,
    calls: Sequence[tuple[str | None, str, str | None]],
    finish_reason: str | None,
    input_tokens: int,
    output_tokens: int,
) -> ModelReply:
    """One reply from its parts, whether they came whole or streamed."""
    tool_calls: list[ToolCall] = []
    for i, (call_id, name, raw) in enumerate(calls):
        arguments, problem = parse_tool_arguments(raw)
        tool_calls.append(ToolCall(id=call_id or f"call_{i}", name=name, arguments=arguments, arguments_error=problem))
    finish = _FINISH.get(finish_reason or "", "other")
    if tool_calls and finish == "stop":
        finish = "tool_calls"  # some compatible servers say "stop" even when calling tools
    return ModelReply(
        message=Message(role="assistant", content=content, tool_calls=tool_calls),
        finish_reason=finish,
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
    )
