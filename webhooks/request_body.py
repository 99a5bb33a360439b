"""Reading a webhook's body, capped: the one reader for every webhook route (GitHub and alerts).

In this order: a Content-Length that is not a number or is negative is refused (400), one over
the limit is refused before the body is read (413); a route that names its media types refuses
any other (415); then the stream is counted too, since the header can lie or be absent (chunked):
past the limit it is refused (413) without reading the rest. Each refusal is a `BodyError`
carrying the status and a sentence to answer with; nothing else escapes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Body:
    media_type: str  # lower case, parameters dropped ("" when the request names none)
    data: bytes


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_content_type(content_type: str | None, accepted: tuple[str, ...]) -> str:
    kind = media_type(content_type)
    if kind in accepted:
        return kind
    raise BodyError(415, f"unsupported content type {kind or '(none)'!r}: send {' or '.join(accepted)}")


def check_declared_length(content_length: str | None, limit: int) -> None:
    """Refuse early on Content-Length; the stream is counted too, since the header can lie."""
    if content_length is None:
        return
    try:
        declared = int(content_length.strip())
    except ValueError:
        raise BodyError(400, "Content-Length is not a number") from None
    if declared < 0:
        raise BodyError(400, "Content-Length is negative")
    if declared > limit:
        raise BodyError(413, f"body of {declared} bytes is over the {limit}-byte limit")


async def read_capped(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise BodyError(413, f"body is over the {limit}-byte limit")
    return bytes(body)


async def read_body(request: Request, limit: int, *, media_types: tuple[str, ...] | None = None) -> Body:
    """The raw body of at most `limit` bytes, or a BodyError: 400 bad Content-Length, 413 too large,
    415 a content type outside `media_types` (None: any)."""
    check_declared_length(request.headers.get("content-length"), limit)
    content_type = request.headers.get("content-type")
    kind = check_content_type(content_type, media_types) if media_types is not None else media_type(content_type)
    return Body(media_type=kind, data=await read_capped(request.stream(), limit))
