"""The built-in suite holds what it claims: each task's hidden FAIL_TO_PASS tests fail on its base
commit and pass with its gold fix, its PASS_TO_PASS tests pass on both, the base commit is the
same on every machine, and its repository holds that one commit only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from shopfloor.evals.pytest_summary import outcomes_of, passed
from shopfloor.evals.suites import load_suite


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True).stdout


def run_tests(work: Path, ids: list[str]) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *ids],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    return outcomes_of(done.stdout)


def test_each_builtin_task_fails_at_its_base_and_passes_with_its_gold_fix(tmp_path: Path):
    suite = load_suite("builtin", tmp_path / "one")
    again = load_suite("builtin", tmp_path / "two")
    assert [t.base_commit for t in suite.tasks] == [t.base_commit for t in again.tasks]  # reproducible
    assert len(suite.tasks) == 4
    for task in suite.tasks:
        assert task.repo_path is not None and task.patch
        commits = git(Path(task.repo_path), "rev-list", "--all").split()
        assert commits == [task.base_commit], task.instance_id  # nothing but the base to find
        work = tmp_path / "work" / task.instance_id
        git(tmp_path, "clone", "-q", task.repo_path, str(work))
        git(work, "apply", "-", stdin=task.test_patch)
        at_base = run_tests(work, [*task.fail_to_pass, *task.pass_to_pass])
        assert not any(passed(at_base, t) for t in task.fail_to_pass), (task.instance_id, at_base)
        assert all(passed(at_base, t) for t in task.pass_to_pass), (task.instance_id, at_base)
        git(work, "apply", "-", stdin=task.patch)
        fixed = run_tests(work, [*task.fail_to_pass, *task.pass_to_pass])
        assert all(passed(fixed, t) for t in [*task.fail_to_pass, *task.pass_to_pass]), (task.instance_id, fixed)
