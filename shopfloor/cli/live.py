"""What a run is doing right now, from its pending activities on the Temporal server: the model's
text so far (the model activity's heartbeat details), the tool calls in flight, and a call that
failed and is being retried (its attempt, last error and next try), for `status` and `follow`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowExecutionDescription

from shopfloor.models.model_progress import ModelProgress

MODEL_ACTIVITIES = frozenset({"model_step", "compact_transcript"})
ERROR_CHARS = 300


@dataclass(frozen=True)
class PendingCall:
    """One activity the run waits on."""

    activity_id: str
    activity_type: str
    attempt: int
    running: bool  # an attempt is under way (else it waits for its next try)
    last_error: str | None  # the previous attempt's failure, one line
    next_try: datetime | None  # when a waiting retry starts (aware, UTC)
    progress: ModelProgress | None  # a model call's text so far

    @property
    def is_model(self) -> bool:
        return self.activity_type in MODEL_ACTIVITIES

    @property
    def retrying(self) -> bool:
        return self.attempt > 1 and self.last_error is not None


async def pending_calls(client: Client, description: WorkflowExecutionDescription) -> list[PendingCall]:
    """The activities `description`'s workflow waits on, in the order it scheduled them."""
    return [await _pending_call(client, info) for info in description.raw_description.pending_activities]


async def _pending_call(client: Client, info: PendingActivityInfo) -> PendingCall:
    progress = None
    if info.activity_type.name in MODEL_ACTIVITIES and info.heartbeat_details.payloads:
        progress = await _progress(client, info)
    last_error = None
    if info.HasField("last_failure") and info.last_failure.message:
        last_error = one_line(info.last_failure.message)
    next_try = None
    if info.HasField("next_attempt_schedule_time"):
        next_try = info.next_attempt_schedule_time.ToDatetime().replace(tzinfo=UTC)
    return PendingCall(
        activity_id=info.activity_id,
        activity_type=info.activity_type.name,
        attempt=max(1, info.attempt),
        running=info.state in (PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,),
        last_error=last_error,
        next_try=next_try,
        progress=progress,
    )


async def _progress(client: Client, info: PendingActivityInfo) -> ModelProgress | None:
    """The heartbeat's text so far, or None when it holds something else (a plain note)."""
    try:
        values = await client.data_converter.decode(info.heartbeat_details.payloads)
        return ModelProgress.model_validate(values[-1]) if values and isinstance(values[-1], dict) else None
    except (ValidationError, ValueError, TypeError, RuntimeError):
        return None


def one_line(text: str, limit: int = ERROR_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def retry_line(call: PendingCall) -> str | None:
    """ "model call retrying: attempt 3, last error: ..., next try at 12:00:05", or None when the
    call is not being retried."""
    if not call.retrying:
        return None
    what = "model call" if call.is_model else f"{call.activity_type} call"
    line = f"{what} retrying: attempt {call.attempt}, last error: {call.last_error}"
    if call.running:
        return line + ", running now"
    if call.next_try is not None:
        return line + f", next try at {call.next_try.astimezone():%H:%M:%S}"
    return line


async def retry_lines(client: Client, description: WorkflowExecutionDescription) -> list[str]:
    """One line per call of the run that failed and is being retried (for `shopfloor status`)."""
    lines = [retry_line(call) for call in await pending_calls(client, description)]
    return [line for line in lines if line]
