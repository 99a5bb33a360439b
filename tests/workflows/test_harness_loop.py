"""The agent loop's own rules through real runs (real dev server, every workflow task replayed):
doom-loop detection, compaction, tool-output truncation with read_output, text actions.

The model is FakeModelServer over real HTTP, so what the model saw is read off the wire.
"""

from __future__ import annotations

import hashlib
import json
import re

from agent_runs import record_history, sample_repo, start_agent
from harness_runs import (
    explore_input,
    is_compaction,
    last_tool_message,
    request_chars,
    status_of,
    step_requests,
    tool_messages,
    user_texts,
    wire,
    with_fake,
)
from portable_repos import manifest_digests

from shopfloor.blobs import get_json
from shopfloor.models.agent_run import Limits
from shopfloor.models.transcript import Manifest, Message, Usage
from shopfloor.testing import FakeModelServer, ScriptTurn

# -- doom loop --------------------------------------------------------------------------------


async def test_same_call_three_times_warns_the_model_then_a_fourth_stops_the_run_as_stuck(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    # A model that never learns: the same call, whatever it is told.
    with FakeModelServer(lambda turn, body: ScriptTurn.tool("read_file", "again", path="README.md")) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests
    await record_history(handle, "harness-doom-loop-stuck")

    assert result.state == "stuck", result
    assert result.steps == 4 and len(requests) == 4
    assert result.reason == (
        "stuck: called read_file with the same arguments 4 times in the last calls, and again after a warning"
    )
    warning = "You have called read_file with the same arguments 3 times; the result will not change."
    # No warning before the third identical call ...
    for r in requests[:3]:
        assert not any("same arguments" in t for t in user_texts(r))
    # ... then, in the next request, right after the third result, a user message says so.
    fourth = wire(requests[3])
    assert fourth[-2]["role"] == "tool" and "A tiny package" in fourth[-2]["content"]
    assert fourth[-1]["role"] == "user" and fourth[-1]["content"].startswith(warning)
    assert status.state == "stuck" and status.reason == result.reason
    assert any(w.startswith(warning) for w in status.warnings)


# -- compaction -------------------------------------------------------------------------------

DOCS = 8
STEP_USAGE = Usage(input_tokens=100, output_tokens=10)
COMPACTION_USAGE = Usage(input_tokens=1000, output_tokens=50)
SUMMARY = "SUMMARY-OF-EARLIER-WORK: the docs read so far describe the greeting package."
GOAL = "Read every doc and say how many there are."


def _doc_number(path: str) -> int:
    return int(re.fullmatch(r"doc(\d+)\.txt", path).group(1))


def reading_script(turn: int, body: dict) -> ScriptTurn:
    """Reads doc1..docN, one a step, then answers. The next doc follows from the newest call in
    the request (compaction drops old assistant messages, so the turn number cannot be used);
    compaction requests get a summary."""
    messages = body["messages"]
    rest = [m for m in messages if m["role"] != "system"]
    if len(rest) == 1 and rest[0]["content"].startswith("The conversation to summarize"):
        return ScriptTurn(content=SUMMARY, usage=COMPACTION_USAGE)
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    done = _doc_number(json.loads(calls[-1]["function"]["arguments"])["path"]) if calls else 0
    if done < DOCS:
        return ScriptTurn(
            content=f"Reading doc {done + 1}.",
            tool_calls=[("read_file", {"path": f"doc{done + 1}.txt"})],
            usage=STEP_USAGE,
        )
    return ScriptTurn(content=f"There are {DOCS} docs.", usage=STEP_USAGE)


def assert_calls_and_results_paired(messages: list[dict]) -> None:
    """Every tool message follows (through other tool messages only) the assistant message that
    made its call, and every call made has its result."""
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] != "tool":
            continue
        j = i - 1
        while messages[j]["role"] == "tool":
            j -= 1
        maker = messages[j]
        assert maker["role"] == "assistant", f"tool message {i} follows a {maker['role']} message"
        assert m["tool_call_id"] in [c["id"] for c in maker.get("tool_calls") or []], (i, m["tool_call_id"])
        answered.add((j, m["tool_call_id"]))
    for j, m in enumerate(messages):
        for c in m.get("tool_calls") or []:
            assert (j, c["id"]) in answered, f"call {c['id']} of message {j} has no result"


