"""Context limits through real runs (real dev server, every workflow task replayed): a provider's
400 for a conversation too long for the model leads to one compaction and the step again, for
OpenAI and Anthropic in their own wire formats; too long again ends the run with a clear reason;
a reply cut off at the output limit is continued and the answer joined; a cut-off reply's last
tool call is not run.

The model is FakeModelServer over real HTTP: its context window refuses what is over it, as the
providers do, and what the model was sent is read off the wire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_runs import record_history, sample_repo, start_agent
from harness_runs import activity_types, explore_input, status_of
from pydantic import SecretStr

from shopfloor.agents.context_limits import CONTINUE_NOTE, CUT_OFF_CALL_ERROR
from shopfloor.blobs import get_json
from shopfloor.models.transcript import Message
from shopfloor.settings import Settings
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn, prompt_tokens

APIS = ["openai", "anthropic"]
SUMMARY = "SUMMARY-OF-EARLIER-WORK: big.txt was read; small.txt is next."
BIG = "BIG-FILE lorem ipsum dolor sit amet, consectetur adipiscing\n" * 150  # ~10 KB: ~2 800 tokens
SMALL = "SMALL-FILE the greeting package greets by name\n" * 8
CUT = {"openai": "length", "anthropic": "max_tokens"}  # each API's word for "cut off at the output limit"


def with_fake(settings: Settings, fake: FakeModelServer, api: str) -> Settings:
    if api == "openai":
        return settings.model_copy(update={"openai_base_url": fake.openai_base_url, "openai_api_key": None})
    return settings.model_copy(
        update={"anthropic_base_url": fake.anthropic_base_url, "anthropic_api_key": SecretStr("sk-test")}
    )


def flat(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's conversation as (kind, text), either API: user, assistant, tool (a result)."""
    out: list[tuple[str, str]] = []
    for m in body.get("messages") or []:
        role, content = m.get("role"), m.get("content")
        if role == "system":
            continue
        if role == "tool":
            out.append(("tool", str(content)))
        elif isinstance(content, list):
            for block in content:
                if block.get("type") == "text":
                    out.append((role, block["text"]))
                elif block.get("type") == "tool_result":
                    out.append(("tool", str(block.get("content"))))
        elif content:
            out.append((role, str(content)))
    return out


def is_compaction(request: LoggedRequest) -> bool:
    users = [text for kind, text in flat(request.body) if kind == "user"]
    return len(flat(request.body)) == 1 and users[0].startswith("The conversation to summarize")


def reader(fake_ref: list[FakeModelServer], first: str, second: str, margin: int = 100):
    """Reads `first`, then `second`, then answers; compaction requests get SUMMARY. Once the first
    file's result is in, the server's window is set `margin` tokens above that request, so the
    next step (one more result) is too long for it."""
    marker = {"big.txt": "BIG-FILE", "small.txt": "SMALL-FILE"}

    def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
        conversation = flat(body)
        if len(conversation) == 1 and conversation[0][1].startswith("The conversation to summarize"):
            return ScriptTurn(content=SUMMARY)
        results = [text for kind, text in conversation if kind == "tool"]
        if not results:
            return ScriptTurn.tool("read_file", path=first)
        if marker[first] in results[-1]:
            if fake_ref[0].context_window_tokens is None:
                fake_ref[0].context_window_tokens = prompt_tokens(body) + margin
            return ScriptTurn.tool("read_file", path=second)
        return ScriptTurn(content="Read both files.")

    return script


def repo_with_files(tmp_path):
    repo = sample_repo(tmp_path / "repo")
    (repo / "big.txt").write_text(BIG)
    (repo / "small.txt").write_text(SMALL)
    return repo


