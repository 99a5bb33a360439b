"""A real file blob store that records what goes through it, for tests that count blob I/O."""

from __future__ import annotations

from pathlib import Path

from shopfloor.blobs import FileBlobStore


class RecordingStore(FileBlobStore):
    """The real file store, recording the size of every blob put and every digest read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.sizes: dict[str, int] = {}
        self.reads: list[str] = []

    async def put(self, data: bytes) -> str:
        digest = await super().put(data)
        self.sizes[digest] = len(data)
        return digest

    async def get(self, digest: str) -> bytes:
        self.reads.append(digest)
        return await super().get(digest)