async def test_compaction_shrinks_what_the_model_sees_and_keeps_calls_with_their_results(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    for i in range(1, DOCS + 1):
        line = f"doc {i}: " + "lorem ipsum dolor sit amet " * 3 + "\n"
        (repo / f"doc{i}.txt").write_text(line * 30)  # ~2.6 KB, ~650 tokens a result
    inp = explore_input(repo, "openai:fake", goal=GOAL, compaction_budget_tokens=2500)

    with FakeModelServer(reading_script) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result = await handle.result()
            status = await status_of(handle)
        requests = [r for r in fake.requests if r.status == 200]
    await record_history(handle, "harness-compaction")

    assert result.state == "completed" and result.final_answer == f"There are {DOCS} docs.", result
    assert result.steps == DOCS + 1  # compactions cost tokens, not steps
    compactions = [i for i, r in enumerate(requests) if is_compaction(r)]
    # ~650 tokens a step against a budget of 2 500: compacted twice, the second time folding the
    # first summary in with newer messages.
    assert len(compactions) >= 2, "the transcript did not pass the budget twice"
    steps = step_requests(fake)
    assert len(steps) == DOCS + 1
    assert result.usage.input_tokens == 100 * (DOCS + 1) + 1000 * len(compactions)
    assert result.usage.output_tokens == 10 * (DOCS + 1) + 50 * len(compactions)

    for i in compactions:
        before, after = requests[i - 1], requests[i + 1]
        assert not is_compaction(before) and not is_compaction(after)
        # The compaction request carries the older messages to fold, under the summarizing prompt.
        folded = wire(requests[i])[-1]["content"]
        if i == compactions[0]:
            assert folded.startswith("The conversation to summarize:\n\n[assistant] Reading doc 1.")
        else:
            assert folded.startswith("The conversation to summarize:\n\n[user] [compaction] ") and SUMMARY in folded
        assert GOAL not in folded  # the goal is never folded: it stays verbatim
        assert "compacting the working transcript" in wire(requests[i])[0]["content"]
        # The next step's request is smaller than the one before the compaction ...
        assert len(wire(after)) < len(wire(before))
        assert request_chars(after) < request_chars(before)
        # ... and is: system prompt, the goal verbatim, the summary, then the newest messages.
        ms = wire(after)
        assert [m["role"] for m in ms[:3]] == ["system", "user", "user"]
        assert ms[1]["content"] == GOAL
        assert ms[2]["content"].startswith("[compaction] Summary of ")
        assert SUMMARY in ms[2]["content"]
        assert ms[3]["role"] == "assistant"  # the kept tail never starts with a tool result
        assert sum(1 for m in ms if m["content"] and str(m["content"]).startswith("[compaction]")) == 1
    for r in steps:
        assert_calls_and_results_paired(wire(r))

    # Each step's request ends with the previous step's result: every doc read once, in order,
    # so the script stayed in step through the compactions.
    read = [int(m["content"].split("doc ", 1)[1].split(":")[0]) for s in steps for m in tool_messages(s)[-1:]]
    assert read == list(range(1, DOCS + 1))
    assert [e.summary for e in status.events if e.summary.startswith("compacted")], status.events

    # The final transcript in the blob store is the compacted one; the folded messages are kept.
    manifest = Manifest(messages=await manifest_digests(blobs, result.transcript))
    first = Message.model_validate(await get_json(blobs, manifest.messages[0]))
    second = Message.model_validate(await get_json(blobs, manifest.messages[1]))
    assert first.content == GOAL and second.content.startswith("[compaction]")


# -- truncation and read_output ---------------------------------------------------------------

CUT = 16_000  # the explore agent's tool_output_cap_chars


async def test_long_output_is_cut_with_its_digest_and_read_output_pages_the_rest_of_this_run_only(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    (repo / "big.txt").write_text("".join(f"line {i:03d} " + "x" * 140 + "\n" for i in range(300)))
    foreign = await blobs.put(b"SECRET-OF-ANOTHER-RUN: an output this run never produced")

    def script(turn: int, body: dict) -> ScriptTurn:
        if turn == 0:
            return ScriptTurn.tool("read_file", path="big.txt")
        if turn == 1:
            note = body["messages"][-1]["content"]
            m = re.search(r'read_output\(digest="([0-9a-f]{64})", offset=(\d+)\)', note)
            return ScriptTurn.tool("read_output", digest=m.group(1), offset=int(m.group(2)))
        if turn == 2:
            return ScriptTurn.tool("read_output", digest=foreign)
        return ScriptTurn(content="big.txt has 300 lines.")

    with FakeModelServer(script) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests

    assert result.state == "completed" and result.steps == 4, result
    cut = last_tool_message(requests[1])["content"]
    digest = re.search(r'digest="([0-9a-f]{64})"', cut).group(1)
    full = (await blobs.get(digest)).decode()
    assert hashlib.sha256(full.encode()).hexdigest() == digest
    assert len(full) > 40_000 and full.startswith("     1\tline 000 ")
    # Cut at the cap, with a note naming the digest and where to go on.
    assert cut == full[:CUT] + (
        f"\n[output cut at {CUT} of {len(full)} characters; "
        f'read the rest with read_output(digest="{digest}", offset={CUT})]'
    )
    # read_output pages on from there (12 000 characters by default) and says what is left.
    page = last_tool_message(requests[2])["content"]
    end = CUT + 12_000
    assert page == full[CUT:end] + f"\n[{len(full) - end} more characters; offset={end}]"
    # A digest this run was never given is refused, even though the blob exists.
    refused = last_tool_message(requests[3])["content"]
    assert refused.startswith("error: no cut output ") and "in this run" in refused
    assert "SECRET-OF-ANOTHER-RUN" not in refused


# -- text actions -----------------------------------------------------------------------------

TEXT_TURNS = [
    # Two line-initial actions: both run, in order.
    'Let me look around.\nAction: read_file(path="README.md")\nAction: list_dir(path="src")\n',
    # A recap quoting the old action (not run again) and a new line-initial one (run).
    'I ran\n> Action: read_file(path="README.md")\nand it says the package greets people.\n'
    'Now the code:\nAction: read_file(path="src/greet.py")\n',
    # A recap with an action mid-line and in a quote, and the final answer: nothing runs.
    'I ran\n> Action: read_file(path="README.md")\nthen also Action: list_dir(path=".") earlier.\n'
    "Final answer: src/greet.py defines greet(), which says hello.",
]


async def test_text_actions_run_only_line_initial_actions_and_results_come_back_as_observations(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    inp = explore_input(repo, "openai:text-only", text_actions=True, limits=Limits(max_steps=10))
    with FakeModelServer([ScriptTurn(content=t) for t in TEXT_TURNS]) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result = await handle.result()
            status = await status_of(handle)
        requests = fake.requests
    await record_history(handle, "harness-text-actions")

    assert result.state == "completed" and result.steps == 3, result
    assert result.final_answer == TEXT_TURNS[2]
    assert len(requests) == 3  # the recap in the last reply started no step of its own
    tools_run = sorted((e.step, e.summary) for e in status.events if e.kind == "tool")
    assert tools_run == [(1, "list_dir src"), (1, "read_file README.md"), (2, "read_file src/greet.py")]

    for r in requests:
        assert "tools" not in r.body  # no native tool calling offered
        assert "Action: tool_name(" in wire(r)[0]["content"]  # the system prompt explains actions
        for m in wire(r):
            assert m["role"] in ("system", "user", "assistant") and not m.get("tool_calls")
    # Results come back as user "Observation" messages, in call order, after the model's own text.
    ms = wire(requests[1])
    assert [m["role"] for m in ms] == ["system", "user", "assistant", "user", "user"]
    assert ms[2]["content"] == TEXT_TURNS[0]
    assert ms[3]["content"].startswith("Observation from read_file (text_0):\n")
    assert "A tiny package that greets people." in ms[3]["content"]
    assert ms[4]["content"].startswith("Observation from list_dir (text_1):\n") and "greet.py" in ms[4]["content"]
    last = wire(requests[2])
    assert last[-1]["content"].startswith("Observation from read_file (text_0):\n")
    assert "return f'Hello, {name}!'" in last[-1]["content"]
    # The quoted README read was not run again: one README observation in all.
    assert sum("A tiny package" in m["content"] for m in last if m["role"] == "user") == 1
