"""The structured results agents submit: bounded fields, and the submit rules around them."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.outputs import (
    MAX_OUTPUT_BYTES,
    OUTPUT_MODELS,
    AlertAssessment,
    FixResult,
    MergeResult,
    ReviewResult,
    TriageResult,
)
from shopfloor.agents.registry import AGENTS
from shopfloor.agents.submission import (
    SubmitRecord,
    gate_refusal,
    record_call,
    recorded_fields,
    runs_required,
    validate_submission,
)

pytestmark = pytest.mark.fast

TRIAGE = {"kind": "bug", "severity": "low", "summary": "s", "fixability": 0.5}


def test_registry_names_the_five_results():
    assert OUTPUT_MODELS == {
        "TriageResult": TriageResult,
        "FixResult": FixResult,
        "ReviewResult": ReviewResult,
        "MergeResult": MergeResult,
        "AlertAssessment": AlertAssessment,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "complaint"},
        {"severity": "urgent"},
        {"fixability": 1.5},
        {"fixability": -0.1},
        {"summary": "x" * 2001},
        {"plan": "x" * 4001},
        {"labels": [f"l{i}" for i in range(11)]},
        {"fixability_reasons": ["r"] * 11},
        {"fixability_reasons": ["x" * 301]},
        {"surprise": 1},  # unknown fields are refused, not dropped
    ],
)
def test_triage_bounds(change):
    with pytest.raises(ValidationError):
        TriageResult.model_validate({**TRIAGE, **change})


def test_bounds_of_fix_review_and_merge():
    FixResult(pr_title="t", pr_body="b", summary="s")
    for bad in ({"pr_title": "x" * 121}, {"pr_body": "x" * 6001}, {"remaining_work": "x" * 2001}):
        with pytest.raises(ValidationError):
            FixResult.model_validate({"pr_title": "t", "pr_body": "b", "summary": "s", **bad})
    comment = {"path": "a.py", "line": 1, "body": "b"}
    ReviewResult(verdict="approve", summary="ok", comments=[comment] * 25)
    for bad in (
        {"verdict": "lgtm"},
        {"comments": [comment] * 26},
        {"comments": [{**comment, "line": 0}]},
        {"comments": [{**comment, "body": "x" * 1001}]},
        {"comments": [{**comment, "path": "x" * 301}]},
    ):
        with pytest.raises(ValidationError):
            ReviewResult.model_validate({"verdict": "approve", "summary": "ok", **bad})
    MergeResult(commit_title="t", resolved=True, conflicts=["a"] * 50)
    with pytest.raises(ValidationError):
        MergeResult(commit_title="t", resolved=False, conflicts=["a"] * 51)


def test_the_largest_results_stay_near_the_history_budget():
    # Every field at its bound (one comment-heavy review excepted: the submit cap refuses it).
    triage = {
        **TRIAGE,
        "summary": "x" * 2000,
        "plan": "x" * 4000,
        "labels": ["x" * 50] * 10,
        "fixability_reasons": ["x" * 300] * 10,
    }
    fix = {
        "pr_title": "x" * 120,
        "pr_body": "x" * 6000,
        "summary": "x" * 2000,
        "tests_command": "x" * 500,
        "remaining_work": "x" * 2000,
    }
    for name, data in (("TriageResult", triage), ("FixResult", fix)):
        output, error = validate_submission(name, data)
        assert error is None and len(json.dumps(output)) <= MAX_OUTPUT_BYTES
    comments = [{"path": "p", "line": 1, "body": "x" * 1000}] * 25
    huge = {"verdict": "comment", "summary": "x" * 4000, "comments": comments}
    output, error = validate_submission("ReviewResult", huge)
    assert output is None and "keep it under 16384" in error


def test_validation_errors_name_each_field():
    output, error = validate_submission("TriageResult", {**TRIAGE, "kind": "x", "fixability": 2})
    assert output is None
    assert error.startswith("error: invalid TriageResult:") and "kind:" in error and "fixability:" in error


def test_which_calls_run_the_required_command():
    req = "python -m pytest -q"
    assert runs_required("run_command", {"command": "python -m pytest -q"}, req, None)
    assert runs_required("run_command", {"command": "cd src &&  python  -m pytest -q tests/"}, req, None)
    assert not runs_required("run_command", {"command": "python -m pytest"}, req, None)
    assert not runs_required("run_command", {"command": req}, None, None)
    assert runs_required("run_tests", {}, req, req)
    assert not runs_required("run_tests", {}, req, None)  # a detected command may be another one
    assert not runs_required("edit_file", {"path": req}, req, None)


def test_submit_gate_follows_edits_and_test_runs():
    req = "make test"
    r = SubmitRecord()
    assert gate_refusal(r, None) is None  # no required command: no gate
    assert "run the tests first: `make test`" in gate_refusal(r, req)
    r = record_call(r, edited=False, ran_required=True, ok=True, preview="exit code 0 (0.1 s)")
    assert gate_refusal(r, req) is None  # nothing edited yet: a run is enough
    r = record_call(r, edited=True, ran_required=False, ok=True, preview="edited")
    assert "after your last edit" in gate_refusal(r, req)
    r = record_call(r, edited=False, ran_required=True, ok=False, preview="error: exit code 2 (0.1 s)")
    assert gate_refusal(r, req) is None
    assert (r.last_required_ok, r.last_required_exit_code) == (False, 2)
    assert recorded_fields(r, req) == {"tests_passed": False}
    assert recorded_fields(r, None) == {"tests_passed": None}
    # A test run that itself changed the workspace still counts as after the edit.
    r = record_call(r, edited=True, ran_required=True, ok=True, preview="exit code 0")
    assert gate_refusal(r, req) is None


def test_the_factory_agents():
    assert {a: AGENTS[a].output_model for a in ("triage", "fix", "review", "merge")} == {
        "triage": "TriageResult",
        "fix": "FixResult",
        "review": "ReviewResult",
        "merge": "MergeResult",
    }
    assert AGENTS["fix"].submit_requires_command and not AGENTS["review"].submit_requires_command
    read_only = ("read_file", "list_dir", "glob", "grep", "read_output", "run_python", "delegate")
    assert all(t in read_only for t in AGENTS["triage"].tools)
    assert "run_command" in AGENTS["review"].tools and "edit_file" not in AGENTS["review"].tools
    for name in ("triage", "fix", "review", "merge"):
        agent = AGENTS[name]
        spec = agent.tool_specs()[-1]
        assert spec.name == "submit" and spec.parameters == OUTPUT_MODELS[agent.output_model].model_json_schema()
        assert "quoted data" in agent.system_prompt() and "submit" in agent.system_prompt()
    assert "Fixes #N" in AGENTS["fix"].system_prompt()
    # Agents without an output model are offered no submit.
    assert "submit" not in [s.name for s in AGENTS["explore"].tool_specs()]
    with pytest.raises(ValueError, match="unknown output model"):
        AgentDefinition(name="x", description="x", prompt_file="x.md", tools=[], output_model="Nope")
