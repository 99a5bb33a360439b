"""A repository's setup steps end to end: the simulator, the webhook edge, a worker with bubblewrap
and scripted models, and a package index on this machine's loopback that the operator lists as
an internal mirror (SHOPFLOOR_SANDBOX_MIRRORS).

The sample repository's tests import `tinypkg`, which is not installed in the worker: only the
policy's `setup:` (pip from the mirror, through the sandbox's egress proxy) makes the fix agent's
required test command pass, and so the merge. A second run on the same base reuses the prepared
environment (the index serves the wheel once); a failing setup ends the run failed, its output on
the progress comment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from agent_runs import call
from factory_runs import (
    APPROVE,
    DEADLINE_S,
    FIX,
    TEST_CMD,
    TRIAGE_TURNS,
    assert_merged,
    factory,
    fix_turns,
    sample_repo,
)
from package_index import PackageIndex, build_wheel

from shopfloor.activities.sandbox import resolve_mode
from shopfloor.models.inbox_state import IssueOutcome

TINY = build_wheel("tinypkg", "1.0", {"tinypkg/__init__.py": "VALUE = 42\n"})


@pytest.fixture
def bwrap() -> None:
    mode, note = resolve_mode("auto")
    if mode != "bwrap":
        pytest.fail(f"bubblewrap is not usable here ({note}); CI installs it (.ci/run)")


@pytest.fixture
def index() -> Iterator[PackageIndex]:
    served = PackageIndex({"tinypkg": TINY})
    yield served
    served.close()


def policy(setup: list[str], auto_fix: str = "label") -> str:
    steps = "".join(f"  - {json.dumps(command)}\n" for command in setup)  # a YAML double-quoted scalar
    return (
        f"auto_fix: {auto_fix}\nrequire_human_approval: true\ntest_command: {TEST_CMD}\n"
        f"ci_timeout_minutes: 10\nsetup:\n{steps}"
    )


def source_with_tiny_tests(tmp_path, text: str):
    root = sample_repo(tmp_path / "src", text)
    (root / "tests" / "test_tiny.py").write_text(
        "import tinypkg\n\n\ndef test_tiny():\n    assert tinypkg.VALUE == 42\n"
    )
    return root


async def progress_saying(f, number: int, text: str) -> str:
    """The issue's progress comment once it says `text` (it may not exist yet when asked)."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        bodies = [c["body"] for c in f.progress_comments(number)]
        if bodies and text in bodies[0]:
            return bodies[0]
        assert asyncio.get_running_loop().time() < deadline, f"the progress comment never said {text!r}: {bodies}"
        await asyncio.sleep(0.3)


async def test_setup_installs_from_the_mirror_the_fix_merges_and_a_second_run_reuses_it(
    bwrap, index, simulator, settings, running_worker, temporal_client, tmp_path
):
    source = source_with_tiny_tests(tmp_path, policy([f"python -m pip install --index-url {index.url} tinypkg"]))
    changes = {"verdict": "request_changes", "summary": "Cover negative numbers too.", "comments": []}
    add_test = {
        "path": "tests/test_ops.py",
        "old": "assert add(2, 3) == 5",
        "new": "assert add(2, 3) == 5\n    assert add(-1, -1) == -2",
    }
    models = {
        "triage": TRIAGE_TURNS,
        "fix": fix_turns(),
        "review": [{"tool_calls": [call("submit", **changes)]}],
        # Round two's required tests import tinypkg too: they pass only in the prepared environment.
        "fix-2": [
            {"tool_calls": [call("edit_file", **add_test)]},
            {"tool_calls": [call("run_command", command=TEST_CMD)]},
            {"tool_calls": [call("submit", **FIX)]},
        ],
        "review-2": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    async with factory(
        simulator,
        settings,
        running_worker,
        temporal_client,
        tmp_path,
        models,
        source_dir=source,
        sandbox_mirrors=[index.endpoint],
    ) as f:
        first = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        first_handle = f.handle
        f.comment(first, "/shopfloor fix", "maria")
        await f.state_when(lambda s: s.waiting_for == "approval", "the first run to wait for approval")
        body = f.progress(first)
        assert "| setup |" in body and "setup: 1 command(s)" in body, body
        assert "plan from .github/shopfloor.yml: python -m pip install" in body, body
        assert index.downloads == ["tinypkg-1.0-py3-none-any.whl"]

        # A second run on the same base commit (main has not moved yet): setup is not run again.
        second = f.open_issue("mul() is slow", "mul(2, 3) takes a while.")
        reused = await progress_saying(f, second, "setup: reused the prepared environment")
        assert "| setup |" in reused
        assert index.downloads == ["tinypkg-1.0-py3-none-any.whl"]

        f.handle = first_handle
        f.comment(first, "/shopfloor approve", "maria")
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(first_handle.result(), timeout=DEADLINE_S))
    assert_merged(f, first, outcome, reviews=2)
    # Both rounds' required test command ran green in the one environment setup prepared.
    assert outcome.factory is not None and (outcome.factory.fix_round, outcome.factory.review_round) == (2, 2)
    assert "add(-1, -1) == -2" in f.file("tests/test_ops.py")
    assert index.downloads == ["tinypkg-1.0-py3-none-any.whl"]
    assert body.count("| setup |") == 1


async def test_a_failing_setup_ends_the_run_failed_with_its_output(
    bwrap, simulator, settings, running_worker, temporal_client, tmp_path
):
    # Much output first: the progress comment shows its end, where an installer says what failed.
    failing = (
        'python -c \'import sys; print("\\n".join("Collecting noise %d" % i for i in range(300))); '
        'print("ERROR: No matching distribution found for nothere"); sys.exit(1)\''
    )
    source = source_with_tiny_tests(tmp_path, policy([failing], auto_fix="always"))
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns()}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, source_dir=source) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        state = await f.state_when(lambda s: s.result == "failed", "the run to fail")
        body = await progress_saying(f, number, "Final state: failed")
    assert "at setup" in body and "setup failed" in body, body
    assert "No matching distribution found for nothere" in body, body
    assert f.get("/pulls", state="all") == []
    assert state.children == []  # no agent ran
