"""Which tests passed: read from pytest's `-rA` short summary, the lines SWE-bench's own harness
reads (`PASSED tests/test_x.py::test_y`, `FAILED ... - message`, `ERROR ...`)."""

from __future__ import annotations

import re

_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+)")


def outcomes_of(output: str) -> dict[str, str]:
    """Test id -> PASSED / FAILED / ERROR / ... for every test the summary names."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        m = _LINE.match(line.strip())
        if m:
            found[m[2]] = m[1]
    return found


def passed(outcomes: dict[str, str], test_id: str) -> bool:
    """A test passed only if the summary says so: one that never ran did not."""
    return outcomes.get(test_id) in ("PASSED", "XPASS")
