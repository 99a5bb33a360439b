"""Transcripts in the blob store: one blob per message, a manifest blob listing their digests."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from shopfloor.blobs import BlobStore, canonical_json, get_json, put_json
from shopfloor.models.agent_run import ToolResult
from shopfloor.models.transcript import Manifest, Message


class TranscriptStore:
    def __init__(self, blobs: BlobStore, *, cache_size: int = 4096) -> None:
        self.blobs = blobs
        # Messages are content-addressed, so a cached one can never be stale.
        self._cache: OrderedDict[str, Message] = OrderedDict()
        self._cache_size = cache_size

    async def load(self, digest: str) -> Message:
        if digest in self._cache:
            self._cache.move_to_end(digest)
            return self._cache[digest]
        message = Message.model_validate(await get_json(self.blobs, digest))
        self._remember(digest, message)
        return message

    def _remember(self, digest: str, message: Message) -> None:
        self._cache[digest] = message
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def store(self, message: Message) -> str:
        data = canonical_json(message)
        digest = await self.blobs.put(data)
        # Remember the stored (canonical, key-sorted) form: every worker then sends the model
        # byte-identical requests, whether it wrote the message or loaded it.
        self._remember(digest, Message.model_validate_json(data))
        return digest

    async def manifest(self, digest: str | None) -> Manifest:
        return Manifest() if digest is None else Manifest.model_validate(await get_json(self.blobs, digest))

    async def save(self, manifest: Manifest) -> str:
        return await put_json(self.blobs, manifest)

    async def messages(self, manifest: Manifest) -> list[Message]:
        return list(await asyncio.gather(*(self.load(d) for d in manifest.messages)))

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
