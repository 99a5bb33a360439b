"""Conditional requests, as GitHub answers them: every successful GET carries an `ETag` of its
body, and a GET whose `If-None-Match` names the current one gets `304 Not Modified` with no body
(which, on GitHub, does not count against the rate limit: the caller refunds it)."""

from __future__ import annotations

import hashlib

from starlette.responses import Response


def etag_of(body: bytes) -> str:
    return f'W/"{hashlib.sha256(body).hexdigest()[:40]}"'


def _named(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    wanted = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in wanted or etag.removeprefix("W/") in wanted


async def with_etag(response: Response, if_none_match: str | None) -> tuple[Response, bool]:
    """`response` with its `ETag`, or a 304 when `if_none_match` names it; (response, unchanged)."""
    chunks = [chunk async for chunk in response.body_iterator]  # type: ignore[attr-defined]
    body = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
    etag = etag_of(body)
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "etag")}
    headers["etag"] = etag
    if _named(if_none_match, etag):
        headers.pop("content-type", None)
        return Response(status_code=304, headers=headers), True
    return Response(body, status_code=response.status_code, headers=headers), False
