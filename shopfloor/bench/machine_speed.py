"""How fast the machine is while the bench runs, so two runs can be compared: a shared or virtual
machine's speed moves from hour to hour (the same code's in-memory step measured from 3.9 to
11.9 ms in one day), and the load average does not show it.

- a yardstick: a fixed pure-Python workload (the interpreter's speed, which a step's CPU cost
  follows), best of a few tries, at the start and at the end of the run;
- CPU steal: the share of CPU time the hypervisor gave to other machines during the run (Linux
  /proc/stat; None elsewhere).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

_YARDSTICK_ROUNDS = 200_000
_TRIES = 3
_PROC_STAT = Path("/proc/stat")


def yardstick_ms() -> float:
    """Milliseconds for a fixed pure-Python workload (dict, str and int work), best of a few."""
    best = float("inf")
    for _ in range(_TRIES):
        start = time.perf_counter()
        table: dict[str, int] = {}
        for i in range(_YARDSTICK_ROUNDS):
            key = f"k{i % 1024}"
            table[key] = table.get(key, 0) + (i * 7) % 13
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def cpu_ticks() -> tuple[int, int] | None:
    """(all CPU ticks, stolen ticks) so far, from /proc/stat; None where there is none."""
    try:
        fields = _PROC_STAT.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu" or len(fields) < 9:
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(values), values[7]


class MachineSpeed(BaseModel):
    yardstick_ms_start: float
    yardstick_ms_end: float
    cpu_steal_percent: float | None  # over the run

    def describe(self) -> str:
        steal = f", CPU steal {self.cpu_steal_percent:.1f} %" if self.cpu_steal_percent is not None else ""
        return (
            f"Python yardstick {self.yardstick_ms_start:.0f} ms at start, {self.yardstick_ms_end:.0f} ms at end "
            f"(lower is faster){steal}"
        )


class SpeedWatch:
    """Started before the benchmarks, read after them."""

    def __init__(self) -> None:
        self._start_ms = yardstick_ms()
        self._ticks = cpu_ticks()

    def result(self) -> MachineSpeed:
        end_ms = yardstick_ms()
        steal: float | None = None
        now = cpu_ticks()
        if self._ticks is not None and now is not None and now[0] > self._ticks[0]:
            steal = 100 * (now[1] - self._ticks[1]) / (now[0] - self._ticks[0])
        return MachineSpeed(yardstick_ms_start=self._start_ms, yardstick_ms_end=end_ms, cpu_steal_percent=steal)