@pytest.mark.parametrize("api", APIS)
async def test_too_long_for_the_model_compacts_once_and_the_run_completes(
    api, temporal_client, settings, running_worker, tmp_path
):
    repo = repo_with_files(tmp_path)
    fake_ref: list[FakeModelServer] = []
    with FakeModelServer(reader(fake_ref, "big.txt", "small.txt")) as fake:
        fake_ref.append(fake)
        async with running_worker(with_fake(settings, fake, api)):
            handle = await start_agent(temporal_client, explore_input(repo, f"{api}:fake"), settings.task_queue)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests
    if api == "openai":  # one recorded history of the path is enough for the replay tests
        await record_history(handle, "harness-reactive-compaction")

    assert result.state == "completed" and result.final_answer == "Read both files.", result
    # Read big, read small, refused as too long, the compaction, the same step again.
    assert [r.status for r in requests] == [200, 200, 400, 200, 200]
    assert [is_compaction(r) for r in requests] == [False, False, False, True, False]
    refused, compaction, retried = requests[2], requests[3], requests[4]
    # The big result was folded into the summary; the retried step carries the summary, the newest
    # call and its result, and fits the window the refused one did not.
    assert "BIG-FILE" in flat(compaction.body)[0][1]
    retried_texts = [text for _, text in flat(retried.body)]
    assert any(SUMMARY in t for t in retried_texts) and not any("BIG-FILE" in t for t in retried_texts)
    assert any("SMALL-FILE" in t for t in retried_texts)
    assert prompt_tokens(retried.body) <= fake.context_window_tokens < prompt_tokens(refused.body)
    assert result.steps == 3  # the refused attempt and its retry are one step
    assert await activity_types(handle) == [
        "sandbox_facts",
        "model_step",
        "read_file",
        "model_step",
        "read_file",
        "model_step",
        "compact_transcript",
        "model_step",
    ]
    summaries = [e.summary for e in status.events]
    assert any("too long for the model" in s for s in summaries), summaries
    assert sum(s.startswith("compacted ") for s in summaries) == 1


async def test_too_long_again_after_the_compaction_fails_the_run_with_a_clear_reason(
    temporal_client, settings, running_worker, tmp_path
):
    repo = repo_with_files(tmp_path)
    fake_ref: list[FakeModelServer] = []
    # Small first, then big: the newest result alone is over the window, compaction or not (the
    # window leaves room for the compaction request, which repeats the goal under its own prompt).
    with FakeModelServer(reader(fake_ref, "small.txt", "big.txt", margin=1000)) as fake:
        fake_ref.append(fake)
        async with running_worker(with_fake(settings, fake, "openai")):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "failed"
    assert (result.reason or "").startswith("the conversation is too long for openai:fake even after compaction (")
    assert "maximum context length is" in (result.reason or "")
    assert "Traceback" not in (result.reason or "")
    assert [r.status for r in requests] == [200, 200, 400, 200, 400]  # one compaction, one retry
    assert is_compaction(requests[3])


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_cut_off_at_the_output_limit_is_continued_and_the_answer_joined(
    api, temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")

    def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
        if turn == 0:
            return ScriptTurn(content="The package greets peo", finish_reason=CUT[api])
        return ScriptTurn(content="ple by name.")

    with FakeModelServer(script) as fake:
        async with running_worker(with_fake(settings, fake, api)):
            handle = await start_agent(temporal_client, explore_input(repo, f"{api}:fake"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests
    if api == "openai":
        await record_history(handle, "harness-cut-off-continued")

    assert result.state == "completed" and result.final_answer == "The package greets people by name.", result
    assert len(requests) == 2 and result.steps == 2
    # The model was shown its cut-off reply and asked to go on from there.
    assert flat(requests[1].body)[-2:] == [("assistant", "The package greets peo"), ("user", CONTINUE_NOTE)]
    joined = Message.model_validate(await get_json(blobs, result.final_digest))
    assert joined.content == "The package greets people by name."


@pytest.mark.parametrize("api", APIS)
async def test_a_cut_off_replys_last_call_is_not_run_and_the_model_is_told_why(
    api, temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")

    def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
        if turn == 0:
            # Cut off while writing the second call: its arguments may be incomplete; the first stands.
            calls = [("list_dir", {"path": "src"}), ("read_file", {"path": "README.md"})]
            return ScriptTurn(content="Reading.", tool_calls=calls, finish_reason=CUT[api])
        return ScriptTurn(content="I will read it again, with a shorter reply.")

    with FakeModelServer(script) as fake:
        async with running_worker(with_fake(settings, fake, api)):
            handle = await start_agent(temporal_client, explore_input(repo, f"{api}:fake"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed", result
    listed, cut = [text for kind, text in flat(requests[1].body) if kind == "tool"]
    assert "greet.py" in listed
    assert cut == f"error: {CUT_OFF_CALL_ERROR}"
    assert "A tiny package that greets people" not in json.dumps(requests[1].body)  # README was not read
