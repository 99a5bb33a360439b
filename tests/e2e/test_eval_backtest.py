"""`shopfloor eval backtest` on a simulator repository: three closed issues, each fixed by a merged
pull request; one fix changed no tests and is skipped with that reason; the other two become
tasks whose hidden checks fail at the base and pass with the fix, in repositories that hold the
base's history only. The file it writes loads as a suite."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from pathlib import Path

from cli_runs import cli_env, invoke_cli
from simulator_runs import BOT_TOKEN

from shopfloor.evals.pytest_summary import outcomes_of, passed
from shopfloor.evals.suites import load_suite

OPS = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\ndef neg(a):\n    return a\n"
FIXES = [  # (issue title, file changes of its fix, whether the fix adds a test)
    (
        "add() subtracts",
        {"calc/ops.py": ("return a - b", "return a + b")},
        {"tests/test_add.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
    ),
    ("mul() adds", {"calc/ops.py": ("return a + b\n\n\ndef neg", "return a * b\n\n\ndef neg")}, {}),
    (
        "neg() does nothing",
        {"calc/ops.py": ("    return a\n", "    return -a\n")},
        {"tests/test_neg.py": "from calc.ops import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"},
    ),
]


def make_history(simulator, tmp_path: Path) -> str:
    source = tmp_path / "source"
    (source / "calc").mkdir(parents=True)
    (source / "calc" / "__init__.py").write_text("")
    (source / "calc" / "ops.py").write_text(OPS)
    (source / "tests").mkdir()
    (source / "tests" / "test_smoke.py").write_text("import calc.ops\n\n\ndef test_imports():\n    assert calc.ops\n")
    simulator.create_repo("acme", "calc", source_dir=source)
    api, repo = simulator.api(), "/repos/acme/calc"

    def ok(resp):
        assert resp.status_code < 300, resp.text
        return resp.json()

    for i, (title, changes, tests) in enumerate(FIXES, 1):
        number = ok(api.post(f"{repo}/issues", json={"title": title, "body": f"{title}: see calc/ops.py."}))["number"]
        main = ok(api.get(f"{repo}/branches/main"))["commit"]["sha"]
        ok(api.post(f"{repo}/git/refs", json={"ref": f"refs/heads/fix-{i}", "sha": main}))
        for path, (old, new) in changes.items():
            current = ok(api.get(f"{repo}/contents/{path}", params={"ref": f"fix-{i}"}))
            text = base64.b64decode(current["content"]).decode().replace(old, new)
            body = {
                "message": title,
                "content": base64.b64encode(text.encode()).decode(),
                "sha": current["sha"],
                "branch": f"fix-{i}",
            }
            ok(api.put(f"{repo}/contents/{path}", json=body))
        for path, text in tests.items():
            body = {"message": "test", "content": base64.b64encode(text.encode()).decode(), "branch": f"fix-{i}"}
            ok(api.put(f"{repo}/contents/{path}", json=body))
        pr = ok(
            api.post(
                f"{repo}/pulls",
                json={"title": f"Fix {title}", "head": f"fix-{i}", "base": "main", "body": f"Fixes #{number}"},
            )
        )
        ok(api.put(f"{repo}/pulls/{pr['number']}/merge", json={"merge_method": "merge"}))
        assert ok(api.get(f"{repo}/issues/{number}"))["state"] == "closed"
    return "acme/calc"


def run(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(list(args), cwd=cwd, input=stdin, capture_output=True, text=True, check=True).stdout


async def test_backtest_builds_tasks_from_merged_fixes_that_changed_tests_and_skips_the_rest(
    simulator, settings, tmp_path: Path
):
    repo = make_history(simulator, tmp_path)
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
        SHOPFLOOR_GITHUB_API_URL=simulator.api_url,
        SHOPFLOOR_GITHUB_TOKEN=BOT_TOKEN,
    )
    out = tmp_path / "backtest.json"
    done = await asyncio.to_thread(invoke_cli, ["eval", "backtest", repo, "--out", str(out)], env, timeout_s=300)
    assert done.returncode == 0, done
    assert "skipped #3: its fix (pull request #4) changed no tests" in done.stderr
    assert f"2 task(s) in {out}" in done.stdout
    suite = load_suite(str(out), tmp_path / "work")
    assert [(t.instance_id, t.fail_to_pass) for t in suite.tasks] == [
        ("acme__calc-1", ["tests/test_add.py::test_add"]),
        ("acme__calc-5", ["tests/test_neg.py::test_neg"]),
    ]
    assert all("tests/test_smoke.py::test_imports" not in t.fail_to_pass for t in suite.tasks)
    for task in suite.tasks:
        assert task.problem_statement.startswith(("add() subtracts", "neg() does nothing"))
        assert run(tmp_path, "git", "--git-dir", task.repo_path, "rev-list", "--all").split()[0] == task.base_commit
        assert "calc/ops.py" not in task.test_patch and "tests/" not in task.patch  # the check apart from the fix
        work = tmp_path / "check" / task.instance_id
        run(tmp_path, "git", "clone", "-q", task.repo_path, str(work))
        run(work, "git", "apply", "-", stdin=task.test_patch)
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *task.fail_to_pass]
        before = outcomes_of(subprocess.run(pytest, cwd=work, capture_output=True, text=True).stdout)
        run(work, "git", "apply", "-", stdin=task.patch)
        after = outcomes_of(subprocess.run(pytest, cwd=work, capture_output=True, text=True).stdout)
        assert not any(passed(before, t) for t in task.fail_to_pass) and all(
            passed(after, t) for t in task.fail_to_pass
        )


async def test_backtest_says_what_is_wrong_in_one_line(simulator, settings, tmp_path: Path):
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
        SHOPFLOOR_GITHUB_API_URL=simulator.api_url,
        SHOPFLOOR_GITHUB_TOKEN=BOT_TOKEN,
    )
    bad = await asyncio.to_thread(invoke_cli, ["eval", "backtest", "not a repo"], env)
    assert bad.returncode == 2 and "is not a repository: write OWNER/REPO" in bad.stderr
    missing = await asyncio.to_thread(invoke_cli, ["eval", "backtest", "acme/nothing"], env)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr, missing
    assert "acme/nothing" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1, missing
