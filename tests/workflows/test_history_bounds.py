"""History grows by a bounded number of bytes per step: references, never transcripts."""

from __future__ import annotations

from agent_runs import agent_input, call, history_bytes, start_agent, write_cassette

STEPS = 100
OUTPUT_BYTES = 20_000


async def test_hundred_steps_of_20kb_outputs_stay_under_1mb_of_history(
    temporal_client, settings, running_worker, tmp_path
):
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(STEPS):
        # ~20 KB per file; each step reads another one, so nothing is deduplicated away.
        line = f"file {i:03d} " + "x" * 69 + "\n"
        (repo / f"f{i:03d}.txt").write_text(line * (OUTPUT_BYTES // len(line) + 1))
    turns = [{"tool_calls": [call("read_file", path=f"f{i:03d}.txt", limit=5000)]} for i in range(STEPS)]
    model = write_cassette(tmp_path / "c.json", turns + [{"content": "read them all"}])

    async with running_worker():
        handle = await start_agent(temporal_client, agent_input(repo, model, max_steps=STEPS + 1), settings.task_queue)
        result = await handle.result()

    assert result.state == "completed" and result.steps == STEPS + 1, result.reason
    size = await history_bytes(temporal_client, handle.id)
    # The tool outputs alone are 2 MB; the history must not carry them.
    assert size < 1_000_000, f"history is {size} bytes"
    history = await handle.fetch_history()
    assert len(history.events) > 4 * STEPS  # every step really ran as activities
    print(f"history: {size} bytes for {STEPS + 1} steps ({size // (STEPS + 1)} bytes/step)")
