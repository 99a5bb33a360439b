"""A request body as the official SDKs put it on the wire (compact UTF-8 JSON), built from parts
encoded once: each message of a conversation is rendered when first sent and reused while it stays
in the conversation, so a step encodes only what is new."""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from shopfloor.models.transcript import Message

T = TypeVar("T")
RENDERED_BYTES = 32 * 1024 * 1024  # of rendered messages a provider keeps
_OVERHEAD_BYTES = 200  # an entry's own bookkeeping


def wire_json(value: Any) -> bytes:
    """`value` serialized as both SDKs serialize a JSON body (their `openapi_dumps`): compact,
    UTF-8, no NaN. Composable: a dict's bytes are its keys' and values' bytes, joined."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def wire_array(items: list[bytes]) -> bytes:
    """The bytes of a JSON array whose items are already encoded."""
    return b"[" + b",".join(items) + b"]"


def wire_object(body: dict[str, Any], **encoded: bytes) -> bytes:
    """`wire_json(body)`, with the values of the keys in `encoded` given already encoded (the
    placeholder values in `body` only keep the key order)."""
    parts = [wire_json(k) + b":" + (encoded[k] if k in encoded else wire_json(v)) for k, v in body.items()]
    return b"{" + b",".join(parts) + b"}"


class RenderCache(Generic[T]):
    """What `render` makes of each message, kept per message object, least recently used out first
    past `max_bytes`. Keyed by identity: the transcript store hands out the same object for a
    message every step, and messages are never changed in place (a change is a model_copy). An
    entry holds its message, so no other object can take its id while it is kept."""

    def __init__(self, render: Callable[[Message], T], size: Callable[[T], int], max_bytes: int = RENDERED_BYTES):
        self._render, self._size, self.max_bytes = render, size, max_bytes
        self._entries: OrderedDict[int, tuple[Message, T, int]] = OrderedDict()
        self.bytes = 0

    def __call__(self, message: Message) -> T:
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            self._entries.move_to_end(key)
            return entry[1]
        value = self._render(message)
        size = self._size(value) + _OVERHEAD_BYTES
        if entry is not None:  # an object gone from the conversation; its id now names this one
            self.bytes -= self._entries.pop(key)[2]
        if size <= self.max_bytes:
            self._entries[key] = (message, value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                self.bytes -= self._entries.popitem(last=False)[1][2]
        return value

    def __len__(self) -> int:
        return len(self._entries)


class JoinedMessages:
    """`b",".join(render(m) for m in messages)`, reusing what an earlier call of the same
    conversation joined: a conversation grows at its end, so a step renders and joins only its
    new messages instead of visiting every one (the check that the earlier messages are the very
    same objects runs in C). Conversations are told apart by their first message; the least
    recently used go past `max_bytes`."""

    def __init__(self, render: Callable[[Message], bytes], max_bytes: int = RENDERED_BYTES) -> None:
        self._render, self.max_bytes = render, max_bytes
        self._joined: OrderedDict[int, tuple[list[Message], bytes]] = OrderedDict()
        self.bytes = 0

    def __call__(self, messages: list[Message]) -> bytes:
        if not messages:
            return b""
        key = id(messages[0])  # kept alive by the entry, so no other object can have this id
        earlier = self._joined.pop(key, None)
        joined: bytes | None = None
        if earlier is not None:
            self.bytes -= len(earlier[1])
            known, done = earlier
            n = len(known)
            if n <= len(messages) and all(map(operator.is_, known, messages)):
                new = messages[n:]
                joined = done + b"," + b",".join(map(self._render, new)) if new else done
        if joined is None:
            joined = b",".join(map(self._render, messages))
        if len(joined) <= self.max_bytes:
            self._joined[key] = (list(messages), joined)
            self.bytes += len(joined)
            while self.bytes > self.max_bytes:
                self.bytes -= len(self._joined.popitem(last=False)[1][1])
        return joined
