"""Repository hooks end to end: the default branch's `.github/shopfloor.yml` configures a formatter
after each edit and a linter before each submit (both scripts committed in the repository); the
fix agent's scripted model works through them on the GitHub simulator, and the pushed branch, the
merge and what the model was sent show they ran as configured."""

from __future__ import annotations

from agent_runs import call
from factory_runs import APPROVE, FIX, TEST_CMD, TRIAGE_TURNS, approve_and_finish, assert_merged
from hook_runs import AFTER_EDIT, BEFORE_SUBMIT, LINT_FAILURE, agent_messages, hooks_factory, tool_messages

FORMATTED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


async def test_a_post_edit_formatters_change_is_in_the_pushed_patch(
    simulator, settings, running_worker, temporal_client, blobs, tmp_path
):
    # The model writes `a+b` with trailing blanks; only the formatter makes it what CI looks for.
    sloppy = {"path": "calc/ops.py", "old": "return a - b", "new": "return a+b   "}
    fix = [
        {"tool_calls": [call("read_file", path="calc/ops.py")]},
        {"tool_calls": [call("edit_file", **sloppy)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with hooks_factory(simulator, settings, running_worker, temporal_client, tmp_path, models, AFTER_EDIT) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.waiting_for == "approval", "the merge stage to wait for approval")
        assert f.file("calc/ops.py", ref=f"shopfloor/issue-{number}") == FORMATTED  # the pushed commit
        outcome = await approve_and_finish(f, number)
        _, messages = await agent_messages(temporal_client, blobs, f"{f.handle.id}/fix-1")
    assert_merged(f, number, outcome)
    assert f.file("calc/ops.py") == FORMATTED
    [edit] = tool_messages(messages, "edit_file")  # what the model's next request carried
    assert not edit.is_error
    assert "after-edit hook `python tools/fmt.py calc/ops.py`: exit code 0" in edit.content
    assert "fmt: reformatted calc/ops.py" in edit.content
    [read] = tool_messages(messages, "read_file")
    assert "after-edit hook" not in read.content  # a read sets off nothing


async def test_a_failing_pre_submit_hook_refuses_the_submit_with_its_output(
    simulator, settings, running_worker, temporal_client, blobs, tmp_path
):
    debug = {"path": "calc/ops.py", "old": "return a - b", "new": 'print("debug")\n    return a + b'}
    undebug = {"path": "calc/ops.py", "old": '    print("debug")\n', "new": ""}
    fix = [
        {"tool_calls": [call("edit_file", **debug)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},  # refused: the linter finds the print
        {"tool_calls": [call("edit_file", **undebug)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with hooks_factory(
        simulator, settings, running_worker, temporal_client, tmp_path, models, BEFORE_SUBMIT
    ) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        result, messages = await agent_messages(temporal_client, blobs, f"{f.handle.id}/fix-1")
    assert_merged(f, number, outcome)
    assert "print(" not in f.file("calc/ops.py")
    assert result.state == "completed" and result.steps == 6
    [refused] = tool_messages(messages, "submit")  # the accepted second submit ends the run
    assert refused.is_error
    assert refused.content.startswith("error: submit refused: the repository's before-submit checks failed")
    assert "before-submit hook `python tools/lint.py`: exit code 1" in refused.content
    assert LINT_FAILURE in refused.content  # the hook's own output


async def test_a_pre_submit_hook_that_changes_files_keeps_them_and_asks_for_the_tests_again(
    simulator, settings, running_worker, temporal_client, blobs, tmp_path
):
    # A fixing check (`ruff check --fix`, a formatter): what it changed is kept, but the submit
    # waits until the tests ran on it; on the next submit the hook changes nothing and it stands.
    hooks = "hooks:\n  before_submit:\n    - run: python tools/fmt.py calc/ops.py\n"
    sloppy = {"path": "calc/ops.py", "old": "return a - b", "new": "return a+b"}
    fix = [
        {"tool_calls": [call("edit_file", **sloppy)]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},  # refused: the hook reformatted calc/ops.py
        {"tool_calls": [call("submit", **FIX)]},  # refused: the tests have not run on that
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with hooks_factory(simulator, settings, running_worker, temporal_client, tmp_path, models, hooks) as f:
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        outcome = await approve_and_finish(f, number)
        result, messages = await agent_messages(temporal_client, blobs, f"{f.handle.id}/fix-1")
    assert_merged(f, number, outcome)
    assert f.file("calc/ops.py") == FORMATTED
    assert result.state == "completed" and result.steps == 6
    changed, untested = tool_messages(messages, "submit")
    assert changed.is_error and "before-submit hooks changed files" in changed.content
    assert untested.is_error and f"run the tests first: `{TEST_CMD}`" in untested.content
