"""Read-only tool calls run as local activities: their results are markers in the workflow task
that ran them, so a step is one workflow task and one model activity, and history per step does
not grow with the run. Real dev server, every workflow task replayed (no cache)."""

from __future__ import annotations

from agent_runs import LOCAL_ACTIVITY_MARKER, activities_in, record_history, sample_repo, start_agent
from harness_runs import explore_input, with_fake
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History

from shopfloor.cli.agent_history import NOT_RUN, read_run
from shopfloor.models.agent_run import Limits
from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

READS = [
    [
        ScriptToolCall(name="list_dir", arguments={"path": "."}),
        ScriptToolCall(name="glob", arguments={"pattern": "**/*.py"}),
    ],
    [
        ScriptToolCall(name="read_file", arguments={"path": "src/greet.py"}),
        ScriptToolCall(name="grep", arguments={"pattern": "Hello"}),
    ],
]
ANSWER = "It greets people."


def counted(events, kind: EventType.ValueType) -> int:
    return sum(e.event_type == kind for e in events)


async def test_read_only_calls_are_local_activities_one_workflow_task_a_step(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    turns = [ScriptTurn(content="looking", tool_calls=calls) for calls in READS] + [ScriptTurn(content=ANSWER)]
    with FakeModelServer(turns) as fake:
        async with running_worker(with_fake(settings, fake)):
            handle = await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
            result = await handle.result()
        requests = fake.requests
    await record_history(handle, "agent-local-reads")

    assert result.state == "completed" and result.final_answer == ANSWER and result.steps == 3
    events = (await handle.fetch_history()).events
    # The sandbox inspected once, three model steps through the server; the four reads as markers.
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["sandbox_facts"] + ["model_step"] * 3
    local = [e for e in events if e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER]
    assert len(local) == 4
    assert sorted(kind for kind, _ in activities_in(local)) == ["glob", "grep", "list_dir", "read_file"]
    # One workflow task to start, one when the sandbox's facts came, then one a step: the reads ran
    # inside the task the model's answer woke.
    assert counted(events, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 2 + result.steps
    # The model read every result, from the blob store as before.
    tool_messages = [m for m in requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 4
    assert any("return f'Hello, {name}!'" in str(m["content"]) for m in tool_messages)


async def test_a_continued_run_answers_the_last_reads_with_their_recorded_results(
    temporal_client, settings, running_worker, tmp_path
):
    """`shopfloor agent continue` reads the last reply's results from history: local ones too."""
    repo = sample_repo(tmp_path / "repo")
    turns = [ScriptTurn(content="looking", tool_calls=READS[1])]
    with FakeModelServer(turns) as fake:
        async with running_worker(with_fake(settings, fake)):
            inp = explore_input(repo, "openai:fake", limits=Limits(max_steps=1))
            handle = await start_agent(temporal_client, inp, settings.task_queue)
            result = await handle.result()

    assert result.state == "limit_reached" and result.steps == 1  # after the reads, before a second step
    record = await read_run(temporal_client, handle.id)
    start = record.continued("go on")
    assert start is not None
    answered = {r.name: r for r in start.start_from.append}
    assert sorted(answered) == ["grep", "read_file"]
    assert all(r.ok and r.output_digest and r.preview != NOT_RUN for r in answered.values()), answered


def _steps_script(turn: int, body: dict) -> ScriptTurn:
    """Read one line a step (a different one each time, so the doom-loop watch stays quiet) until
    the goal's step count, then answer."""
    first_user = next(m for m in body["messages"] if m["role"] == "user")
    steps = int(str(first_user["content"]).split()[1])
    if turn < steps - 1:
        return ScriptTurn.tool("read_file", path="lines.txt", offset=1 + turn, limit=1)
    return ScriptTurn(content="done")


async def test_history_per_step_stays_flat_as_the_run_grows(temporal_client, settings, running_worker, tmp_path):
    """A step late in a run costs the history what an early one did: references, not contents."""
    repo = sample_repo(tmp_path / "repo")
    (repo / "lines.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    size = {}
    with FakeModelServer(_steps_script) as fake:
        async with running_worker(with_fake(settings, fake)):
            for steps in (5, 10, 40):
                inp = explore_input(repo, "openai:fake", goal=f"read {steps} times")
                handle = await start_agent(temporal_client, inp, settings.task_queue)
                result = await handle.result()
                assert result.state == "completed" and result.steps == steps, result
                events = (await handle.fetch_history()).events
                # The model steps, and the sandbox inspected once.
                assert counted(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 1 + steps
                assert counted(events, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 2 + steps
                size[steps] = History(events=events).ByteSize()
    # What the steps after the first five added, per step: the run's start and end cancel out.
    early = (size[10] - size[5]) / 5
    late = (size[40] - size[10]) / 30
    assert late <= early * 1.05, (early, late)  # ids and step numbers only grow a digit
    assert late < 3000, (early, late)
