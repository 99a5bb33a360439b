"""Recorded histories (tests/histories/) replay against the current workflow code.

A change that makes workflow code diverge from what running workflows already recorded fails
here, before it reaches a worker with live runs. Record anew with SHOPFLOOR_RECORD_HISTORIES=1
(see tests/support/agent_runs.py) only when a change is meant to be incompatible and versioned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shopfloor.replay import load_history, replay

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


@pytest.mark.fast
def test_there_are_histories_to_replay():
    assert len(HISTORIES) >= 4, "tests/histories/ lost its recorded histories"


@pytest.mark.fast
def test_every_registered_workflow_type_has_a_recorded_history():
    from temporalio import workflow

    from shopfloor.worker import WORKFLOWS

    registered = {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    recorded = {
        load_history(path).events[0].workflow_execution_started_event_attributes.workflow_type.name
        for path in HISTORIES
    }
    missing = sorted(registered - recorded)
    assert not missing, (
        f"no recorded history in tests/histories/ for {missing}: record one from a test that runs it "
        "(record_history in tests/support/agent_runs.py, SHOPFLOOR_RECORD_HISTORIES=1)"
    )


@pytest.mark.fast
@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path):
    assert len(load_history(path).events) > 5
    await replay(path)


def test_replay_command_accepts_a_recorded_history_and_refuses_a_broken_one(tmp_path: Path):
    import subprocess
    import sys

    shopfloor = str(Path(sys.executable).parent / "shopfloor")
    ok = subprocess.run([shopfloor, "replay", str(HISTORIES[0])], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "replays cleanly" in ok.stdout

    broken = tmp_path / "broken.json"
    broken.write_text('{"events": "nope"}')
    bad = subprocess.run([shopfloor, "replay", str(broken)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "not a workflow history" in bad.stderr
