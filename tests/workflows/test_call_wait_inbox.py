"""An issue's run keeps the tool calls its agent runs wait on, whatever order and however often
the notices come: a repeat changes nothing, an end that overtook its start wins, a notice from a
workflow that is not one of its agent runs is ignored, the list is bounded, and it survives the
inbox's continue-as-new. Answers by comment that name nothing waiting get one reply each.

The IssueWorkflow runs as an inbox only (no pipeline) on the dev server, every task replayed;
notices are signalled as an agent run would; GitHub is the simulator.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.client import WorkflowHandle
from waiting import query_until

from shopfloor.models.call_waits import CALL_WAIT_SIGNAL, WAITING_CALLS_QUERY, CallWait, CallWaitNotice
from shopfloor.models.inbox import (
    GITHUB_EVENT_SIGNAL,
    ISSUE_WORKFLOW,
    CommentCommand,
    RepoEvent,
    TextSnapshot,
    issue_workflow_id,
)
from shopfloor.models.inbox_state import InboxSummary, IssueInboxInput
from shopfloor.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def gh_settings(settings: Settings, simulator: SimulatorHandle) -> Settings:
    return settings.model_copy(
        update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN), "factory_pipeline": False}
    )


def notice(wid: str, call_id: str, step: int, ended: str | None = None, agent_run: str = "fix-1") -> CallWaitNotice:
    wait = CallWait(
        workflow_id=f"{wid}/{agent_run}",
        agent="fix",
        call_id=call_id,
        step=step,
        summary=f'run_command {{"command": "pip install {call_id}"}}',
        reason="installs Python packages",
        since=T0,
        until=T0 + timedelta(days=3650),  # never past its refusal time while the test runs
    )
    return CallWaitNotice(wait=wait, ended=ended)  # type: ignore[arg-type]


async def waiting(handle: WorkflowHandle) -> list[tuple[str, int]]:
    waits = await handle.query(WAITING_CALLS_QUERY, result_type=list[CallWait])
    return [(w.call_id, w.step) for w in waits]


async def settled(handle: WorkflowHandle, expected: list[tuple[str, int]]) -> None:
    """Until the signals sent so far are handled (each expected list is where they settle, not a step between)."""
    deadline = asyncio.get_running_loop().time() + 30
    while (got := await waiting(handle)) != expected:
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(0.2)


async def test_the_waits_an_issue_run_keeps(temporal_client, gh_settings, running_worker, simulator):
    name = f"app-{uuid.uuid4().hex[:8]}"
    repo = f"acme/{name}"
    simulator.create_repo("acme", name)
    simulator.set_permission("acme", name, "maria", "maintain")
    with simulator.api("alice") as c:
        number = c.post(f"/repos/{repo}/issues", json={"title": "It breaks", "body": "Steps..."}).json()["number"]
    wid = issue_workflow_id(repo, number)

    def event(delivery: str, **kw) -> RepoEvent:
        return RepoEvent(delivery_id=delivery, repo=repo, number=number, sender="maria", **kw)

    def command(name: str, args: str, comment_id: int) -> RepoEvent:
        text = TextSnapshot(digest="sha256:" + uuid.uuid4().hex, preview=f"/shopfloor {name} {args}", chars=30)
        return event(
            f"c-{comment_id}",
            event="issue_comment",
            action="created",
            comment_id=comment_id,
            command=CommentCommand(name=name, args=args),  # type: ignore[arg-type]
            text=text,
        )

    opened = event("d-open", event="issues", action="opened", title="It breaks")
    async with running_worker(gh_settings):
        handle = await temporal_client.start_workflow(
            ISSUE_WORKFLOW,
            IssueInboxInput(repo=repo, number=number, continue_after_events=2),
            id=wid,
            task_queue=gh_settings.task_queue,
            start_signal=GITHUB_EVENT_SIGNAL,
            start_signal_args=[opened],
        )
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "a", 3))
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "a", 3))  # a repeat
        await handle.signal(CALL_WAIT_SIGNAL, notice("issue/acme/other/9", "x", 1))  # not this run's agent run
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "b", 4, ended="rejected"))  # its end came first
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "b", 4))
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "a", 5))  # the same id at a later step
        await settled(handle, [("a", 3), ("a", 5)])
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "a", 3, ended="timed out"))
        await settled(handle, [("a", 5)])
        for k in range(12):
            await handle.signal(CALL_WAIT_SIGNAL, notice(wid, f"n{k}", 10 + k, agent_run="review-1"))
        await settled(handle, [(f"n{k}", 10 + k) for k in range(2, 12)])  # the newest ten
        # Two calls a comment cannot tell apart (the same id once cut to what a comment carries).
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "dup", 30))
        await handle.signal(CALL_WAIT_SIGNAL, notice(wid, "dup`", 30, agent_run="review-2"))
        kept = [(f"n{k}", 10 + k) for k in range(4, 12)] + [("dup", 30), ("dup`", 30)]
        await settled(handle, kept)

        # Answers that name nothing waiting: one reply each; the events let the inbox continue as new.
        await handle.signal(GITHUB_EVENT_SIGNAL, command("approve-call", "b", 201))
        await handle.signal(GITHUB_EVENT_SIGNAL, command("reject-call", "zzz", 202))
        await handle.signal(GITHUB_EVENT_SIGNAL, command("approve-call", "", 203))
        await handle.signal(GITHUB_EVENT_SIGNAL, command("approve-call", "b", 201))  # the same comment again
        await handle.signal(GITHUB_EVENT_SIGNAL, command("approve-call", "dup", 204))
        inbox = await query_until(
            handle, "inbox", InboxSummary, lambda s: len(s.commands_accepted) == 4 and s.runs > 1, "the answers"
        )
        still = await waiting(handle)
        await handle.terminate("test over")

    assert inbox.runs > 1 and still == kept  # carried across runs; the ambiguous answer answered nothing
    with simulator.api() as c:
        replies = [x["body"] for x in c.get(f"/repos/{repo}/issues/{number}/comments").json()]
    assert len(replies) == 4, replies
    assert "`/shopfloor approve-call` did nothing: call `b` no longer waits: it was rejected already." in replies[0]
    assert "`/shopfloor reject-call` did nothing: no tool call `zzz` waits for an answer in this run." in replies[1]
    assert "`/shopfloor approve-call` did nothing: names no call: comment `/shopfloor approve-call <id>`." in replies[2]
    assert "Waiting now: `n4`, `n5`" in replies[2]
    assert "did nothing: several waiting calls go by `dup`; answer from the command line" in replies[3]
    assert f"`shopfloor status {wid}` lists them" in replies[3]
