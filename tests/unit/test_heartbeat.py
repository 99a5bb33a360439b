"""Heartbeats of a long await: a call that ends before the first beat costs none (one RPC less a
step), a call that lasts beats before a third of its heartbeat timeout is out (a dead worker is
still noticed within the timeout), and a model call's beats carry the text written so far (the
live view). Run as Temporal's ActivityEnvironment runs an activity, heartbeats recorded as sent."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.heartbeat import FIRST_BEAT_S, TextProgress, heartbeating
from shopfloor.models.model_progress import ModelProgress

pytestmark = pytest.mark.fast


def environment(heartbeat_timeout: timedelta) -> tuple[ActivityEnvironment, list[Any]]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=heartbeat_timeout)
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
    return env, beats


async def test_a_call_that_ends_before_the_first_beat_sends_no_heartbeat() -> None:
    env, beats = environment(timedelta(seconds=30))

    async def quick_call() -> str:
        progress = TextProgress("model call")

        async def reply() -> str:
            progress.add("done")
            await asyncio.sleep(0.05)  # the reply's I/O: the heartbeat task gets to run meanwhile
            return "done"

        return await heartbeating(reply(), progress=progress)

    assert await env.run(quick_call) == "done"
    assert beats == []


async def test_a_call_that_lasts_beats_before_a_third_of_its_heartbeat_timeout_with_its_text() -> None:
    timeout = timedelta(seconds=1.5)  # a third: 0.5 s, sooner than FIRST_BEAT_S
    assert timeout.total_seconds() / 3 < FIRST_BEAT_S
    env, beats = environment(timeout)

    async def slow_call() -> str:
        assert activity.info().heartbeat_timeout == timeout
        progress = TextProgress("model call")

        async def reply() -> str:
            progress.add("thinking about ")
            progress.add("the answer")
            await asyncio.sleep(timeout.total_seconds() * 0.8)  # past the first beat's time, within the timeout
            return "answer"

        return await heartbeating(reply(), progress=progress)

    assert await env.run(slow_call) == "answer"
    assert beats, "a call that outlasts a third of its heartbeat timeout heartbeats before it ends"
    first = beats[0]
    assert isinstance(first, ModelProgress)
    assert (first.detail, first.text, first.chars) == ("model call", "thinking about the answer", 25)


async def test_a_plain_await_beats_with_its_detail() -> None:
    timeout = timedelta(seconds=1.5)
    env, beats = environment(timeout)

    async def checkout() -> None:
        await heartbeating(asyncio.sleep(timeout.total_seconds() * 0.8), detail="opening the workspace")

    await env.run(checkout)
    assert beats and set(beats) == {"opening the workspace"}
