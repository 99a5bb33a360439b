"""Simulated CI: a command run in a fresh checkout of one commit, with nothing of our environment."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from shopfloor.simulator.ci import OUTPUT_CAP, run_ci
from shopfloor.simulator.git.repos import BareRepo, GitError

CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BOB = ("Bob", "bob@example.com")


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    src = tmp_path / "src"
    src.mkdir()
    (src / "calc.py").write_text(CALC)
    (src / "test_calc.py").write_text(TESTS)
    return BareRepo.create(tmp_path / "repos" / "acme" / "calc.git", source_dir=src)


def test_passing_tests_succeed_and_the_checkout_is_removed(repo: BareRepo) -> None:
    sha = repo.ref_sha("main")
    assert sha is not None
    result = run_ci(repo, sha, "python -m pytest -q -p no:cacheprovider && pwd")
    assert result.conclusion == "success", result.output
    assert result.exit_code == 0 and "1 passed" in result.output
    assert result.command.startswith("python -m pytest") and result.duration_s > 0
    checkout = Path(result.output.strip().splitlines()[-1])
    assert checkout.name == "src" and not checkout.exists()


def test_failing_test_is_a_failure_with_its_text(repo: BareRepo) -> None:
    broken, _ = repo.write_file("pr", "calc.py", b"def add(a, b):\n    return a - b\n", message="oops", author=BOB)
    result = run_ci(repo, broken, "python -m pytest -q -p no:cacheprovider")
    assert result.conclusion == "failure" and result.exit_code == 1
    assert "test_add" in result.output and "assert -1 == 5" in result.output
    assert run_ci(repo, "main", "exit 3").exit_code == 3  # the exit status is reported as is


def test_timeout_kills_the_whole_process_group(repo: BareRepo, tmp_path: Path) -> None:
    marker = tmp_path / "survivor"
    result = run_ci(repo, "main", f"echo started; (sleep 2; touch {marker}) & sleep 30", timeout_s=0.5)
    assert result.conclusion == "timed_out" and result.exit_code is None
    assert "started" in result.output and "timed out" in result.output
    assert result.duration_s < 10
    time.sleep(2.5)
    assert not marker.exists()  # the background child died with the group


def test_environment_has_no_parent_secrets(repo: BareRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOPFLOOR_GITHUB_TOKEN", "ghs_secret_value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = run_ci(repo, "main", "env")
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert "ghs_secret_value" not in result.output and "sk-secret" not in result.output
    assert {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE"} <= names
    assert names <= {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PWD", "SHLVL", "_", "OLDPWD"}


def test_python_is_this_interpreter(repo: BareRepo) -> None:
    result = run_ci(repo, "main", "command -v python; python -c 'import sys; print(sys.prefix)'")
    first, prefix = result.output.strip().splitlines()[-2:]
    assert result.conclusion == "success"
    assert Path(first).parent == Path(sys.executable).parent
    assert prefix == sys.prefix


def test_output_is_capped_to_its_tail(repo: BareRepo) -> None:
    result = run_ci(repo, "main", "python -c \"print('x' * 200000); print('THE END')\"")
    assert len(result.output) <= OUTPUT_CAP and result.output.rstrip().endswith("THE END")
    assert "truncated" in result.output


def test_unknown_commit_raises(repo: BareRepo) -> None:
    with pytest.raises(GitError):
        run_ci(repo, "f" * 40, "true")
