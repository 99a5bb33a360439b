"""The transcript store keeps what it parsed: a step reads only the blobs it has not seen, a
worker that starts on a run half-way reads each old blob once, the cache stays within its bytes,
and it never holds anything but what a digest names (a missing blob still fails to load, damaged
bytes are refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording_blobs import RecordingStore

from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.agents.step import conversation_tokens
from shopfloor.blobs import BlobCorrupted, FileBlobStore, canonical_json
from shopfloor.errors import BlobNotFound
from shopfloor.models.transcript import Manifest, Message, ToolCall

MISSING = "0" * 64


def turn(i: int) -> list[Message]:
    call = ToolCall(id=f"call_{i}", name="read_file", arguments={"path": f"m{i}.py", "offset": 1, "limit": 10})
    return [
        Message(role="assistant", content=f"reading m{i}.py", tool_calls=[call]),
        Message(role="tool", tool_call_id=f"call_{i}", name="read_file", content=f"def f{i}():\n    return {i}\n" * 3),
    ]


async def step(ts: TranscriptStore, transcript: str | None, added: list[Message]) -> str:
    """What model_step does with a transcript: load it, append, save."""
    manifest = await ts.manifest(transcript)
    await ts.messages(manifest)
    for m in added:
        manifest.messages.append(await ts.store(m))
    return await ts.save(manifest)


@pytest.mark.fast
async def test_a_step_reads_only_the_blobs_it_has_not_seen(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    writer = TranscriptStore(blobs)
    transcript = await step(writer, None, [Message(role="user", content="goal")])
    for i in range(20):
        transcript = await step(writer, transcript, turn(i))
    assert blobs.reads == []  # the worker that wrote them reads none back

    # Another worker takes the run over half-way: every blob once, then only what is new.
    reader = TranscriptStore(blobs)
    first = await reader.messages(await reader.manifest(transcript))
    assert len(blobs.reads) == 1 + 41 and len(set(blobs.reads)) == len(blobs.reads)
    assert first == [Message(role="user", content="goal"), *(m for i in range(20) for m in turn(i))]
    blobs.reads.clear()
    transcript = await step(writer, transcript, turn(20))
    again = await reader.messages(await reader.manifest(transcript))
    new = (await reader.manifest(transcript)).messages[-2:]
    assert blobs.reads[0] == transcript and sorted(blobs.reads[1:]) == sorted(new)
    assert again == [*first, *turn(20)]


@pytest.mark.fast
async def test_the_manifest_handed_out_is_the_callers_to_change(tmp_path: Path) -> None:
    ts = TranscriptStore(FileBlobStore(tmp_path / "blobs"))
    transcript = await step(ts, None, [Message(role="user", content="goal")])
    mine = await ts.manifest(transcript)
    mine.messages.append(MISSING)
    assert len((await ts.manifest(transcript)).messages) == 1


@pytest.mark.fast
async def test_the_cache_stays_within_its_bytes_and_reads_back_what_it_dropped(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    ts = TranscriptStore(blobs, cache_bytes=4_000)
    transcript = await step(ts, None, [Message(role="user", content="goal")])
    for i in range(30):
        transcript = await step(ts, transcript, turn(i))
        assert ts.cache.bytes <= 4_000
    assert 0 < len(ts.cache) < 61
    blobs.reads.clear()
    messages = await ts.messages(await ts.manifest(transcript))
    assert messages == [Message(role="user", content="goal"), *(m for i in range(30) for m in turn(i))]
    assert blobs.reads  # the dropped ones were read again, and are right
    assert ts.cache.bytes <= 4_000


@pytest.mark.fast
async def test_a_missing_blob_still_fails_and_damaged_bytes_are_never_kept(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    writer = TranscriptStore(blobs)
    digest = await writer.store(Message(role="user", content="goal"))
    with pytest.raises(BlobNotFound):
        await writer.load(MISSING)
    with pytest.raises(BlobNotFound):
        await writer.manifest(MISSING)
    with pytest.raises(BlobNotFound):
        await writer.messages(Manifest(messages=[digest, MISSING]))

    # Bytes that do not hash to their digest, from a store that would hand them out: refused.
    class Lying(FileBlobStore):
        async def get(self, digest: str) -> bytes:
            return canonical_json(Message(role="user", content="something else"))

    reader = TranscriptStore(Lying(tmp_path / "blobs"))
    with pytest.raises(BlobCorrupted):
        await reader.load(digest)
    assert len(reader.cache) == 0


@pytest.mark.fast
async def test_token_estimates_kept_per_message_sum_to_the_conversations(tmp_path: Path) -> None:
    ts = TranscriptStore(FileBlobStore(tmp_path / "blobs"))
    transcript = await step(ts, None, [Message(role="user", content="goal ü " * 50)])
    for i in range(5):
        transcript = await step(ts, transcript, turn(i))
    manifest = await ts.manifest(transcript)
    messages = await ts.messages(manifest)
    assert await ts.tokens(manifest.messages) == conversation_tokens(messages)
    fresh = TranscriptStore(FileBlobStore(tmp_path / "blobs"))  # estimated from the blobs read
    assert await fresh.tokens(manifest.messages) == conversation_tokens(messages)


@pytest.mark.fast
async def test_append_stores_the_message_and_the_manifest_that_lists_it(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    ts = TranscriptStore(blobs)
    transcript = await step(ts, None, [Message(role="user", content="goal")])
    manifest = await ts.manifest(transcript)
    reply = turn(0)[0]
    digest, appended = await ts.append(manifest, reply)
    assert manifest.messages[-1] == digest
    fresh = TranscriptStore(blobs)
    assert (await fresh.manifest(appended)).messages == manifest.messages
    assert await fresh.load(digest) == reply
    blobs.reads.clear()
    assert await ts.messages(await ts.manifest(appended)) == [Message(role="user", content="goal"), reply]
    assert blobs.reads == []  # the writer keeps both


@pytest.mark.fast
async def test_a_staged_message_is_kept_only_once_it_is_written(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    ts = TranscriptStore(blobs)
    message = turn(0)[1]
    staged = ts.stage(message)
    assert staged.message == message and len(ts.cache) == 0  # nothing served before it is stored
    assert await staged.written == staged.digest == await TranscriptStore(blobs).store(message)
    assert await blobs.exists(staged.digest)
    assert await ts.load(staged.digest) is staged.message and blobs.reads == []
