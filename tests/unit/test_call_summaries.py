"""What the Temporal UI and the live views call each tool call: what it does, not raw JSON."""

from __future__ import annotations

import pytest

from shopfloor.agents.summaries import summarize_call

pytestmark = pytest.mark.fast


def test_commands_and_edits_read_as_what_they_do():
    assert summarize_call("run_command", {"command": "python -m pytest -q"}) == "run_command python -m pytest -q"
    assert summarize_call("edit_file", {"path": "calc/ops.py", "old": "return a - b", "new": "return a + b"}) == (
        'edit_file "return a - b" -> "return a + b" (calc/ops.py)'
    )
    assert summarize_call("write_file", {"path": "NOTES.md", "content": "a\nb\n"}) == "write_file NOTES.md (2 lines)"
    assert summarize_call("write_file", {"path": "x", "content": "one"}) == "write_file x (1 line)"


def test_long_or_odd_arguments_stay_one_short_line():
    long_old = "x = 1\n" * 50
    edit = summarize_call("edit_file", {"path": "a.py", "old": long_old, "new": "y"})
    assert "\n" not in edit and len(edit) <= 100 and edit.startswith('edit_file "x = 1 x = 1')
    assert len(summarize_call("run_command", {"command": "echo " + "a" * 500})) == 100
    # Arguments of the wrong type fall back to the arguments themselves.
    assert summarize_call("run_command", {"command": ["ls"]}) == 'run_command {"command": ["ls"]}'
