"""Large files never pass through the worker's memory.

The attack: an agent's command (the model follows whatever an issue says) writes a huge file into
the workspace, or the model asks read_file for one. Before, the checkpoint after the command read
the whole change into the worker (a 300 MB file raised its RSS from 40 MB to 787 MB and stored a
387 MB patch blob) and read_file held a whole line in memory (a 400 MB one-line file: +394 MB).

Each test runs a real AgentWorkflow (a scripted model) on the session's Temporal dev server, its
worker in this process, so the worker's peak RSS (VmHWM, reset through /proc/self/clear_refs just
before the run) is this process's. The file sizes are large enough that holding the file once
would be plain in that peak: it must grow by far less than the file.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from pathlib import Path

import pytest
from agent_runs import call, write_cassette
from portable_repos import load_messages, make_repo, tool_results

from shopfloor.activities.tools.read_only import READ_SCAN_BYTES, read_file
from shopfloor.agents.tools import ReadFileArgs
from shopfloor.models.agent_run import AgentInput, AgentResult, Limits, WorkspaceRef
from shopfloor.workflows.agent import AgentWorkflow

MB = 1024 * 1024
CAP = 20 * MB  # SHOPFLOOR_MAX_CHECKPOINT_BYTES's default
BIG = 150 * MB  # written by a command: random bytes, which no compression shrinks
ONE_LINE = 400 * MB  # one line, made quickly: 64 KB of text, then a sparse rest without a newline
CALC = "def add(a, b):\n    return a - b\n"


def peak_rss_reset() -> None:
    """Start a new peak: VmHWM becomes the current RSS (Linux: clear_refs "5")."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


async def run_agent(client, settings, running_worker, tmp_path: Path, turns: list[dict]) -> tuple[AgentResult, int]:
    """A `code` agent on a fresh repository, following `turns`: (its result, the worker's peak
    RSS growth in bytes during the run)."""
    repo = tmp_path / "repo"
    base = make_repo(repo, {"calc.py": CALC, ".gitignore": "logs/\n"})
    model = write_cassette(tmp_path / "cassette.json", [*turns, {"content": "done"}])
    inp = AgentInput(
        agent="code",
        model=model,
        goal="Fix add().",
        workspace=WorkspaceRef(repo="local/repo", clone_url=str(repo), base_sha=base),
        limits=Limits(max_steps=len(turns) + 2),
    )
    async with running_worker(settings):
        peak_rss_reset()
        before = rss_kb("VmRSS")
        handle = await client.start_workflow(
            AgentWorkflow.run, inp, id=f"test/large-{uuid.uuid4().hex[:10]}", task_queue=settings.task_queue
        )
        result = await asyncio.wait_for(handle.result(), timeout=300)
        growth = (rss_kb("VmHWM") - before) * 1024
    return result, growth


def blob_sizes(data_dir: Path) -> list[int]:
    return [p.stat().st_size for p in (data_dir / "blobs").rglob("*") if p.is_file()]


async def test_a_huge_file_written_by_a_command_is_refused_not_checkpointed(
    temporal_client, settings, running_worker, blobs, tmp_path
):
    turns = [
        {"tool_calls": [call("run_command", command=f"mkdir -p data && head -c {BIG} /dev/urandom > data/dump.bin")]},
        {"tool_calls": [call("edit_file", path="calc.py", old="return a - b", new="return a + b")]},
    ]
    result, growth = await run_agent(temporal_client, settings, running_worker, tmp_path, turns)

    assert result.state == "completed", result.reason
    results = tool_results(await load_messages(blobs, result.transcript or ""))
    refused = results["call_1_0"]
    assert refused.is_error
    assert refused.content.startswith("error: this change was not kept"), refused.content[:500]
    assert "'data/dump.bin' (150.0 MB)" in refused.content and "at most 20.0 MB" in refused.content
    # The run went on: the next edit was checkpointed, without the refused file.
    assert result.workspace is not None and result.workspace.patch_digest
    patch = await blobs.get(result.workspace.patch_digest)
    assert b"+    return a + b" in patch and b"dump.bin" not in patch
    # Nothing large was stored, and the worker never held the file.
    assert max(blob_sizes(settings.data_dir)) < CAP
    assert growth < BIG // 4, f"the worker's peak RSS grew by {growth / MB:.0f} MB during the run"


async def test_read_file_of_a_huge_one_line_file_is_bounded(temporal_client, settings, running_worker, blobs, tmp_path):
    make = (
        f"mkdir -p logs && head -c 65536 /dev/zero | tr '\\0' a > logs/one.log && truncate -s {ONE_LINE} logs/one.log"
    )
    turns = [
        {"tool_calls": [call("run_command", command=make)]},  # logs/ is ignored: the checkpoint leaves it out
        {"tool_calls": [call("read_file", path="logs/one.log")]},
        {"tool_calls": [call("read_file", path="logs/one.log", offset=2)]},
    ]
    result, growth = await run_agent(temporal_client, settings, running_worker, tmp_path, turns)

    assert result.state == "completed", result.reason
    results = tool_results(await load_messages(blobs, result.transcript or ""))
    assert not results["call_1_0"].is_error, results["call_1_0"].content
    page = results["call_2_0"]
    assert not page.is_error and page.content.startswith("     1\t" + "a" * 2000 + " ... [line truncated: more than ")
    unread = re.search(r"the last ([\d,]+) bytes of 'logs/one.log' were not read", page.content)
    assert unread and int(unread[1].replace(",", "")) >= ONE_LINE - READ_SCAN_BYTES - MB, page.content[-300:]
    assert len(page.content) < 10_000
    beyond = results["call_3_0"]
    assert beyond.is_error and "offset 2 lies past what one call reads (0 lines)" in beyond.content
    assert max(blob_sizes(settings.data_dir)) < MB
    assert growth < ONE_LINE // 4, f"the worker's peak RSS grew by {growth / MB:.0f} MB during the run"


@pytest.mark.fast
def test_read_file_pages_agree_with_the_lines_of_the_file(tmp_path: Path) -> None:
    """The bounded reader against the plain one, across chunk boundaries and long lines."""
    lines = [("x" * (i * 7919 % 20_000)) + f" {i}" for i in range(600)]
    (tmp_path / "f.txt").write_text("\n".join(lines) + "\n")
    for offset, limit in [(1, 3), (97, 5), (250, 1), (598, 10)]:
        page = read_file(tmp_path, ReadFileArgs(path="f.txt", offset=offset, limit=limit)).split("\n")
        for n, shown in zip(range(offset, offset + limit), page):
            line = lines[n - 1]
            assert shown.startswith(f"{n:>6}\t{line[:2000]}"), (n, shown[:80])
            if len(line) > 8000:
                assert shown.endswith(f"[line truncated: {len(line):,} bytes]")
        if offset + limit <= len(lines):
            assert (
                page[-1]
                == f"... {len(lines) - offset - limit + 1} more lines; call read_file with offset={offset + limit}"
            )
    os.truncate(tmp_path / "f.txt", os.path.getsize(tmp_path / "f.txt") - 1)  # no newline at the end
    assert read_file(tmp_path, ReadFileArgs(path="f.txt", offset=600)).startswith("   600\t")
