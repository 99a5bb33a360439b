"""The running agent's live checklist on the progress comment: done steps ✓/✗, the calls running
now, a model call being retried (error, attempt, next try), caps, and untrusted text kept inert;
and what the live activity reads of Temporal's description of a pending activity."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflow.v1 import PendingActivityInfo

from shopfloor.activities.live_progress import _running, text_tail
from shopfloor.agents.live_checklist import (
    MAX_DONE,
    MAX_RUNNING,
    LiveChecklist,
    RunningCall,
    checklist_lines,
    live_checklist,
)
from shopfloor.agents.progress import ProgressView, TimelineEntry, progress_body, render_progress
from shopfloor.models.agent_run import AgentStatus, StepEvent
from shopfloor.models.github_ops import comment_marker
from shopfloor.models.transcript import Usage

pytestmark = pytest.mark.fast

WF = "issue/acme/app/7"
T0 = datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC)
MODEL = "openai:gpt-4.1"
HOSTILE = "@alice see <!-- hidden --> ``` ](http://evil) #12\nsecond line\u200b"


def status(events: list[StepEvent], **kw) -> AgentStatus:
    base = {
        "agent": "fix",
        "model": MODEL,
        "repo": "acme/app",
        "stage": "fix",
        "step": 3,
        "max_steps": 40,
        "usage": Usage(input_tokens=1000, output_tokens=234),
        "cost_usd": 0.0123,
        "events": events,
    }
    return AgentStatus(**{**base, **kw})


def ev(seq: int, step: int, kind: str, summary: str, ok: bool = True, preview: str = "") -> StepEvent:
    return StepEvent(seq=seq, step=step, kind=kind, summary=summary, ok=ok, preview=preview)  # type: ignore[arg-type]


STEPS = [
    ev(1, 1, "model", f"{MODEL}: read_file calc/ops.py"),
    ev(2, 1, "tool", "read_file calc/ops.py"),
    ev(3, 2, "model", f'{MODEL}: run_command {{"command": "pytest -q"}}'),
    ev(4, 2, "tool", 'run_command {"command": "pytest -q"}', ok=False, preview="exit 1: 1 failed, 1 passed"),
]


def _outside_code(markdown: str) -> str:
    return re.sub(r"(`+)(.+?)\1", "", markdown)


def test_done_steps_are_listed_in_order_with_their_marks():
    lines = checklist_lines(live_checklist(status(STEPS), []))
    assert lines[0] == f"**Now: the fix agent** (` {MODEL} `) · step 3 of 40 · 1,234 tokens · $0.01"
    assert lines[2:] == [
        "- ✓ step 1 · model: ` read_file calc/ops.py `",
        "- ✓ ` read_file calc/ops.py `",
        '- ✓ step 2 · model: ` run_command {"command": "pytest -q"} `',
        '- ✗ ` run_command {"command": "pytest -q"} ` — ` exit 1: 1 failed, 1 passed `',
    ]


def test_the_call_running_now_is_shown_with_when_it_started():
    running = [RunningCall(kind="tool", summary='run_command {"command": "pytest -q"}', since=T0)]
    lines = checklist_lines(live_checklist(status(STEPS[:3]), running))
    assert lines[-1] == '- ⏳ ` run_command {"command": "pytest -q"} ` running since 12:00:05 UTC'
    model = checklist_lines(live_checklist(status(STEPS), [RunningCall(kind="model", since=T0)]))
    assert model[-1] == "- ⏳ step 3 · model call running since 12:00:05 UTC"
    hooks = RunningCall(kind="hooks", summary="before-submit hooks for submit FixResult")
    assert checklist_lines(live_checklist(status([]), [hooks]))[-1] == (
        "- ⏳ before-submit hooks for ` submit FixResult ` running"
    )


def test_a_model_call_being_retried_shows_its_error_attempt_and_next_try():
    waiting = RunningCall(
        kind="model",
        attempt=3,
        max_attempts=8,
        last_error="openai:gpt-4.1: 503 Service Unavailable (overloaded)",
        next_attempt_at=T0 + timedelta(seconds=4),
    )
    line = checklist_lines(live_checklist(status(STEPS), [waiting]))[-1]
    assert line == (
        "- ⟳ step 3 · model call failing, retrying at 12:00:09 UTC (attempt 3 of 8) · "
        "last error: ` openai:gpt-4.1: 503 Service Unavailable (overloaded) `"
    )
    # Its next attempt under way: still shown as a retry, with the error that caused it.
    now = waiting.model_copy(update={"next_attempt_at": None, "since": T0})
    line = checklist_lines(live_checklist(status(STEPS), [now]))[-1]
    assert line.startswith("- ⟳ step 3 · model call failing, retrying now (attempt 3 of 8) since 12:00:05 UTC")
    assert "503 Service Unavailable" in line
    assert RunningCall(kind="model").retrying is False and now.retrying


def test_a_streaming_model_calls_text_tail_is_shown_inert():
    call = RunningCall(kind="model", text_tail="x" * 500 + " I will now fix @bob's `add`")
    line = checklist_lines(live_checklist(status([]), [call]))[-1]
    assert line.startswith("- ⏳ step 3 · model call running · writing: ")
    assert "@" not in _outside_code(line) and len(line) < 250


def test_old_entries_are_counted_not_shown_and_running_calls_are_capped():
    events = [ev(i, i, "tool", f"read_file f{i}.py") for i in range(20, 50)]  # the status keeps 30
    live = live_checklist(status(events), [RunningCall(kind="tool", summary=f"grep x{i}") for i in range(9)])
    assert len(live.done) == MAX_DONE and live.done[-1].seq == 49 and live.earlier == 49 - MAX_DONE
    assert len(live.running) == MAX_RUNNING
    lines = checklist_lines(live)
    assert lines[2] == f"- … {49 - MAX_DONE} earlier entries not shown"
    assert len(lines) == 3 + MAX_DONE + MAX_RUNNING
    one = live_checklist(status([ev(2, 1, "tool", "read_file a")]), [])
    assert checklist_lines(one)[2] == "- … 1 earlier entry not shown"


def test_paused_and_starting():
    assert checklist_lines(live_checklist(status([]), []))[2:] == ["- ⏳ starting"]
    paused = checklist_lines(live_checklist(status(STEPS, paused=True), []))
    assert paused[-1] == "- ⏸ paused by an operator: it goes on once resumed"


def test_untrusted_summaries_errors_and_model_names_are_inert():
    events = [ev(1, 1, "model", HOSTILE), ev(2, 1, "tool", HOSTILE, ok=False, preview=HOSTILE)]
    running = [
        RunningCall(kind="tool", summary=HOSTILE),
        RunningCall(kind="model", attempt=2, last_error=HOSTILE, next_attempt_at=T0),
    ]
    lines = checklist_lines(live_checklist(status(events, model=HOSTILE, agent="fix<b>@x"), running))
    text = "\n".join(lines)
    assert len(lines) == 2 + 2 + 2  # every entry one line, whatever its text holds
    outside = _outside_code(text)
    assert "@" not in outside and "<!--" not in text and "](" not in outside and "#12" not in outside
    assert "hidden" not in text and "\u200b" not in text
    assert "the fixbx agent" in lines[0]


def test_the_checklist_sits_under_the_timeline_only_while_the_run_is_not_final():
    v = ProgressView(
        workflow_id=WF,
        repo="acme/app",
        number=7,
        stage="fix",
        timeline=[TimelineEntry(stage="fix", started_at=T0)],
        updated_at=T0,
    )
    lines = checklist_lines(live_checklist(status(STEPS), [RunningCall(kind="model")]))
    body = progress_body(v, "**Issue text the agents work from:** …", lines)
    assert body.index("| fix |") < body.index("**Now: the fix agent**") < body.index("Spent:")
    assert body.index("Spent:") < body.index("**Issue text the agents work from:**")
    assert body.endswith(comment_marker(WF, "progress")) and body.count("<!--") == 1
    assert render_progress(v) == progress_body(v)  # no checklist, no text section: as before
    final = v.model_copy(update={"state": "failed", "reason": "stuck"})
    assert "**Now:" not in progress_body(final, "", lines)


def _pending(**kw) -> PendingActivityInfo:
    p = PendingActivityInfo(activity_id="7", activity_type=ActivityType(name=kw.pop("type", "model_step")), **kw)
    return p


def _ts(at: datetime) -> Timestamp:
    t = Timestamp()
    t.FromDatetime(at)
    return t


def test_a_pending_activity_backing_off_is_a_retry_with_its_next_time():
    p = _pending(
        state=PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
        attempt=3,
        maximum_attempts=8,
        last_failure=Failure(message="openai:x: 503 Service Unavailable\nTraceback (most recent call last): ..."),
        next_attempt_schedule_time=_ts(T0),
    )
    call = _running(p, "model_step")
    assert call == RunningCall(
        kind="model", attempt=3, max_attempts=8, last_error="openai:x: 503 Service Unavailable", next_attempt_at=T0
    )


def test_a_pending_tool_call_under_way_is_shown_by_its_summary_since_it_started():
    p = _pending(
        type="run_command",
        state=PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        attempt=1,
        maximum_attempts=3,
        last_started_time=_ts(T0),
    )
    assert _running(p, "run_command pytest") == RunningCall(
        kind="tool", summary="run_command pytest", attempt=1, max_attempts=3, since=T0
    )
    assert isinstance(live_checklist(status([]), [_running(p, "x")]), LiveChecklist)


async def test_a_streaming_model_calls_text_so_far_is_read_from_its_heartbeat_for_this_attempt_only():
    from temporalio.api.common.v1 import Payloads
    from temporalio.contrib.pydantic import pydantic_data_converter as converter

    from shopfloor.models.model_progress import ModelProgress

    def beat(progress: object, attempt: int = 1, type_: str = "model_step") -> PendingActivityInfo:
        details = Payloads(payloads=converter.payload_converter.to_payloads([progress]))
        return _pending(type=type_, attempt=attempt, heartbeat_details=details)

    writing = ModelProgress(detail="openai:x step 3", attempt=2, text="Now I edit calc/ops.py", chars=900)
    assert await text_tail(beat(writing, attempt=2), converter) == "Now I edit calc/ops.py"
    assert await text_tail(beat(writing, attempt=3), converter) is None  # an earlier attempt's text
    assert await text_tail(beat("openai:x step 3"), converter) is None  # a plain detail, no text yet
    assert await text_tail(beat(writing, attempt=2, type_="run_command"), converter) is None
    assert await text_tail(_pending(attempt=1), converter) is None
