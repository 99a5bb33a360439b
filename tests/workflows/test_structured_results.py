"""Agents with an output model finish by calling `submit` (real dev server, every workflow task
replayed, scripted cassettes): a valid result completes the run with `output` set and stored; an
invalid one is an error the model fixes; a plain answer earns one reminder, then fails the run;
the fix agent's submit waits for the tests to run after its last edit, and the harness, not the
model, says whether they passed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_runs import call, record_history, sample_repo, start_agent, write_cassette
from harness_runs import code_input, explore_input, git
from portable_repos import manifest_digests

from shopfloor.blobs import get_json
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.transcript import Manifest, Message
from shopfloor.workflows.agent import AgentWorkflow

TRIAGE = {
    "kind": "bug",
    "severity": "medium",
    "labels": ["bug"],
    "summary": "greet() ignores the name's surrounding whitespace.",
    "plan": "Strip the name in src/greet.py:greet and add a test.",
    "fixability": 0.8,
    "fixability_reasons": ["one function", "easy to test"],
}


async def run(temporal_client, settings, running_worker, inp) -> tuple[Any, AgentResult, Any]:
    async with running_worker():
        handle = await start_agent(temporal_client, inp, settings.task_queue)
        result = await handle.result()
        status = await handle.query(AgentWorkflow.status)
    return handle, result, status


async def transcript(blobs, result: AgentResult) -> list[Message]:
    manifest = Manifest(messages=await manifest_digests(blobs, result.transcript))
    return [Message.model_validate(await get_json(blobs, d)) for d in manifest.messages]


def triage_input(repo: Path, model: str):
    return explore_input(repo, model, goal="Triage issue #7: 'greet( \" Bob \") keeps the spaces'").model_copy(
        update={"agent": "triage"}
    )


async def test_triage_submits_a_valid_result_and_completes_with_it(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    model = write_cassette(
        tmp_path / "c.json",
        [{"tool_calls": [call("read_file", path="src/greet.py")]}, {"tool_calls": [call("submit", **TRIAGE)]}],
    )
    handle, result, status = await run(temporal_client, settings, running_worker, triage_input(repo, model))
    await record_history(handle, "harness-structured-triage")

    assert result.state == "completed", result
    assert result.steps == 2
    expected = {**TRIAGE, "duplicate_of": None}
    assert result.output == expected
    assert await get_json(blobs, result.output_digest) == expected  # the same JSON, in the blob store
    assert status.state == "completed"
    # The model was offered submit with the TriageResult schema as its parameters.
    messages = await transcript(blobs, result)
    assert messages[-1].tool_calls[0].name == "submit"


async def test_invalid_submission_is_an_error_the_model_fixes(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    bad = {**TRIAGE, "kind": "complaint", "fixability": 3, "summary": "x" * 2001}
    model = write_cassette(
        tmp_path / "c.json",
        [
            {"tool_calls": [call("submit", **bad)]},
            # submit beside another call is refused too: the result must rest on seen results.
            {"tool_calls": [call("read_file", path="README.md"), call("submit", **TRIAGE)]},
            {"tool_calls": [call("submit", **TRIAGE)]},
        ],
    )
    _, result, status = await run(temporal_client, settings, running_worker, triage_input(repo, model))

    assert result.state == "completed" and result.steps == 3, result
    assert result.output["kind"] == "bug"
    tool_msgs = [m for m in await transcript(blobs, result) if m.role == "tool"]
    first = tool_msgs[0]
    assert first.is_error and first.name == "submit"
    assert first.content.startswith("error: invalid TriageResult:")
    for field in ("kind", "fixability", "summary"):
        assert f"{field}:" in first.content
    alone = [m for m in tool_msgs if m.name == "submit"][1]
    assert alone.is_error and "call submit alone" in alone.content
    assert [m.name for m in tool_msgs if not m.is_error] == ["read_file"]
    assert [e.ok for e in status.events if e.summary == "submit TriageResult"] == [False, False]


async def test_plain_answer_gets_one_reminder_then_the_run_fails(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    model = write_cassette(tmp_path / "c.json", [{"content": "It is a bug."}, {"content": "Really, a bug."}])
    handle, result, status = await run(temporal_client, settings, running_worker, triage_input(repo, model))
    await record_history(handle, "harness-structured-no-submit")

    assert result.state == "failed" and result.steps == 2, result
    assert result.reason == "the agent answered in plain text twice and never called submit with a TriageResult"
    assert result.output is None and status.reason == result.reason
    messages = await transcript(blobs, result)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert "Finish by calling submit now" in messages[2].content and "fixability" in messages[2].content


async def test_plain_answer_then_submit_completes(temporal_client, settings, running_worker, tmp_path):
    repo = sample_repo(tmp_path / "repo")
    turns = [{"content": "It is a bug."}, {"tool_calls": [call("submit", **TRIAGE)]}]
    model = write_cassette(tmp_path / "c.json", turns)
    _, result, _ = await run(temporal_client, settings, running_worker, triage_input(repo, model))
    assert result.state == "completed" and result.output["summary"] == TRIAGE["summary"]


# -- the fix agent: tests after the last edit -------------------------------------------------

CHECK = "python3 check.py"
BUGGY = "def add(a, b):\n    return a - b\n"
FIX_EDIT = {"path": "calc.py", "old": "return a - b", "new": "return a + b"}
DOC_EDIT = {"path": "calc.py", "old": "def add", "new": "# Arithmetic.\ndef add"}
FIX = {
    "pr_title": "Fix add() returning the difference",
    "pr_body": "add() subtracted. Now it adds.\n\nFixes #3",
    "summary": "calc.add used - instead of +.",
    "tests_command": CHECK,
    "tests_passed": False,  # what the model claims; the harness's record wins
}


def calc_repo(root: Path) -> tuple[Path, str]:
    root.mkdir(parents=True)
    (root / "calc.py").write_text(BUGGY)
    (root / "check.py").write_text("from calc import add\nassert add(2, 3) == 5, 'add is wrong'\nprint('ok')\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "initial")
    return root, git(root, "rev-parse", "HEAD")


def fix_input(repo: Path, sha: str, model: str):
    return code_input(repo, sha, model, goal="Fix issue #3: add() is wrong.", required_command=CHECK).model_copy(
        update={"agent": "fix"}
    )


async def test_fix_submit_waits_for_tests_after_the_last_edit(
    temporal_client, settings, blobs, running_worker, tmp_path
):
    repo, sha = calc_repo(tmp_path / "repo")
    model = write_cassette(
        tmp_path / "c.json",
        [
            {"tool_calls": [call("submit", **FIX)]},  # 1: no tests yet: refused
            {"tool_calls": [call("edit_file", **FIX_EDIT)]},  # 2
            {"tool_calls": [call("run_command", command=CHECK)]},  # 3: passes
            {"tool_calls": [call("edit_file", **DOC_EDIT)]},  # 4: an edit after the tests
            {"tool_calls": [call("submit", **FIX)]},  # 5: refused again
            {"tool_calls": [call("run_command", command=f"cd . && {CHECK}")]},  # 6: contains it
            {"tool_calls": [call("submit", **FIX)]},  # 7: accepted
        ],
    )
    handle, result, _ = await run(temporal_client, settings, running_worker, fix_input(repo, sha, model))
    await record_history(handle, "harness-structured-fix")

    assert result.state == "completed" and result.steps == 7, result
    assert result.output["tests_passed"] is True  # from the harness's record, not the model's False
    assert result.output["pr_body"].endswith("Fixes #3")
    assert await get_json(blobs, result.output_digest) == result.output
    submits = [m for m in await transcript(blobs, result) if m.role == "tool" and m.name == "submit"]
    assert len(submits) == 2 and all(m.is_error for m in submits)
    assert submits[0].content == f"error: run the tests first: `{CHECK}` (it must run before you submit)."
    assert submits[1].content == (
        f"error: run the tests first: `{CHECK}` (it must run after your last edit before you submit)."
    )
    assert result.workspace is not None and result.workspace.patch_digest is not None


async def test_fix_may_submit_with_failing_tests_and_the_result_says_so(
    temporal_client, settings, running_worker, tmp_path
):
    repo, sha = calc_repo(tmp_path / "repo")
    wrong = {"path": "calc.py", "old": "return a - b", "new": "return a * b"}
    model = write_cassette(
        tmp_path / "c.json",
        [
            {"tool_calls": [call("edit_file", **wrong)]},
            {"tool_calls": [call("run_command", command=CHECK)]},  # exit 1
            {"tool_calls": [call("submit", **{**FIX, "tests_passed": True, "remaining_work": "add() still wrong"})]},
        ],
    )
    _, result, _ = await run(temporal_client, settings, running_worker, fix_input(repo, sha, model))
    assert result.state == "completed", result
    assert result.output["tests_passed"] is False and result.output["remaining_work"] == "add() still wrong"
