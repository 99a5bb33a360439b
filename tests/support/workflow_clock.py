"""Workflow time as a run's history records it: the timers a run started and when they fired,
and when events happened. On the time-skipping test server this is the clock that jumped ahead,
so a test of a real default (an hour, thirty days) reads the wait from here, not from its own."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle


@dataclass(frozen=True)
class TimerWait:
    timeout: timedelta  # as the workflow asked for it
    started: datetime  # workflow time
    fired: datetime


async def timer_waits(handle: WorkflowHandle) -> list[TimerWait]:
    """The timers of this run that fired, in order, with when each was started and fired."""
    events = (await handle.fetch_history()).events
    started = {e.event_id: e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED}
    return [
        TimerWait(
            timeout=start.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta(),
            started=start.event_time.ToDatetime(),
            fired=e.event_time.ToDatetime(),
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
        for start in [started[e.timer_fired_event_attributes.started_event_id]]
    ]


async def event_times(handle: WorkflowHandle, event_type: EventType.ValueType) -> list[datetime]:
    """When each event of this type happened in the run, in workflow time."""
    events = (await handle.fetch_history()).events
    return [e.event_time.ToDatetime() for e in events if e.event_type == event_type]
