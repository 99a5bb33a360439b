"""Anthropic's Messages API with tools, streamed.

Calls use `stream: true`: the SDK reads the server-sent events (message_start, content_block_start,
content_block_delta with text_delta or input_json_delta, content_block_stop, message_delta,
message_stop; ping skipped; an error event raised as an API error), text reaches `on_text` as the
model writes it, and the blocks build the same reply the non-streamed message would
(`parse_anthropic_response`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anthropic
import structlog

from shopfloor.activities.providers.errors import to_model_call_error
from shopfloor.activities.providers.wire import RenderCache, wire_array, wire_json, wire_object
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

T = TypeVar("T")

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
            raise ModelCallError(
                f"{self.label}: no API key in the worker's environment: set ANTHROPIC_API_KEY where the worker runs",
                retryable=False,
            )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=0,  # Temporal owns retries
        )
        # The bytes of the images of the request being encoded (set and cleared within request_bytes,
        # which never awaits): images are content-addressed, so a cached rendering stays true.
        self._image_data: Mapping[str, str] = {}
        self._rendered = RenderCache(
            lambda m: _encoded_blocks(m, self._image_data), lambda blocks: sum(map(len, blocks[1]))
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages body for `request`, keys in the order `messages.create` writes them, so
        the bytes sent are the SDK's own."""
        return self._body(request, to_anthropic_messages(request.messages, request.image_data))

    def request_bytes(self, request: ModelRequest) -> bytes:
        """`wire_json(request_body(request))`, with each message's blocks encoded once while it lasts."""
        self._image_data = request.image_data
        try:
            rendered = [self._rendered(m) for m in request.messages]
        finally:
            self._image_data = {}
        encoded = [
            b'{"role":' + wire_json(role) + b',"content":' + wire_array(blocks) + b"}"
            for role, blocks in turns(rendered)
        ]
        return wire_object(self._body(request, None), messages=wire_array(encoded))

    def _body(self, request: ModelRequest, messages: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "max_tokens": request.max_output_tokens,
            "messages": messages,
            "model": self.model,
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
        return body

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        started = time.monotonic()
        try:
            # The SDK's own client (auth, errors, no retries, SSE events), but not its
            # `messages.create`: that one copies the whole conversation in Python on every call
            # (its request preparation), a cost that grows with the transcript. The body here is
            # the bytes the SDK would send, each message encoded once (request_bytes).
            stream = await self._client.post(
                "/v1/messages",
                cast_to=anthropic.types.Message,
                content=self.request_bytes(request),
                stream=True,
                # Events as the JSON the SDK decoded (its error events raised as before):
                # building a model for every token costs more than the step's own work.
                stream_cls=anthropic.AsyncStream[object],
            )
            message = StreamedMessage()
            async for event in stream:
                text = message.add(event)
                if text and on_text is not None:
                    on_text(text)
            reply = message.result(label=self.label)
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


def to_anthropic_messages(messages: list[Message], image_data: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Messages as alternating user/assistant turns of content blocks.

    Tool results travel inside a user turn, so consecutive tool messages (and any user or
    mid-conversation system text right after them) merge into one user turn, results first.
    """
    blocks = [to_anthropic_blocks(m, image_data) for m in messages]
    return [{"role": role, "content": content} for role, content in turns(blocks)]


Blocks = tuple[str, list[T]]  # a message's turn role and its content blocks


def anthropic_image_block(image: ImageRef, data: str) -> dict[str, Any]:
    """An image as a Messages content block: its base64 bytes and media type."""
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": data}}


def to_anthropic_blocks(m: Message, image_data: Mapping[str, str] | None = None) -> Blocks[dict[str, Any]]:
    """The role of the turn `m` belongs in, and the content blocks it adds there."""
    if m.role == "assistant":
        blocks: list[dict[str, Any]] = []
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        for c in m.tool_calls:
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
        if not blocks:
            # The API rejects empty assistant turns; keep the turn so the history stays true.
            blocks.append({"type": "text", "text": "(no reply)"})
        return "assistant", blocks
    if m.role == "tool":
        result = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id or "",
            "content": m.content or "(no output)",
            "is_error": m.is_error,
        }
        return "user", [result]
    if m.images:
        # The text, then a block per image (one whose bytes are missing: its note).
        data = image_data or {}
        text = "\n".join([m.content, *(omitted_note(i) for i in m.images if i.digest not in data)]).strip()
        images = [anthropic_image_block(i, data[i.digest]) for i in m.images if i.digest in data]
        return "user", [{"type": "text", "text": text or "(images)"}, *images]
    # user text, or a system note injected mid-run (the API has only a top-level system)
    return "user", [{"type": "text", "text": m.content}] if m.content else []


def turns(messages: list[Blocks[T]]) -> list[tuple[str, list[T]]]:
    """The turns the messages' blocks make: each assistant message its own turn, user blocks
    joining the user turn before them."""
    out: list[tuple[str, list[T]]] = []
    for role, blocks in messages:
        if role == "assistant":
            out.append((role, list(blocks)))
        elif blocks and out and out[-1][0] == "user":
            out[-1][1].extend(blocks)
        elif blocks:
            out.append((role, list(blocks)))
    return out


def _encoded_blocks(m: Message, image_data: Mapping[str, str]) -> Blocks[bytes]:
    role, blocks = to_anthropic_blocks(m, image_data)
    return role, [wire_json(b) for b in blocks]


def parse_anthropic_response(response: Any) -> ModelReply:
    """The reply in a non-streamed Messages response."""
    blocks = [
        (
            block.type,
            block.text if block.type == "text" else "",
            getattr(block, "id", ""),
            getattr(block, "name", ""),
            getattr(block, "input", None),
        )
        for block in response.content
    ]
    usage = response.usage
    return _reply(
        blocks,
        response.stop_reason,
        _input_tokens(usage),
        usage.output_tokens or 0,
    )


def _input_tokens(usage: Any) -> int:
    """The prompt's tokens in `usage` (the SDK's object, or the JSON of a streamed event)."""
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    # Count cached prompt tokens too, so budgets mean the same as OpenAI's prompt_tokens.
    if isinstance(usage, dict):
        return sum(usage.get(name) or 0 for name in names)
    return sum(getattr(usage, name, None) or 0 for name in names)


def _get(data: Any, key: str) -> Any:
    """`data[key]`, or None when it is missing or `data` is no JSON object (a server's mistake)."""
    return data.get(key) if isinstance(data, dict) else None


# (type, text, tool id, tool name, tool input) of one content block
_Block = tuple[str, str, str, str, Any]


class StreamedMessage:
    """A streamed message as its events arrive: `add` each one, then `result`."""

    def __init__(self) -> None:
        self.started = False
        self.stopped = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.output_tokens = 0

    def add(self, event: Any) -> str:
        """Take one event in (its JSON, as the SDK's stream decodes it); return the text it adds."""
        kind = _get(event, "type")
        if kind == "message_start":
            self.started = True
            usage = _get(_get(event, "message"), "usage")
            self.usage = dict(usage) if isinstance(usage, dict) else {}
            self.output_tokens = self.usage.get("output_tokens") or 0
        elif kind == "content_block_start":
            block = _get(event, "content_block")
            block_type = _get(block, "type")
            entry: dict[str, Any] = {"type": block_type, "text": [], "json": []}
            if block_type == "text":
                entry["text"].append(_get(block, "text") or "")
            elif block_type == "tool_use":
                entry |= {"id": _get(block, "id"), "name": _get(block, "name"), "input": _get(block, "input")}
            self.blocks[_get(event, "index")] = entry
            return (_get(block, "text") or "") if block_type == "text" else ""
        elif kind == "content_block_delta":
            opened = self.blocks.get(_get(event, "index"))
            delta = _get(event, "delta")
            if opened is None:
                return ""
            delta_type = _get(delta, "type")
            if delta_type == "text_delta":
                text = _get(delta, "text") or ""
                opened["text"].append(text)
                return text
            if delta_type == "input_json_delta":
                opened["json"].append(_get(delta, "partial_json") or "")
        elif kind == "message_delta":
            self.stop_reason = _get(_get(event, "delta"), "stop_reason") or self.stop_reason
            usage = _get(event, "usage")  # a compatible server may leave it out
            if usage is None:
                return ""
            # Counts on message_delta are cumulative: they replace message_start's when present.
            self.output_tokens = _get(usage, "output_tokens") or self.output_tokens
            if self.usage is not None:
                for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                    value = _get(usage, name)
                    if value is not None:
                        self.usage[name] = value
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def result(self, *, label: str) -> ModelReply:
        if not (self.started and self.stopped):
            # The stream ended without message_stop: a connection cut short.
            raise ModelCallError(f"{label}: the streamed reply ended before it was complete", retryable=True)
        blocks: list[_Block] = []
        for _, entry in sorted(self.blocks.items()):
            value = entry.get("input")
            raw = "".join(entry["json"])
            if raw.strip():
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError:
                    value = raw  # as a non-streamed reply carries input that is not an object
            blocks.append((entry["type"], "".join(entry["text"]), entry.get("id", ""), entry.get("name", ""), value))
        return _reply(blocks, self.stop_reason, _input_tokens(self.usage) if self.usage else 0, self.output_tokens)


def _reply(blocks: list[_Block], stop_reason: str | None, input_tokens: int, output_tokens: int) -> ModelReply:
    """One reply from its content blocks, whether they came whole or streamed."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    previous_was_text = False
    for kind, text, call_id, name, value in blocks:
        if kind == "text":
            if texts and not previous_was_text:
                texts.append("\n\n")  # text split by a tool call reads as separate paragraphs
            texts.append(text)
            previous_was_text = True
            continue
        previous_was_text = False
        if kind == "tool_use":
            if isinstance(value, dict):
                calls.append(ToolCall(id=call_id, name=name, arguments=value))
            else:
                calls.append(
                    ToolCall(
                        id=call_id,
                        name=name,
                        arguments={},
                        arguments_error=f"arguments must be a JSON object, got {type(value).__name__}: "
                        f"{str(value)[:200]}",
                    )
                )
    return ModelReply(
        message=Message(role="assistant", content="".join(texts), tool_calls=calls),
        finish_reason=_STOP.get(stop_reason or "", "other"),
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
    )
