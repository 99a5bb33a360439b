"""The bench's machine-speed figures: CPU steal from /proc/stat over the run, and a yardstick."""

from __future__ import annotations

from pathlib import Path

import pytest

from shopfloor.bench import machine_speed
from shopfloor.bench.machine_speed import SpeedWatch, cpu_ticks

pytestmark = pytest.mark.fast


def _stat(path: Path, user: int, idle: int, steal: int) -> None:
    path.write_text(f"cpu  {user} 0 10 {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")


def test_steal_is_the_stolen_share_of_the_ticks_between_start_and_end(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(machine_speed, "_PROC_STAT", stat)
    _stat(stat, user=100, idle=100, steal=0)
    assert cpu_ticks() == (210, 0)
    watch = SpeedWatch()
    _stat(stat, user=150, idle=120, steal=30)  # 100 more ticks, 30 of them stolen
    speed = watch.result()
    assert speed.cpu_steal_percent == pytest.approx(30.0)
    assert speed.yardstick_ms_start > 0 and speed.yardstick_ms_end > 0
    assert "CPU steal 30.0 %" in speed.describe()


@pytest.mark.parametrize("text", [None, "", "intr 1 2 3\n", "cpu 1 2 3\n"])
def test_no_steal_where_there_is_no_readable_proc_stat(tmp_path, monkeypatch, text):
    stat = tmp_path / "stat"
    if text is not None:
        stat.write_text(text)
    monkeypatch.setattr(machine_speed, "_PROC_STAT", stat)
    assert cpu_ticks() is None
    speed = SpeedWatch().result()
    assert speed.cpu_steal_percent is None
    assert "steal" not in speed.describe()
