"""Every shopfloor command runs on uvloop where it is installed, and on asyncio's own loop where it
is not (shopfloor/event_loop.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from shopfloor import event_loop

pytestmark = pytest.mark.fast


async def _loop_type() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_commands_run_on_uvloop() -> None:
    import uvloop  # a dependency wherever shopfloor runs (not on Windows)

    assert event_loop.run(_loop_type()) is uvloop.Loop


def test_without_uvloop_the_standard_loop_runs_the_same_coroutine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    assert event_loop.loop_factory() is None
    loop_type = event_loop.run(_loop_type())
    assert issubclass(loop_type, asyncio.BaseEventLoop)
    assert loop_type.__module__.startswith("asyncio")


def test_a_command_error_still_reaches_the_caller() -> None:
    async def fails() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        event_loop.run(fails())
