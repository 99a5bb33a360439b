"""The live view's pure parts: what a model's heartbeat text adds past what was shown, and the one
line a retried call gets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shopfloor.cli.live import PendingCall, one_line, retry_line
from shopfloor.models.model_progress import TEXT_TAIL_CHARS, ModelProgress

pytestmark = pytest.mark.fast


def test_text_past_what_was_shown_and_what_was_lost_between_looks():
    progress = ModelProgress(text="hello world", chars=11)
    assert progress.after(0) == ("hello world", False)
    assert progress.after(6) == ("world", False)
    assert progress.after(11) == ("", False)
    # Only the tail is kept: a reader that fell behind gets the tail and is told some was lost.
    tail = "x" * TEXT_TAIL_CHARS
    long = ModelProgress(text=tail, chars=TEXT_TAIL_CHARS + 500)
    assert long.after(100) == (tail, True)
    assert long.after(600) == (tail[100:], False)


def call(**overrides) -> PendingCall:
    values = dict(
        activity_id="7",
        activity_type="model_step",
        attempt=3,
        running=False,
        last_error="openai:gpt-4o: 503 Service Unavailable: busy",
        next_try=datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC),
        progress=None,
    )
    return PendingCall(**(values | overrides))


def test_the_retry_line_says_attempt_last_error_and_next_try_in_local_time():
    local = datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC).astimezone().strftime("%H:%M:%S")
    assert retry_line(call()) == (
        f"model call retrying: attempt 3, last error: openai:gpt-4o: 503 Service Unavailable: busy, next try at {local}"
    )
    assert retry_line(call(running=True, next_try=None)).endswith("busy, running now")
    assert retry_line(call(activity_type="read_file")).startswith("read_file call retrying: attempt 3")
    # A first attempt, or a retry without a recorded failure, is not "retrying".
    assert retry_line(call(attempt=1)) is None
    assert retry_line(call(last_error=None)) is None


def test_an_error_is_one_bounded_line():
    assert one_line("boom\n  Traceback (most recent call last):\n  x") == "boom Traceback (most recent call last): x"
    assert len(one_line("y" * 1000)) == 300
