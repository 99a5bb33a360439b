"""Deliveries Temporal accepted, remembered by their signed body in the blob store, so a captured
body resent under a new `X-GitHub-Delivery` is answered as a duplicate — across edge restarts and
replicas, days later.

The signature covers the body only, so a replay is the same bytes with another delivery id. The
edge keeps one small marker per accepted body: a ref named after the body's sha256
(`webhook-bodies/<ab>/<sha256>`, naming that digest), so "seen before?" is one read in the store
the edge already shares with the workers (a directory, or S3 for many replicas). Markers written
before refs were used, blobs of their own, are still read. A marker is written only after Temporal
accepted the delivery: a delivery answered 503 is not remembered, and its redelivery goes through.
Markers never expire here; an operator who expires objects (an S3 lifecycle rule) shortens how far
back a replay is caught at the edge (the workflows refuse it too).

A ref, not a blob: a blob write fsyncs the file and its directory (its digest goes into workflow
history); on a local disk that took three times the CPU of a ref write and nine times its wall time. A marker lost to a power
cut only hands a replay to the workflows, which refuse it.

`BodyMemory` writes a marker after the delivery's answer, a few at a time: each write runs in a
thread of the event loop's default executor, which the requests' own store calls (the dedupe check,
the text snapshot) share, so unbounded marker writes would queue every request behind them. Until
its marker is stored, a replay is caught by this process's Starter (the same body and workflow) and
by the workflows anywhere. When writes lag far behind, an answer waits for its own marker again.
"""

from __future__ import annotations

import asyncio
import hashlib

import structlog

from shopfloor.blobs import BlobStore, digest_of

log = structlog.get_logger(__name__)

_LEGACY_MARKER = "shopfloor webhook body accepted, sha256:{digest}\n"  # a marker's bytes when it was a blob


def body_digest(body: bytes) -> str:
    """The sha256 hex digest of a delivery's body, exactly as signed."""
    return hashlib.sha256(body).hexdigest()


def marker_name(digest: str) -> str:
    """The ref that marks a body with this digest as accepted."""
    return f"webhook-bodies/{digest[:2]}/{digest}"


def legacy_marker(digest: str) -> bytes:
    """The blob that marked an accepted body before markers were refs."""
    return _LEGACY_MARKER.format(digest=digest).encode()


async def was_accepted(blobs: BlobStore, digest: str) -> bool:
    """Whether a delivery with this body was accepted before. A store that cannot answer says no
    (logged): the workflows still refuse a replay by its body digest and by the issue's state."""
    try:
        # Both reads at once: a new body (the common case) misses both, in the time of one.
        named, legacy = await asyncio.gather(
            blobs.get_ref(marker_name(digest)), blobs.exists(digest_of(legacy_marker(digest)))
        )
        return named == digest or legacy
    except Exception as exc:  # noqa: BLE001 - any store failure: fall back to the workflows' checks
        log.warning("delivery body store unreadable", body_digest=digest, error=f"{type(exc).__name__}: {exc}")
        return False


async def remember_accepted(blobs: BlobStore, digest: str) -> None:
    """Record that Temporal accepted a delivery with this body (idempotent)."""
    try:
        await blobs.put_ref(marker_name(digest), digest)
    except Exception as exc:  # noqa: BLE001 - the delivery is accepted already; only the memory is lost
        log.warning("delivery body not remembered", body_digest=digest, error=f"{type(exc).__name__}: {exc}")


WRITERS = 2  # marker writes at a time: most of the default executor's threads stay free for requests
BACKLOG = 1_000  # marker writes waiting their turn; past it an answer waits for its own write


class BodyMemory:
    """The edge's memory of accepted bodies in `blobs`, with marker writes held to a few at a time."""

    def __init__(self, blobs: BlobStore, *, writers: int = WRITERS, backlog: int = BACKLOG) -> None:
        self.blobs = blobs
        self._writers = asyncio.Semaphore(writers)
        self._backlog = backlog
        self.pending = 0  # writes asked for and not yet done

    async def was_accepted(self, digest: str) -> bool:
        return await was_accepted(self.blobs, digest)

    async def remember(self, digest: str) -> None:
        """Store the marker of an accepted body, when a writer is free (never raises)."""
        self.pending += 1
        try:
            async with self._writers:
                await remember_accepted(self.blobs, digest)
        finally:
            self.pending -= 1

    @property
    def backlogged(self) -> bool:
        """Whether so many writes wait that the next answer should wait for its own."""
        return self.pending >= self._backlog
