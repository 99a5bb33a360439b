"""A long transcript's manifests: each step writes about as many manifest bytes at step 500 as at
step 10 (a manifest extends an earlier one instead of listing every digest again), and every
reader gets the whole list back: the store that wrote it, a fresh worker, and the tests' own
reader of the blobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from portable_repos import load_messages, manifest_digests
from recording_blobs import RecordingStore

from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.blobs import FileBlobStore, canonical_json, digest_of, get_json
from shopfloor.errors import BlobNotFound
from shopfloor.models.transcript import Manifest, Message, ToolCall

STEPS = 500
WINDOW = 64  # steps: the bases are chosen in powers of two, so bytes are compared over a span


def reply(step: int) -> Message:
    call = ToolCall(id=f"call_{step}", name="read_file", arguments={"path": f"m{step}.py"})
    return Message(role="assistant", content=f"reading m{step}.py", tool_calls=[call])


def result(step: int) -> Message:
    return Message(role="tool", tool_call_id=f"call_{step}", name="read_file", content=f"def f{step}(): ...")


async def run(ts: TranscriptStore, steps: int) -> tuple[str, list[str]]:
    """What model_step does each step: load the transcript, stage what the step adds, append the
    reply to the transcript it extends. The transcript and every manifest digest written."""
    transcript: str | None = None
    written: list[str] = []
    for step in range(1, steps + 1):
        manifest = await ts.manifest(transcript)
        await ts.messages(manifest)
        added = [Message(role="user", content="goal")] if transcript is None else [result(step - 1)]
        staged = [ts.stage(m) for m in added]
        manifest.messages += [s.digest for s in staged]
        for s in staged:
            await s.written
        _, transcript = await ts.append(manifest, reply(step), extends=transcript)
        written.append(transcript)
    assert transcript is not None
    return transcript, written


@pytest.mark.fast
async def test_manifest_bytes_per_step_stay_flat_and_the_whole_list_reads_back(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    ts = TranscriptStore(blobs)
    transcript, written = await run(ts, STEPS)
    sizes = [blobs.sizes[d] for d in written]

    early = sum(sizes[9 : 9 + WINDOW])  # steps 10 to 73
    late = sum(sizes[-WINDOW:])  # steps 437 to 500
    assert late <= early, (early, late)
    # A whole list at step 500 would be 1,000 digests (about 67 KB) each step.
    whole = len(canonical_json(Manifest(messages=(await ts.manifest(transcript)).messages)))
    assert late / WINDOW < whole / 50, (late, whole)

    # Every message, in order: the goal, then reply and result of each step, then the last reply.
    expected = [Message(role="user", content="goal")]
    for step in range(1, STEPS):
        expected += [reply(step), result(step)]
    expected.append(reply(STEPS))
    expected_digests = [digest_of(canonical_json(m)) for m in expected]

    assert (await ts.manifest(transcript)).messages == expected_digests
    fresh = TranscriptStore(RecordingStore(tmp_path / "blobs"))
    assert await fresh.messages(await fresh.manifest(transcript)) == expected
    assert await manifest_digests(blobs, transcript) == expected_digests
    assert await load_messages(blobs, transcript) == expected

    # Each earlier transcript still reads back as it was.
    for step in (1, 10, 33, 64, 255, 256, 257, 499):
        assert (await fresh.manifest(written[step - 1])).messages == expected_digests[: 2 * step]


@pytest.mark.fast
async def test_a_fresh_worker_reads_a_long_transcript_through_few_manifests(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    transcript, _ = await run(TranscriptStore(blobs), STEPS)
    blobs.reads.clear()
    fresh = TranscriptStore(blobs)
    messages = await fresh.messages(await fresh.manifest(transcript))
    manifests = len(blobs.reads) - len(messages)
    assert 1 < manifests <= 10  # log2 of the steps since the last whole manifest, at most
    assert len(set(blobs.reads)) == len(blobs.reads)  # each blob once
    blobs.reads.clear()
    await fresh.messages(await fresh.manifest(transcript))
    assert blobs.reads == []


@pytest.mark.fast
async def test_older_whole_manifests_read_as_they_are_and_a_new_short_one_is_written_whole(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    ts = TranscriptStore(blobs)
    goal = await ts.store(Message(role="user", content="goal"))
    older = await blobs.put(b'{"messages":["' + goal.encode() + b'"]}')  # as manifests were always stored
    assert (await TranscriptStore(blobs).manifest(older)).messages == [goal]

    manifest = await ts.manifest(older)
    digest, extended = await ts.append(manifest, reply(1), extends=older)
    assert await get_json(blobs, extended) == {"messages": [goal, digest]}  # a short transcript stays whole


@pytest.mark.fast
async def test_a_manifest_whose_base_is_missing_fails_to_load(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    orphan = await blobs.put(canonical_json(Manifest(messages=[], base="0" * 64, seq=1)))
    with pytest.raises(BlobNotFound):
        await TranscriptStore(blobs).manifest(orphan)
