"""Transcripts in the blob store: one blob per message, a manifest blob listing their digests.

Past a few dozen messages, a step's manifest lists only what was added after an earlier manifest,
its base, chosen as in a Fenwick tree: the k-th manifest since a whole one extends the
(k - lowbit(k))-th. A step then writes a few steps' digests on average (the log of the run's
length), not the whole list, and a transcript reads back through at most log2(k) manifests,
each parsed once per worker.

Blobs are content-addressed, so a parsed message or manifest can never go stale: the store keeps
the ones it has read or written (least recently used first out, bounded by their size in bytes),
and a step reads only the blobs it has not seen yet. Only what was parsed from bytes that hash to
their digest is kept; a digest that names no blob fails to load as it always did.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

from shopfloor.agents.compaction import message_meta
from shopfloor.blobs import BlobCorrupted, BlobStore, canonical_json, digest_of
from shopfloor.models.agent_run import ToolResult
from shopfloor.models.transcript import Manifest, Message

CACHE_BYTES = 32 * 1024 * 1024  # of blob bytes a worker keeps parsed (messages and manifests)
_OVERHEAD_BYTES = 200  # an entry's own bookkeeping, so tiny blobs count for something too
WHOLE_UP_TO = 64  # digests (4.5 KB): a shorter transcript's manifest is written whole, read in one
MAX_CHAIN = 64  # manifests a transcript may be read through; the chosen bases need log2(steps)


class _Parsed:
    """One parsed blob: what it was parsed as, the value, its size and (a message) its tokens."""

    __slots__ = ("kind", "value", "size", "tokens")

    def __init__(self, kind: str, value: Any, blob_bytes: int, tokens: int = 0) -> None:
        self.kind, self.value, self.size, self.tokens = kind, value, blob_bytes + _OVERHEAD_BYTES, tokens


class ParsedBlobCache:
    """Parsed blobs by digest, least recently used out first once over `max_bytes`. A digest
    names one byte string, parsed as one kind ("message", "manifest"): asked for as another
    kind, it is a miss."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, _Parsed] = OrderedDict()

    def get(self, kind: str, digest: str) -> _Parsed | None:
        return self.get_many(kind, [digest])[0]

    def get_many(self, kind: str, digests: list[str]) -> list[_Parsed | None]:
        # One call for a whole transcript: this runs for every message on every step.
        entries, touch = self._entries, self._entries.move_to_end
        found: list[_Parsed | None] = []
        for digest in digests:
            entry = entries.get(digest)
            if entry is not None and entry.kind == kind:
                touch(digest)
                found.append(entry)
            else:
                found.append(None)
        return found

    def put(self, digest: str, entry: _Parsed) -> None:
        if entry.size > self.max_bytes:
            return  # one blob bigger than the whole cache: never kept
        old = self._entries.pop(digest, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[digest] = entry
        self.bytes += entry.size
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= dropped.size

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Staged:
    """A message being stored (TranscriptStore.stage)."""

    digest: str
    message: Message  # its stored (canonical) form
    written: asyncio.Future[str]


@dataclass(frozen=True, slots=True)
class _Listed:
    """A parsed manifest: every digest of its transcript (its bases' too), its seq and base."""

    messages: tuple[str, ...]
    seq: int
    base: str | None


def manifest_bytes(manifest: Manifest) -> bytes:
    """A manifest's blob: a whole one is stored as it always was (its messages only)."""
    if manifest.base is None and manifest.seq == 0:
        return canonical_json({"messages": manifest.messages})
    return canonical_json(manifest)


class TranscriptStore:
    def __init__(self, blobs: BlobStore, *, cache_bytes: int = CACHE_BYTES) -> None:
        self.blobs = blobs
        self.cache = ParsedBlobCache(cache_bytes)
        self._last: tuple[list[str], list[_Parsed]] = ([], [])  # the digests last looked up, their entries

    async def load(self, digest: str) -> Message:
        entry = self.cache.get("message", digest) or await self._read_message(digest)
        return entry.value

    async def _read_message(self, digest: str) -> _Parsed:
        data = await self._read(digest)
        return self._remember_message(digest, data, Message.model_validate_json(data))

    def _remember_message(self, digest: str, data: bytes, message: Message) -> _Parsed:
        entry = _Parsed("message", message, len(data), message_meta(message).tokens)
        self.cache.put(digest, entry)
        return entry

    async def _read(self, digest: str) -> bytes:
        """The blob's bytes, checked against the digest here too: whatever store is behind, what
        gets parsed (and kept) is what the digest names."""
        data = await self.blobs.get(digest)
        if digest_of(data) != digest:
            raise BlobCorrupted(f"blob {digest} is corrupted: its {len(data)} bytes hash to {digest_of(data)}")
        return data

    async def _write(self, data: bytes) -> str:
        digest = await self.blobs.put(data)
        if digest != digest_of(data):
            raise BlobCorrupted(f"the blob store filed {len(data)} bytes under {digest}, which is not their digest")
        return digest

    async def store(self, message: Message) -> str:
        data = canonical_json(message)
        digest = await self._write(data)
        # Remember the stored (canonical, key-sorted) form: every worker then sends the model
        # byte-identical requests, whether it wrote the message or loaded it.
        self._remember_message(digest, data, Message.model_validate_json(data))
        return digest

    def stage(self, message: Message) -> Staged:
        """Start storing `message` and go on at once: its digest and stored form now, its write
        (and its place in the cache) when `written` is done. Await that before the digest leaves
        the activity; meanwhile other work (the model call) hides the write's fsync."""
        data = canonical_json(message)
        stored = Message.model_validate_json(data)

        async def write() -> str:
            digest = await self._write(data)
            self._remember_message(digest, data, stored)
            return digest

        return Staged(digest_of(data), stored, asyncio.ensure_future(write()))

    async def append(self, manifest: Manifest, message: Message, *, extends: str | None = None) -> tuple[str, str]:
        """Store `message`, add it to `manifest` and save that: (the message's digest, the
        manifest's). With `extends` (the transcript `manifest` was loaded from), only what was
        added since is written. The two blobs are written at once; both are durable when this
        returns."""
        data = canonical_json(message)
        manifest.messages.append(digest_of(data))
        digest, new = await asyncio.gather(self._write(data), self.extend(extends, manifest.messages))
        self._remember_message(digest, data, Message.model_validate_json(data))
        return digest, new

    async def extend(self, transcript: str | None, messages: list[str]) -> str:
        """Save the transcript `messages` as a manifest extending `transcript`'s chain when they
        start with its messages (a whole manifest otherwise): only the digests past the chosen
        base are written."""
        if transcript is not None and len(messages) > WHOLE_UP_TO:
            previous = await self._listed(transcript)
            seq = previous.seq + 1
            target = seq - (seq & -seq)  # the Fenwick parent: chains stay log2(seq) long
            base, listed = transcript, previous
            while listed.seq > target and listed.base is not None:
                base, listed = listed.base, await self._listed(listed.base)
            count = len(listed.messages)
            if listed.seq == target and tuple(messages[:count]) == listed.messages:
                return await self._save(Manifest(messages=messages[count:], base=base, seq=seq), messages)
        return await self._save(Manifest(messages=messages), messages)

    async def manifest(self, digest: str | None) -> Manifest:
        """The whole transcript `digest` names (its bases' messages too), as a whole manifest."""
        if digest is None:
            return Manifest()
        return Manifest(messages=list((await self._listed(digest)).messages))  # the caller's to change

    async def save(self, manifest: Manifest) -> str:
        """Save `manifest` whole."""
        return await self._save(Manifest(messages=manifest.messages), manifest.messages)

    async def _save(self, manifest: Manifest, every: list[str]) -> str:
        data = manifest_bytes(manifest)
        digest = await self._write(data)
        self._remember_manifest(digest, data, _Listed(tuple(every), manifest.seq, manifest.base))
        return digest

    def _remember_manifest(self, digest: str, data: bytes, listed: _Listed) -> None:
        # The full list is kept (a pointer a digest), not just this blob's part.
        self.cache.put(digest, _Parsed("manifest", listed, len(data) + 8 * len(listed.messages)))

    async def _listed(self, digest: str) -> _Listed:
        """The manifest `digest` with its whole list, read through its bases (each once)."""
        chain: list[tuple[str, bytes, Manifest]] = []
        at: str | None = digest
        known: _Listed | None = None
        while at is not None:
            entry = self.cache.get("manifest", at)
            if entry is not None:
                known = entry.value
                break
            if len(chain) >= MAX_CHAIN:
                raise BlobCorrupted(f"manifest {digest} extends more than {MAX_CHAIN} manifests")
            data = await self._read(at)
            manifest = Manifest.model_validate_json(data)
            chain.append((at, data, manifest))
            at = manifest.base
        # Oldest first: each manifest's list is its base's, then its own.
        for at, data, manifest in reversed(chain):
            before = known.messages if known is not None and manifest.base is not None else ()
            known = _Listed((*before, *manifest.messages), manifest.seq, manifest.base)
            self._remember_manifest(at, data, known)
        assert known is not None
        return known

    async def messages(self, manifest: Manifest) -> list[Message]:
        return [entry.value for entry in await self._entries(manifest.messages)]

    async def tokens(self, digests: list[str]) -> int:
        """The estimated tokens of these messages (agents/compaction.py's estimate), each message
        estimated once: what `conversation_tokens` sums, without walking every message each step."""
        return sum(entry.tokens for entry in await self._entries(digests))

    async def _entries(self, digests: list[str]) -> list[_Parsed]:
        # A step asks for its transcript's messages, then their tokens, and the next step for
        # the same ones and a few more: the last answer serves the digests it starts with.
        known, entries = self._last
        if known and len(known) <= len(digests) and digests[: len(known)] == known:
            done = entries if len(known) == len(digests) else [*entries, *await self._lookup(digests[len(known) :])]
        else:
            done = await self._lookup(digests)
        self._last = (list(digests), done)
        return done

    async def _lookup(self, digests: list[str]) -> list[_Parsed]:
        found = self.cache.get_many("message", digests)
        if None not in found:
            return cast(list[_Parsed], found)
        # Only the blobs not seen yet are read (all of them after a worker restart), at once.
        missing = {d for d, entry in zip(digests, found) if entry is None}
        read = dict(zip(missing, await asyncio.gather(*(self._read_message(d) for d in missing))))
        return [entry or read[d] for d, entry in zip(digests, found)]

    async def tool_message(self, result: ToolResult, cap_chars: int) -> Message:
        """The tool result as the model reads it: cut past `cap_chars`, saying where the rest is."""
        if result.output_digest is None:
            content = result.preview
        else:
            content = (await self.blobs.get(result.output_digest)).decode("utf-8", errors="replace")
        if len(content) > cap_chars:
            content = (
                content[:cap_chars] + f"\n[output cut at {cap_chars} of {len(content)} characters; "
                f'read the rest with read_output(digest="{result.output_digest}", offset={cap_chars})]'
            )
        return Message(
            role="tool", content=content, tool_call_id=result.call_id, name=result.name, is_error=not result.ok
        )
