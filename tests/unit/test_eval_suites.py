"""Loading eval suites: SWE-bench files as SWE-bench publishes them, their repositories found on
this machine, and a clear one-line error for every way a file can be wrong; which model runs
each task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopfloor.errors import UsageError
from shopfloor.evals.models import eval_models
from shopfloor.evals.suites import Suite, load_suite
from shopfloor.models.eval_task import EvalTask

pytestmark = pytest.mark.fast

SHA = "a" * 40


def swe_row(instance_id: str = "acme__calc-1", repo: str = "acme/calc", **extra) -> dict:
    """A row as SWE-bench's dataset has it: the test lists JSON-encoded, fields shopfloor ignores."""
    return {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": SHA,
        "problem_statement": "add() subtracts",
        "test_patch": "diff --git a/tests/test_add.py b/tests/test_add.py\n",
        "patch": "diff --git a/calc/ops.py b/calc/ops.py\n",
        "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_mul"]),
        "version": "1.0",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "environment_setup_commit": SHA,
        **extra,
    }


def git_dir(path: Path) -> Path:
    (path / ".git").mkdir(parents=True)
    return path


def write(path: Path, rows: list[dict], lines: bool = False) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) if lines else json.dumps(rows))
    return path


def test_a_swe_bench_file_loads_as_published_with_its_repositories_found_under_repos(tmp_path: Path):
    repos = tmp_path / "repos"
    calc = git_dir(repos / "acme__calc")
    shop = git_dir(repos / "acme" / "shop")
    suite = load_suite(
        str(write(tmp_path / "tasks.json", [swe_row(), swe_row("acme__shop-2", "acme/shop")])), tmp_path, repos
    )
    assert suite.name == "tasks" and [t.instance_id for t in suite.tasks] == ["acme__calc-1", "acme__shop-2"]
    first = suite.tasks[0]
    assert first.fail_to_pass == ["tests/test_add.py::test_add"] and first.pass_to_pass == [
        "tests/test_ops.py::test_mul"
    ]
    assert [t.repo_path for t in suite.tasks] == [str(calc.resolve()), str(shop.resolve())]
    lines = load_suite(str(write(tmp_path / "tasks.jsonl", [swe_row()], lines=True)), tmp_path, repos)
    assert lines.tasks[0].model_dump() == first.model_dump()


def test_a_task_may_name_its_repository_relative_to_the_suite_file(tmp_path: Path):
    git_dir(tmp_path / "here")
    suite = load_suite(str(write(tmp_path / "s.json", [swe_row(repo_path="here")])), tmp_path)
    assert suite.tasks[0].repo_path == str((tmp_path / "here").resolve())


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "is not JSON or JSON lines"),
        ("[]", "holds no tasks"),
        (json.dumps([{**swe_row(), "base_commit": "main"}]), "task 1: base_commit: String should match pattern"),
        (json.dumps([{k: v for k, v in swe_row().items() if k != "test_patch"}]), "task 1: test_patch: Field required"),
        (json.dumps([swe_row(FAIL_TO_PASS="[oops")]), "task 1: FAIL_TO_PASS: Value error, not a JSON list of test ids"),
        (json.dumps([swe_row(FAIL_TO_PASS="[]")]), "task 1: FAIL_TO_PASS: List should have at least 1 item"),
        (json.dumps([swe_row(instance_id="../escape")]), "task 1: instance_id: Value error, instance_id: letters"),
        (json.dumps([swe_row(), swe_row()]), "instance ids repeat: ['acme__calc-1']"),
    ],
)
def test_every_way_a_suite_file_is_wrong_is_one_line(tmp_path: Path, content: str, said: str):
    git_dir(tmp_path / "repos" / "acme__calc")
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(UsageError) as err:
        load_suite(str(tmp_path / "bad.json"), tmp_path, tmp_path / "repos")
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_repository_that_is_not_there_is_named_with_where_it_was_looked_for(tmp_path: Path):
    path = write(tmp_path / "s.json", [swe_row()])
    with pytest.raises(UsageError, match=r"where is acme/calc\? Give --repos DIR"):
        load_suite(str(path), tmp_path)
    with pytest.raises(UsageError, match=r"no git repository for acme/calc at .*acme__calc or .*acme/calc"):
        load_suite(str(path), tmp_path, tmp_path / "repos")
    with pytest.raises(UsageError, match=r"no suite file nowhere.json"):
        load_suite("nowhere.json", tmp_path)


def _suite(tmp_path: Path, scripted: Path | None = None) -> Suite:
    task = EvalTask.model_validate(swe_row())
    return Suite(name="s", tasks=[task], scripted_dir=str(scripted) if scripted else None)


def test_models_scripted_folders_play_a_cassette_per_task_and_a_real_model_is_taken_as_is(tmp_path: Path):
    folder = tmp_path / "cassettes"
    folder.mkdir()
    (folder / "acme__calc-1.json").write_text("{}")
    suite = _suite(tmp_path, folder)
    real, scripted, builtin = eval_models(
        ["openai:gpt-4o-mini", f"scripted:{folder}", "scripted:builtin"], suite, "scripted:explore-demo"
    )
    assert (real.model, real.by_task) == ("openai:gpt-4o-mini", {})
    assert scripted.for_task("acme__calc-1") == f"scripted:{(folder / 'acme__calc-1.json').resolve()}"
    assert builtin.for_task("acme__calc-1") == scripted.for_task("acme__calc-1")  # the suite's own folder
    assert [m.label for m in eval_models([], suite, "anthropic:claude-sonnet-4-5")] == ["anthropic:claude-sonnet-4-5"]
    assert [m.label for m in eval_models([], suite, "scripted:explore-demo")] == ["scripted:builtin"]


def test_models_that_cannot_run_are_refused_in_one_line(tmp_path: Path):
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(UsageError, match=r"--model scripted:.*empty: no cassette for acme__calc-1"):
        eval_models([f"scripted:{folder}"], _suite(tmp_path), "scripted:x")
    with pytest.raises(UsageError, match=r"--model gpt-4: model 'gpt-4' is not of the form provider:model"):
        eval_models(["gpt-4"], _suite(tmp_path), "scripted:x")
    with pytest.raises(UsageError, match=r"name a model"):
        eval_models([], _suite(tmp_path), "scripted:x")
