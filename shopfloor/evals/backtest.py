"""Backtest tasks from a repository's own history: which closed issues a merged pull request
fixed, which of its files are tests, and the hidden check those tests make.

What `shopfloor eval backtest` decides without touching GitHub or git (shopfloor/cli/eval_backtest.py
does the reading and the running): a pull request fixes the issues its body closes with GitHub's
closing keywords; its changed files split into tests (the hidden check) and the fix (the gold
patch); FAIL_TO_PASS are the tests that fail at the merge base with the new tests in and pass
with the fix, PASS_TO_PASS those that pass both times.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pydantic import BaseModel

from shopfloor.evals.pytest_summary import passed

# GitHub's closing keywords, followed by `#N` of this repository.
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
_TEST_DIRS = {"test", "tests", "testing"}


class Skipped(BaseModel):
    issue: int
    reason: str


def closed_issues(body: str | None) -> list[int]:
    """The issue numbers a pull request's body closes (`Fixes #12`, `closes: #3`), in order."""
    return list(dict.fromkeys(int(n) for n in _CLOSES.findall(body or "")))


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    name = p.name
    return (
        bool(_TEST_DIRS & {part.lower() for part in p.parts[:-1]})
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith(("_test.py", "_tests.py"))
        or name == "conftest.py"
    )


def hidden_check(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) from the tests' outcomes without and with the fix."""
    ids = sorted(set(before) | set(after))
    fail_to_pass = [t for t in ids if not passed(before, t) and passed(after, t)]
    pass_to_pass = [t for t in ids if passed(before, t) and passed(after, t)]
    return fail_to_pass, pass_to_pass


def task_id(repo: str, issue: int) -> str:
    """SWE-bench's naming: owner__name-<issue>."""
    return f"{repo.replace('/', '__')}-{issue}"
