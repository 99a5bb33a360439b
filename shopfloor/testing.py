"""A fake LLM server for tests, benchmarks and crash tests.

`FakeModelServer` speaks OpenAI Chat Completions (`POST /v1/chat/completions`, plain and
`stream: true` SSE) and Anthropic Messages (`POST /v1/messages`, plain and streamed) over real
HTTP, so the official SDKs, shopfloor's providers and worker subprocesses talk to it exactly as
to the real thing. The reply is picked by the number of assistant messages in the request, so a
retried call gets the same answer. Faults (error statuses with Retry-After, responses cut off
halfway) and latency are set while it runs; so are the pace of a streamed answer (a delay between
its chunks) and holds: a test can stop every streamed answer after its first chunks, or hold a
failing request before it is answered, watch what the client shows meanwhile, then `release()`.
Each request records when each of its chunks was sent. With `context_window_tokens` set, a request whose
prompt is estimated (characters / 4) above it is refused as the providers refuse one too long for
the model: OpenAI's 400 `context_length_exceeded`, Anthropic's 400 "prompt is too long".

    with FakeModelServer([ScriptTurn.tool("read_file", path="README.md"), ScriptTurn(content="ok")]) as srv:
        provider = OpenAIChatProvider("fake", None, srv.openai_base_url)
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from pydantic import BaseModel, Field, field_validator

from shopfloor.models.transcript import Usage


class ScriptToolCall(BaseModel):
    name: str
    # A dict is sent as JSON; a str is sent verbatim, so a test can send malformed arguments.
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ScriptTurn(BaseModel):
    content: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    usage: Usage | None = None  # None: estimated as characters / 4
    finish_reason: str | None = None  # wire value to send instead of the natural one, e.g. "length"

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _accept_pairs(cls, value: Any) -> Any:
        # (name, arguments) pairs read well in tests.
        if isinstance(value, list):
            return [{"name": v[0], "arguments": v[1]} if isinstance(v, tuple) else v for v in value]
        return value

    @classmethod
    def tool(cls, name: str, content: str = "", /, **arguments: Any) -> ScriptTurn:
        return cls(content=content, tool_calls=[ScriptToolCall(name=name, arguments=arguments)])


WireApi = Literal["openai", "anthropic"]


class LoggedRequest(BaseModel):
    api: WireApi
    turn: int  # assistant messages in the request: 0 for a conversation's first call
    raw: bytes  # the body as it came; `body` is it parsed
    started: float  # time.time()
    completed: bool = False  # True once the whole response was written to a connected client
    status: int = 200
    stream: bool = False
    headers: dict[str, str] = Field(default_factory=dict)  # lower-case names
    chunks_sent: list[float] = Field(default_factory=list)  # time.time() as each body chunk was sent
    held: bool = False  # the server is holding it now (hold_streams, fail_next(hold=True))

    @functools.cached_property
    def body(self) -> dict[str, Any]:
        """The request's JSON, parsed when a test first asks: a server keeping every request it
        answered parsed would hold the whole conversation again for each one, millions of objects
        for the garbage collector to walk in a long run."""
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed

    @functools.cached_property
    def key(self) -> str:
        """sha256 of the canonical JSON of the messages: equal conversations, equal keys. Worked
        out when a test first asks, not while the server answers: it walks the whole request."""
        return messages_key(self.body.get("messages") or [])


@dataclass
class _Fault:
    status: int  # 0: cut the response off halfway
    retry_after: float | None = None
    body: dict[str, Any] | None = None
    hold: bool = False  # wait for release() before answering
    midway: bool = False  # a streamed answer: half its chunks, then an error event of `status`


_JSON, _SSE = b"application/json", b"text/event-stream"
_ROUTES: dict[str, WireApi] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
# status -> (OpenAI error type, Anthropic error type, message)
_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request_error", "invalid_request_error", "Invalid request (fake server fault)."),
    401: ("invalid_request_error", "authentication_error", "Incorrect API key provided."),
    403: ("permission_error", "permission_error", "Your API key does not have permission to use this model."),
    404: ("invalid_request_error", "not_found_error", "The model `{model}` does not exist."),
    429: ("rate_limit_exceeded", "rate_limit_error", "Rate limit reached; try again later."),
    529: ("server_error", "overloaded_error", "Overloaded."),
}
_SERVER_ERROR = ("server_error", "api_error", "The server had an error while processing your request.")


@dataclass
class _ReadBody:
    """A request body as the server reads it: parsed, and when it was read a piece at a time, its
    assistant messages counted and its messages' characters as `prompt_tokens` counts them."""

    body: Any
    turn: int | None = None
    message_chars: int | None = None


