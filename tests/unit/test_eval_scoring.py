"""Scoring an eval: which tests passed (pytest's -rA summary), each task's category, a model's
summary with its interval, and `compare` between two stored runs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shopfloor.activities.eval_factory import eval_policy, repo_name
from shopfloor.agents.policy import parse_policy, within_operator_bounds
from shopfloor.errors import UsageError
from shopfloor.evals.compare import changes, load_results, render
from shopfloor.evals.pytest_summary import outcomes_of, passed
from shopfloor.evals.report import markdown
from shopfloor.evals.scoring import categorize, categorize_factory, summarize, wilson_interval
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.eval_run import CheckOutput, EvalResults, FactoryEnd, PublishInput, TaskOutcome

pytestmark = pytest.mark.fast

PYTEST_TAIL = """\
tests/test_add.py F.                                                     [100%]
=========================== short test summary info ============================
PASSED tests/test_ops.py::test_mul
PASSED tests/test_p.py::test_x[a-b]
FAILED tests/test_add.py::test_add_adds - assert -1 == 5
ERROR tests/test_db.py::test_conn - OSError
1 failed, 2 passed, 1 error in 0.03s
"""


def test_the_summary_names_each_tests_outcome_and_a_test_that_never_ran_did_not_pass():
    found = outcomes_of(PYTEST_TAIL)
    assert found == {
        "tests/test_ops.py::test_mul": "PASSED",
        "tests/test_p.py::test_x[a-b]": "PASSED",
        "tests/test_add.py::test_add_adds": "FAILED",
        "tests/test_db.py::test_conn": "ERROR",
    }
    assert passed(found, "tests/test_ops.py::test_mul") and not passed(found, "tests/test_db.py::test_conn")
    assert not passed(found, "tests/test_missing.py::test_gone")


def result(state: str = "completed", steps: int = 4) -> AgentResult:
    return AgentResult(state=state, steps=steps, reason="max_steps 8 reached" if state == "limit_reached" else None)


@pytest.mark.parametrize(
    ("agent", "check", "error", "category"),
    [
        (result(), CheckOutput(patch_lines=2, fail_to_pass_passed=["t::a"]), None, "resolved"),
        (result(), CheckOutput(patch_lines=2, fail_to_pass_failed=["t::a"]), None, "tests_fail"),
        (
            result(),
            CheckOutput(patch_lines=2, fail_to_pass_passed=["t::a"], pass_to_pass_failed=["t::b"]),
            None,
            "tests_fail",
        ),
        (result(), CheckOutput(patch_lines=0, fail_to_pass_failed=["t::a"]), None, "no_patch"),
        (result("limit_reached"), None, None, "limit_reached"),
        (result(), CheckOutput(error="the hidden tests' patch did not apply"), None, "harness_error"),
        (None, None, "model call failed: 401", "harness_error"),
        (result(), None, None, "harness_error"),
    ],
)
def test_each_task_lands_in_one_category(agent, check, error, category):
    got, why = categorize(agent, check, error)
    assert got == category and why


HEAD = "a" * 40


@pytest.mark.parametrize(
    ("end", "check", "error", "category", "why"),
    [
        (FactoryEnd(stage="merge", head_sha=HEAD, pr_number=2), CheckOutput(patch_lines=1, fail_to_pass_passed=["t::a"]), None, "resolved", "now pass on PR #2"),
        (FactoryEnd(stage="merge", head_sha=HEAD, pr_number=2), CheckOutput(patch_lines=1, fail_to_pass_failed=["t::a"]), None, "tests_fail", "t::a"),
        (FactoryEnd(stage="merge", head_sha=HEAD, pr_number=2), CheckOutput(patch_lines=0), None, "no_patch", "changes no file"),
        (FactoryEnd(stage="done", result="salvaged", reason="max_steps 8 reached", head_sha=HEAD), None, None, "limit_reached", "max_steps 8"),
        (FactoryEnd(stage="parked", result="parked", reason="triage: not a bug"), None, None, "no_patch", "parked at parked: triage: not a bug"),
        (FactoryEnd(stage="done", result="failed", reason="fix: failed"), None, None, "no_patch", "opened no pull request"),
        (FactoryEnd(stage="merge", head_sha=HEAD), CheckOutput(error="the hidden tests did not run"), None, "harness_error", "did not run"),
        (None, None, "the factory did not reach its merge stage within 60 s", "harness_error", "within 60 s"),
    ],
)  # fmt: skip
def test_each_factory_run_lands_in_one_category(end, check, error, category, why):
    got, said = categorize_factory(end, check, error)
    assert got == category and why in said, said


def test_the_factory_evals_policy_gives_every_agent_the_model_and_waits_for_a_merge_approval():
    inp = PublishInput(
        task_digest="d", eval_run="r", model="openai:m", max_steps=300, max_cost_usd=None, approval_timeout_s=61
    )
    own = "labels:\n  trigger: fixme\nauto_fix: never\nbudgets:\n  max_cost_usd:\n    fix: 1\n"
    load = within_operator_bounds(parse_policy(eval_policy(inp, "python -m pytest", own)), ["openai:m"])
    assert not load.errors, load.errors
    policy = load.policy
    assert (policy.auto_fix, policy.require_human_approval, policy.auto_merge) == ("always", True, False)
    assert (policy.models.triage, policy.models.fix, policy.models.review) == ("openai:m",) * 3
    assert (policy.budgets.max_steps.fix, policy.budgets.max_steps.triage) == (300, 200)  # triage's bound is 200
    assert policy.budgets.max_cost_usd_per_run is None and policy.budgets.max_cost_usd.fix is None
    assert policy.labels.trigger == "fixme" and policy.test_command == "python -m pytest"  # the task's own kept
    assert policy.approval_timeout_minutes == 2 and policy.fixability_threshold == 0
    broken = parse_policy(eval_policy(inp, "pytest", "{not: yaml: at all"))  # the task's broken file is replaced
    assert not broken.errors and broken.policy.models.fix == "openai:m"
    # A model the operator does not let repositories choose sets the whole file aside: the eval refuses first.
    assert within_operator_bounds(parse_policy(eval_policy(inp, "pytest", None)), ["openai:other"]).errors


def test_each_task_and_model_gets_its_own_repository_name():
    names = {repo_name("run", t, m) for t in ("a", "b") for m in ("openai:x", "openai:y")}
    assert len(names) == 4 and all(len(n) <= 100 for n in names)
    long = repo_name("r" * 60, "t" * 60, "openai:" + "m" * 60)
    assert len(long) <= 100 and long != repo_name("r" * 60, "t" * 60, "openai:" + "m" * 59)
    assert repo_name("run", "a", "openai:x") == repo_name("run", "a", "openai:x")  # a retry finds the same one


def test_the_wilson_interval_is_honest_for_a_handful_of_tasks():
    lo, hi = wilson_interval(1, 4)
    assert (round(lo, 3), round(hi, 3)) == (0.046, 0.699)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 10)[0] == 0.0


def outcome(task: str, model: str, category: str, cost: float = 0.01, steps: int = 4) -> TaskOutcome:
    return TaskOutcome(
        instance_id=task, model=model, category=category, resolved=category == "resolved", cost_usd=cost, steps=steps
    )


def results(run_id: str, outcomes: list[TaskOutcome]) -> EvalResults:
    at = datetime(2026, 12, 3, tzinfo=UTC)
    return EvalResults(
        run_id=run_id,
        suite="builtin",
        started_at=at,
        ended_at=at,
        models=list(dict.fromkeys(o.model for o in outcomes)),
        outcomes=outcomes,
    )


def test_a_models_summary_and_the_report_side_by_side():
    run = results(
        "r1",
        [
            outcome("a", "m1", "resolved", 0.02, 3),
            outcome("b", "m1", "tests_fail", 0.04, 5),
            outcome("a", "m2", "no_patch", 0.0, 2),
            outcome("b", "m2", "limit_reached", 0.1, 8),
        ],
    )
    m1 = summarize("m1", run.outcomes)
    assert (m1.resolved, m1.tasks, m1.median_steps) == (1, 2, 4)
    assert m1.cost_per_resolved == pytest.approx(0.06) and summarize("m2", run.outcomes).cost_per_resolved is None
    text = markdown(run)
    assert "| `m1` | 1/2 | 50% (" in text and "| `m2` | 0/2 | 0% (0%–" in text
    assert "| b | `m2` | limit reached | 8 |" in text


def test_compare_lists_the_tasks_that_changed_and_says_which_way(tmp_path: Path):
    before = results(
        "old", [outcome("a", "m", "resolved"), outcome("b", "m", "tests_fail"), outcome("c", "m", "no_patch")]
    )
    after = results(
        "new", [outcome("a", "m", "tests_fail"), outcome("b", "m", "resolved"), outcome("c", "m", "no_patch")]
    )
    found = changes(before, after)
    assert [(c.instance_id, c.kind, c.before, c.after) for c in found] == [
        ("a", "regressed", "resolved", "tests_fail"),
        ("b", "fixed", "tests_fail", "resolved"),
    ]
    assert "old → new: 2 task(s) changed outcome." in render(before, after, found)
    assert render(before, before, changes(before, before)) == "old → old: no task changed outcome.\n"
    # A model change: one model each, matched by position.
    other = results(
        "m2-run", [outcome("a", "m2", "resolved"), outcome("b", "m2", "tests_fail"), outcome("c", "m2", "resolved")]
    )
    assert [(c.instance_id, c.model) for c in changes(before, other)] == [("c", "m2")]


def test_compare_reads_a_run_folder_or_its_file_and_says_what_is_wrong_in_one_line(tmp_path: Path):
    run = results("r", [outcome("a", "m", "resolved")])
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text(run.model_dump_json())
    assert load_results(tmp_path / "r") == load_results(tmp_path / "r" / "results.json") == run
    with pytest.raises(UsageError, match="no eval results at"):
        load_results(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"run_id": 1}')
    with pytest.raises(UsageError, match=r"bad.json is not an eval run's results.json"):
        load_results(tmp_path / "bad.json")


def test_backtest_reads_closing_keywords_tells_tests_from_code_and_measures_the_check():
    from shopfloor.evals.backtest import closed_issues, hidden_check, is_test_file, task_id

    assert closed_issues("Fixes #12, closes: #3 and resolved #12; refs #9; fix#4; see #5") == [12, 3]
    assert closed_issues(None) == []
    assert [
        p
        for p in [
            "tests/test_a.py",
            "pkg/test_b.py",
            "pkg/b_test.py",
            "src/conftest.py",
            "test/data.json",
            "src/testing_utils.py",
            "src/contest.py",
            "latest.py",
        ]
        if is_test_file(p)
    ] == ["tests/test_a.py", "pkg/test_b.py", "pkg/b_test.py", "src/conftest.py", "test/data.json"]
    before = {"t::new": "FAILED", "t::old": "PASSED", "t::flaky": "PASSED", "t::broken": "ERROR"}
    after = {"t::new": "PASSED", "t::old": "PASSED", "t::flaky": "FAILED", "t::broken": "ERROR"}
    assert hidden_check(before, after) == (["t::new"], ["t::old"])
    assert task_id("acme/calc", 7) == "acme__calc-7"
