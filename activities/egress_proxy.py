"""The sandbox's only way out: an HTTP proxy on a unix socket, one per command that may use the
network.

It answers `CONNECT host:port` (HTTPS and anything else tunnelled) and plain-HTTP requests in
absolute form (`GET http://host/path`), the two ways clients use an `HTTP(S)_PROXY`. Each
destination is checked by `egress_destinations.check_destination` (the command's allow-list, the
worker's own services, the denied address ranges) and the connection goes to the addresses that
check resolved, never to a second look-up. A refusal is a 403 whose body says why in a sentence,
and is kept for the command's report. The request head is parsed with h11; after it, bytes are
relayed as they are. Runs in the worker's event loop: connections per command are bounded, and
closing the proxy ends every tunnel it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from urllib.parse import urlsplit

import h11
import structlog

from shopfloor.activities.egress_destinations import Destination, Mirror, ProtectedHosts, Refused, check_destination
from shopfloor.agents.host_patterns import AllowList

__all__ = ["EgressProxy"]

log = structlog.get_logger(__name__)

MAX_CONNECTIONS = 64  # open at once per command, tunnels and requests being read alike
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 15.0
CHUNK = 64 * 1024
KEPT_REFUSALS = 20
_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authorization",
    b"proxy-authenticate",
    b"te",
    b"trailer",
    b"upgrade",
}


class EgressProxy:
    """One command's egress proxy: `start(path)`, then `close()` when the command has ended."""

    def __init__(
        self,
        allow: AllowList,
        protected: ProtectedHosts,
        *,
        max_connections: int = MAX_CONNECTIONS,
        mirrors: frozenset[Mirror] = frozenset(),
    ) -> None:
        self.allow = allow
        self.protected = protected
        self.mirrors = mirrors  # the operator's: reached like the registries, wherever they are
        self.max_connections = max_connections
        self.refusals: list[str] = []  # the first KEPT_REFUSALS sentences
        self.refused = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()  # both ends of every open connection

    async def start(self, path: Path) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(path))

    async def close(self) -> None:
        """Stop listening and end every connection: the command is over."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._tasks:  # their connections are gone: they end at once
            _, pending = await asyncio.wait(set(self._tasks), timeout=5)
            for task in pending:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def _refuse(self, sentence: str) -> None:
        self.refused += 1
        if len(self.refusals) < KEPT_REFUSALS and sentence not in self.refusals:
            self.refusals.append(sentence)
        log.info("egress refused", reason=sentence)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:  # always, in a stream handler
            self._tasks.add(task)
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            # Every connection costs the worker a descriptor and buffers, whether or not it ever
            # sends a request: the bound counts them all.
            if len(self._tasks) > self.max_connections:
                sentence = f"more than {self.max_connections} connections at once through the egress proxy"
                self._refuse(sentence)
                await _answer(writer, 503, "Too many connections", sentence, reader)
                return
            try:
                request, rest = await asyncio.wait_for(_read_head(reader), HEAD_TIMEOUT_S)
            except (TimeoutError, h11.RemoteProtocolError, _Incomplete) as exc:
                await _answer(writer, 400, "Bad Request", f"not an HTTP proxy request ({_why(exc)})")
                return
            try:
                host, port, head = _destination_of(request)
                dest = await check_destination(host, port, self.allow, self.protected, self.mirrors)
            except Refused as exc:
                self._refuse(str(exc))
                await _answer(writer, 403, "Refused by the egress proxy", str(exc))
                return
            try:
                up_reader, upstream = await _connect(dest)
            except OSError as exc:
                await _answer(writer, 502, "Bad Gateway", f"could not connect to {dest.host}:{dest.port} ({_why(exc)})")
                return
            self._writers.add(upstream)
            peer = upstream.get_extra_info("peername")
            log.info("egress allowed", destination=f"{dest.host}:{dest.port}", address=peer[0] if peer else None)
            if head is None:  # CONNECT: the client speaks to the destination from here on
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.write(head)
            if rest:
                upstream.write(rest)
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except (ConnectionError, OSError):
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()
                    self._writers.discard(w)
            if task is not None:
                self._tasks.discard(task)


class _Incomplete(Exception):
    pass


def _why(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no complete request within {HEAD_TIMEOUT_S:g} s"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[:200]


async def _read_head(reader: asyncio.StreamReader) -> tuple[h11.Request, bytes]:
    """The request head, and the bytes after it that were already read."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(CHUNK)
            if not data:
                raise _Incomplete("the connection closed before the request head ended")
            conn.receive_data(data)
            continue
        if not isinstance(event, h11.Request):
            raise _Incomplete("no request")
        return event, conn.trailing_data[0]


def _destination_of(request: h11.Request) -> tuple[str, int, bytes | None]:
    """(host, port, the head to send upstream; None for CONNECT). Raises Refused."""
    target = request.target.decode("ascii", "replace")
    if request.method == b"CONNECT":
        host, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit():
            raise Refused(f"CONNECT needs host:port, not {target[:100]!r}")
        return host.strip("[]"), int(port_text), None
    url = urlsplit(target)
    if url.scheme.lower() != "http" or not url.hostname:
        raise Refused(
            f"only http:// URLs (absolute form) and CONNECT go through the egress proxy, not {target[:100]!r}"
        )
    try:
        port = url.port or 80
    except ValueError:
        raise Refused(f"{target[:100]!r} has no valid port") from None
    origin = (url.path or "/") + (f"?{url.query}" if url.query else "")
    authority = url.netloc.rpartition("@")[2]  # never forward credentials in the URL
    headers = [(name, value) for name, value in request.headers if name not in _HOP_BY_HOP and name != b"host"]
    # One request per connection: the next one may name another host, so it gets its own check.
    head = h11.Connection(h11.CLIENT).send(
        h11.Request(
            method=request.method,
            target=origin.encode(),
            headers=[(b"host", authority.encode()), *headers, (b"connection", b"close")],
        )
    )
    return url.hostname, port, head or b""


async def _connect(dest: Destination) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the checked addresses in turn (never to the name: no second look-up)."""
    error: OSError = OSError(f"{dest.host} has no addresses")
    for addr in dest.addresses:
        try:
            return await asyncio.wait_for(asyncio.open_connection(str(addr), dest.port), CONNECT_TIMEOUT_S)
        except TimeoutError:
            error = OSError(f"no answer from {addr} within {CONNECT_TIMEOUT_S:g} s")
        except OSError as exc:
            error = exc
    raise error


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _answer(
    writer: asyncio.StreamWriter, status: int, reason: str, sentence: str, unread: asyncio.StreamReader | None = None
) -> None:
    """Answer and end the connection. `unread`: a request not read yet, drained briefly first so
    that closing does not reset the connection before the client reads the answer."""
    if writer.is_closing():
        return
    body = f"shopfloor egress proxy: {sentence}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError, OSError, asyncio.TimeoutError):
        await writer.drain()
        if unread is not None and writer.can_write_eof():
            writer.write_eof()
            await asyncio.wait_for(unread.read(HEAD_LIMIT), 1.0)