@dataclass
class _Conversation:
    """The messages of a body read before, up to the end of its messages array's last item."""

    prefix: str  # the body's text up to the end of its last message
    messages: list[Any]
    assistants: int
    chars: int  # sum of each message's json.dumps length


class BodyReader:
    """Reads request bodies, parsing only the messages not seen in an earlier body of the same
    conversation (its text starts the same): a conversation's body grows by a message or two a
    call, and parsing all of it again on every call is what a long run's fake spent its time on.
    Anything unusual (no top-level messages array, text that is not JSON) is parsed whole."""

    KEPT_CHARS = 32 * 1024 * 1024  # of body text remembered, least recently read out first

    def __init__(self) -> None:
        self._decoder = json.JSONDecoder()
        self._conversations: OrderedDict[str, list[_Conversation]] = OrderedDict()
        self._chars = 0
        self.parsed_messages = 0  # messages parsed one by one: the new ones of each body

    def read(self, raw: bytes) -> _ReadBody:
        """`raw` parsed (json.JSONDecodeError if it is not JSON), as json.loads would parse it."""
        try:
            text = raw.decode("utf-8")
            read = self._incremental(text)
        except (UnicodeDecodeError, ValueError):
            read = None
        return _ReadBody(json.loads(raw)) if read is None else read

    def _incremental(self, text: str) -> _ReadBody | None:
        opening = text.find('"messages":[')
        if opening < 0:
            return None
        start = opening + len('"messages":[')
        first_end = self._next_item(text, start)
        if first_end is None:
            return None
        key = text[:first_end]
        candidates = self._conversations.get(key, [])
        known = max((c for c in candidates if text.startswith(c.prefix)), key=lambda c: len(c.prefix), default=None)
        if known is not None:
            messages, assistants, chars, at = list(known.messages), known.assistants, known.chars, len(known.prefix)
        else:
            messages, assistants, chars, at = [], 0, 0, start
        decode, decoded_any = self._decoder.raw_decode, False
        while True:
            at = _skip_space(text, at)
            if text.startswith("]", at):
                break
            if messages:
                if not text.startswith(",", at):
                    return None
                at = _skip_space(text, at + 1)
            message, at = decode(text, at)
            messages.append(message)
            self.parsed_messages += 1
            assistants += isinstance(message, dict) and message.get("role") == "assistant"
            chars += len(json.dumps(message))
            decoded_any = True
        end = at + 1
        # The rest of the body with the array left out: it must be one object whose top-level
        # "messages" is the array read, or the text found was not that array.
        rest = json.loads(text[: start - 1] + "null" + text[end:])
        if not isinstance(rest, dict) or "messages" not in rest or rest["messages"] is not None:
            return None
        rest["messages"] = messages
        if messages and (decoded_any or known is None):
            self._remember(key, _Conversation(text[:at], list(messages), assistants, chars))
        return _ReadBody(rest, assistants, chars + 2 * len(messages) if messages else 2)

    def _next_item(self, text: str, at: int) -> int | None:
        at = _skip_space(text, at)
        if text.startswith("]", at):
            return None  # no messages: nothing to remember
        return self._decoder.raw_decode(text, at)[1]

    def _remember(self, key: str, conversation: _Conversation) -> None:
        before = self._conversations.pop(key, [])
        # The newest first; its own shorter prefixes go (it serves their bodies as well).
        kept = [conversation, *(c for c in before if not conversation.prefix.startswith(c.prefix))][:8]
        self._chars += sum(len(c.prefix) for c in kept) - sum(len(c.prefix) for c in before)
        self._conversations[key] = kept
        while self._chars > self.KEPT_CHARS and self._conversations:
            self._chars -= sum(len(c.prefix) for c in self._conversations.popitem(last=False)[1])


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


def _assistants(messages: Any) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def messages_key(messages: Any) -> str:
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class FakeModelServer:
    def __init__(
        self,
        script: list[ScriptTurn] | Callable[[int, dict[str, Any]], ScriptTurn],
        *,
        latency_s: float = 0.0,
        host: str = "127.0.0.1",
        context_window_tokens: int | None = None,
    ) -> None:
        self.script = script
        self.latency_s = latency_s  # read on every request, so tests may change it at run time
        self.context_window_tokens = context_window_tokens  # read on every request, like latency_s
        self.host = host
        self.url = ""
        self._lock = threading.Lock()
        self._requests: list[LoggedRequest] = []
        self._faults: deque[_Fault] = deque()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.chunk_delay_s = 0.0  # between a streamed answer's chunks; read on every chunk
        self.stream_usage = True  # False: ignore stream_options.include_usage, as some servers do
        self._releases = 0  # release() calls so far: what is held waits for the next one
        self._stream_hold: int | None = None  # hold streamed answers after this many chunks
        self.body_reader = BodyReader()  # public: a test can count what it parsed

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def requests(self) -> list[LoggedRequest]:
        """Every request so far, in arrival order (a snapshot; safe from any thread)."""
        with self._lock:
            return list(self._requests)

    def settled_requests(self, timeout_s: float = 5.0) -> list[LoggedRequest]:
        """The requests once every answer the server is still writing has been marked: a client
        can read the last frame just before the server records the request as completed."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not all(r.completed for r in self.requests):
            time.sleep(0.02)
        return self.requests

    def fail_next(
        self,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
        *,
        hold: bool = False,
    ) -> None:
        """The next `times` requests (either API) get this error in that API's error format.
        `body` replaces the whole error JSON, or only its message when it is {"message": ...}.
        `hold`: each waits, unanswered, until the next `release()` after it arrived (a test
        watches the client meanwhile)."""
        with self._lock:
            self._faults.extend(_Fault(status, retry_after, body, hold) for _ in range(times))

    def fail_midway_next(self, status: int = 529, times: int = 1) -> None:
        """The next `times` streamed answers send half their chunks, then an error event in the
        API's format, of the error type `status` has (529: OpenAI's server_error, Anthropic's
        overloaded_error; 400: invalid_request_error), and end."""
        with self._lock:
            self._faults.extend(_Fault(status, midway=True) for _ in range(times))

    def truncate_next(self, times: int = 1) -> None:
        """The next `times` responses stop halfway and the connection drops."""
        with self._lock:
            self._faults.extend(_Fault(0) for _ in range(times))

    def hold_streams(self, after_chunks: int) -> None:
        """Every streamed answer from now on stops after `after_chunks` chunks until `release()`
        (the connection stays open, as a model still writing keeps it)."""
        with self._lock:
            self._stream_hold = after_chunks

    def release(self) -> None:
        """Let everything held now go on, and stop holding streams (a failing request queued with
        `hold` is still held when it comes)."""
        with self._lock:
            self._stream_hold = None
            self._releases += 1

    async def _held(self, logged: LoggedRequest, gone: asyncio.Event) -> bool:
        """Wait while held; False when the client left meanwhile."""
        logged.held = True
        with self._lock:
            releases = self._releases
        try:
            while self._releases == releases:
                if gone.is_set():
                    return False
                await asyncio.sleep(0.02)
        finally:
            logged.held = False
        return not gone.is_set()

    def start(self) -> FakeModelServer:
        # IPPROTO_TCP named, not left 0: connections accepted on it carry the listener's proto,
        # and asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that say TCP. With
        # it on, a streamed answer's last small write waited for the client's delayed ACK: 40 ms
        # a call that no real server adds.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))  # our own socket: the port is known before serving, no race
        self.url = f"http://{self.host}:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._asgi,
            interface="asgi3",
            lifespan="off",
            access_log=False,
            log_config=None,  # leave logging (levels included) to the host
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"fake model server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(3)
        if self._thread.is_alive():
            self._server.force_exit = True  # a client holding a connection must not hang a test
            self._thread.join(3)
        self._server = self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        api = _ROUTES.get(scope["path"])
        if scope["method"] != "POST" or api is None:
            return await _send(send, 404, {"error": {"message": f"no route {scope['method']} {scope['path']}"}})
        raw = b"".join(chunks) or b"{}"
        try:
            read = self.body_reader.read(raw)
        except json.JSONDecodeError as exc:
            return await _send(send, 400, {"error": {"message": f"body is not JSON: {exc}"}})
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        gone = asyncio.Event()  # set when the client hangs up (a killed worker, a timeout)
        watcher = asyncio.create_task(_watch_disconnect(receive, gone))
        try:
            await self._answer(api, raw, read, headers, send, gone)
        finally:
            watcher.cancel()

    async def _answer(
        self, api: WireApi, raw: bytes, read: _ReadBody, headers: dict[str, str], send: Any, gone: asyncio.Event
    ) -> None:
        body: dict[str, Any] = read.body
        turn = _assistants(body.get("messages") or []) if read.turn is None else read.turn
        stream = bool(body.get("stream"))
        logged = LoggedRequest(
            api=api,
            turn=turn,
            raw=raw,
            started=time.time(),
            stream=stream,
            headers=headers,
        )
        with self._lock:
            self._requests.append(logged)
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.hold and not await self._held(logged, gone):
            return
        if self.latency_s > 0:
            try:
                await asyncio.wait_for(gone.wait(), self.latency_s)
                return  # the client left while the "model" was thinking: nothing delivered
            except TimeoutError:
                pass
        if read.message_chars is None:
            prompt = prompt_tokens(body)
        else:  # what prompt_tokens works out, from the messages' lengths found while reading
            prompt = max(1, (read.message_chars + len(str(body.get("system", "")))) // 4)
        window = self.context_window_tokens
        if fault is not None and fault.status and not (fault.midway and stream):
            logged.status = fault.status
            connected = not gone.is_set()
            await _send(send, fault.status, _error_body(api, fault, body), _retry_after_header(fault))
        elif window is not None and prompt > window:
            logged.status = 400
            connected = not gone.is_set()
            await _send(send, 400, context_too_long_body(api, prompt, window))
        else:
            try:
                script_turn = self._turn(turn, body)
            except Exception as exc:  # a broken script callable: tell the caller why
                logged.status = 500
                broken = _Fault(500, body={"message": f"script failed: {exc!r}"})
                return await _send(send, 500, _error_body(api, broken, body))
            render = _openai_frames if api == "openai" else _anthropic_frames
            if not self.stream_usage:
                body = {k: v for k, v in body.items() if k != "stream_options"}
            frames = list(render(script_turn, turn, body, prompt))
            kind = [(b"content-type", _SSE if stream else _JSON)]
            await send({"type": "http.response.start", "status": 200, "headers": kind})
            if fault is not None and fault.midway:  # half the chunks, then an error event
                frames = frames[: len(frames) // 2] + [_stream_error_frame(api, fault.status)]
                logged.status = fault.status
            elif fault is not None:  # cut off: half the bytes, then the connection drops
                half = b"".join(frames)[: sum(map(len, frames)) // 2]
                return await send({"type": "http.response.body", "body": half, "more_body": True})
            for sent, frame in enumerate(frames):
                if stream and sent:
                    if self._stream_hold is not None and sent >= self._stream_hold:
                        if not await self._held(logged, gone):
                            return
                    if self.chunk_delay_s > 0:
                        await asyncio.sleep(self.chunk_delay_s)
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                logged.chunks_sent.append(time.time())
            connected = True  # every frame went to a client still there when it was sent
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # Looked at before the last send, not after: a client that has read the last frame may
        # hang up before the body's end marker, and once a response is complete uvicorn answers
        # the disconnect watcher's receive() with "http.disconnect" at once (with httptools,
        # before that send returns). Neither is a client cut off mid-answer.
        if connected:
            with self._lock:
                logged.completed = True

    def _turn(self, turn: int, body: dict[str, Any]) -> ScriptTurn:
        if callable(self.script):
            return self.script(turn, body)
        return self.script[turn] if turn < len(self.script) else ScriptTurn(content="done")


async def _watch_disconnect(receive: Any, gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _send(send: Any, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    raw = [(b"content-type", _JSON)] + [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode(), "more_body": False})


def _error_body(api: str, fault: _Fault, request: dict[str, Any]) -> dict[str, Any]:
    openai_type, anthropic_type, text = _ERRORS.get(fault.status, _SERVER_ERROR)
    if fault.body is not None and set(fault.body) != {"message"}:
        return fault.body
    text = (fault.body or {}).get("message", text.replace("{model}", str(request.get("model", ""))))
    if api == "anthropic":
        return {"type": "error", "error": {"type": anthropic_type, "message": text}}
    code = {401: "invalid_api_key", 404: "model_not_found"}.get(fault.status)
    return {"error": {"message": text, "type": openai_type, "param": None, "code": code}}


def _stream_error_frame(api: str, status: int) -> bytes:
    """An error event inside a streamed answer, as each API sends one."""
    openai_type, anthropic_type, text = _ERRORS.get(status, _SERVER_ERROR)
    if api == "anthropic":
        return _sse({"type": "error", "error": {"type": anthropic_type, "message": text}}, "error")
    return _sse({"error": {"message": text, "type": openai_type, "param": None, "code": None}})


def _retry_after_header(fault: _Fault) -> dict[str, str]:
    if fault.retry_after is None:
        return {}
    seconds = fault.retry_after
    return {"retry-after": str(int(seconds)) if seconds == int(seconds) else str(seconds)}


MAX_PIECES = 256  # per text or arguments: a megabyte is streamed in pieces of 4 KB, not of 12 bytes


def _pieces(text: str, size: int = 12) -> Iterator[str]:
    # A real model writes a megabyte over many minutes; sent at once in token-sized pieces it
    # would be a CPU load no server makes, so long texts go in at most MAX_PIECES pieces.
    size = max(size, -(-len(text) // MAX_PIECES))
    for i in range(0, len(text), size):
        yield text[i : i + size]


def _arguments_text(call: ScriptToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _arguments_value(call: ScriptToolCall) -> Any:
    # Anthropic's input is a JSON value on the wire; raw text that is not JSON stays a string.
    if not isinstance(call.arguments, str):
        return call.arguments
    if not call.arguments.strip():
        return {}  # a call without arguments: Anthropic sends an empty object
    try:
        return json.loads(call.arguments)
    except json.JSONDecodeError:
        return call.arguments


def prompt_tokens(request: dict[str, Any]) -> int:
    """The server's estimate of a request's prompt: characters / 4 of its messages and system."""
    prompt = json.dumps(request.get("messages", [])) + str(request.get("system", ""))
    return max(1, len(prompt) // 4)


def context_too_long_body(api: WireApi, prompt: int, window: int) -> dict[str, Any]:
    """The 400 a provider sends for a prompt over the model's context window, in its own words."""
    if api == "anthropic":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {prompt} tokens > {window} maximum",
            },
            "request_id": "req_fake_context_too_long",
        }
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{prompt} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _usage(turn: ScriptTurn, prompt: int) -> Usage:
    """The turn's usage, or estimated: `prompt` (the request's prompt_tokens) in, characters / 4 out."""
    if turn.usage is not None:
        return turn.usage
    produced = turn.content + "".join(c.name + _arguments_text(c) for c in turn.tool_calls)
    return Usage(input_tokens=prompt, output_tokens=max(1, len(produced) // 4))


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {json.dumps(data)}\n\n".encode()


def _openai_frames(turn: ScriptTurn, n: int, request: dict[str, Any], prompt: int) -> Iterator[bytes]:
    usage = _usage(turn, prompt)
    finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
    calls = [(f"call_{n}_{i}", c.name, _arguments_text(c)) for i, c in enumerate(turn.tool_calls)]
    total = usage.input_tokens + usage.output_tokens
    wire_usage = {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens, "total_tokens": total}
    model = str(request.get("model", "fake"))
    head = {"id": f"chatcmpl-fake-{n}", "created": int(time.time()), "model": model}
    if not request.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": turn.content or None, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
                for id_, name, args in calls
            ]
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        payload = {**head, "object": "chat.completion", "choices": [choice], "usage": wire_usage}
        yield json.dumps(payload).encode()
        return

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return _sse({**head, "object": "chat.completion.chunk", "choices": [choice]})

    # Incremental like real servers: content in pieces, then each call's name, then its arguments.
    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(turn.content):
        yield chunk({"content": piece})
    for i, (id_, name, args) in enumerate(calls):
        opening = {"index": i, "id": id_, "type": "function", "function": {"name": name, "arguments": ""}}
        yield chunk({"tool_calls": [opening]})
        for piece in _pieces(args):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, finish)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield _sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": wire_usage})
    yield b"data: [DONE]\n\n"


def _anthropic_frames(turn: ScriptTurn, n: int, request: dict[str, Any], prompt: int) -> Iterator[bytes]:
    usage = _usage(turn, prompt)
    stop = turn.finish_reason or ("tool_use" if turn.tool_calls else "end_turn")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.content}] if turn.content else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name, "input": _arguments_value(c)}
        for i, c in enumerate(turn.tool_calls)
    ]
    wire_usage = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    message = {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": str(request.get("model", "fake")),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": wire_usage,
    }
    if not request.get("stream"):
        yield json.dumps(message).encode()
        return
    start = {**message, "content": [], "stop_reason": None, "usage": {**wire_usage, "output_tokens": 0}}
    yield _sse({"type": "message_start", "message": start}, "message_start")
    raw_arguments = iter([_arguments_text(c) for c in turn.tool_calls])
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            first = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(next(raw_arguments))]
        opening = {"type": "content_block_start", "index": index, "content_block": first}
        yield _sse(opening, "content_block_start")
        for d in deltas:
            yield _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    stopped = {"stop_reason": stop, "stop_sequence": None}
    end = {"type": "message_delta", "delta": stopped, "usage": {"output_tokens": usage.output_tokens}}
    yield _sse(end, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")
