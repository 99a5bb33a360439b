"""`shopfloor eval backtest OWNER/REPO`: eval tasks from a repository's own closed issues whose
merged fix changed tests, written as a SWE-bench-format file to review and edit before a run.

For each closed issue that a merged pull request closes: the base is the pull request's merge
base, the issue text its title and body, the hidden check the pull request's test changes, the
gold patch the rest of it. Which tests make the check is measured, not guessed: the changed test
files run at the base with the new tests (in the sandbox, as agents' commands run), then again
with the fix. Each task gets a repository of its own holding the base's history only, so no
agent finds the fix (or the tests) among git's objects. An issue that cannot make a task is
listed with the reason.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from shopfloor.activities.git_cmd import clean_env
from shopfloor.activities.git_mirror import auth_env
from shopfloor.activities.github.api import GitHubApi, call_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.sandbox import SandboxConfig, run_command
from shopfloor.errors import ShopfloorError, UsageError
from shopfloor.evals import pytest_summary
from shopfloor.evals.backtest import Skipped, closed_issues, hidden_check, is_test_file, task_id
from shopfloor.models.agent_run import CommandPolicy
from shopfloor.models.eval_task import DEFAULT_TEST_COMMAND
from shopfloor.settings import Settings

TEST_TIMEOUT_S = 600.0


class BacktestReport(BaseModel):
    tasks: list[dict[str, Any]]
    skipped: list[Skipped]
    out: str


class _History(BaseModel):
    clone_url: str
    issues: list[dict[str, Any]]  # closed issues, oldest first
    fixes: dict[int, dict[str, Any]]  # issue number -> the merged pull request that closed it
    files: dict[int, list[str]]  # pull request number -> its changed files


def _read_history(api: GitHubApi, repo: str, limit: int) -> _History:
    info = api.get(f"/repos/{repo}")
    issues = [
        i for i in api.paginate(f"/repos/{repo}/issues", state="closed", direction="asc") if "pull_request" not in i
    ][:limit]
    fixes: dict[int, dict[str, Any]] = {}
    for pr in api.paginate(f"/repos/{repo}/pulls", state="closed", direction="asc"):
        if pr.get("merged_at"):
            for number in closed_issues(f"{pr.get('title') or ''}\n{pr.get('body') or ''}"):
                fixes[number] = pr  # the last merged fix wins
    wanted = {fixes[i["number"]]["number"] for i in issues if i["number"] in fixes}
    files = {n: [f["filename"] for f in api.paginate(f"/repos/{repo}/pulls/{n}/files")] for n in sorted(wanted)}
    return _History(clone_url=info["clone_url"], issues=issues, fixes=fixes, files=files)


class _Git:
    def __init__(self, home: Path, extra: dict[str, str]) -> None:
        self.env = clean_env(home, extra)

    async def __call__(self, *args: str, cwd: Path | None = None, stdin: bytes | None = None) -> str:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=self.env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin)
        if proc.returncode != 0:
            raise ShopfloorError(f"git {args[0]} failed: {err.decode(errors='replace').strip()[:300]}")
        return out.decode(errors="replace")


async def backtest(
    settings: Settings, repo: str, out: Path, *, limit: int, progress: Callable[[str], None]
) -> BacktestReport:
    clients = GitHubClients(settings)
    try:
        history = await asyncio.to_thread(call_github, clients, repo, _read_history, repo, limit)
        token = await asyncio.to_thread(clients.git_token, repo)
    except ShopfloorError:
        raise
    except Exception as exc:  # noqa: BLE001 - GitHub's failures come mapped: one line for the operator
        raise UsageError(f"cannot read {repo}'s history from GitHub: {getattr(exc, 'message', exc)}") from None
    finally:
        clients.close()
    work = settings.data_dir / "evals" / "backtest" / repo.replace("/", "__")
    (work / "home").mkdir(parents=True, exist_ok=True)
    git = _Git(work / "home", auth_env(history.clone_url, token))
    mirror = work / "mirror.git"
    if not (mirror / "HEAD").is_file():
        await git("init", "-q", "--bare", str(mirror))
    refs = ["+refs/heads/*:refs/heads/*", "+refs/pull/*/head:refs/pull/*/head"]
    await git("--git-dir", str(mirror), "fetch", "-q", "--prune", history.clone_url, *refs)
    sandbox = SandboxConfig.from_settings(settings)
    hide = [settings.data_dir, Path.home()]
    tasks: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for issue in history.issues:
        number = issue["number"]
        pr = history.fixes.get(number)
        if pr is None:
            skipped.append(Skipped(issue=number, reason="no merged pull request closes it"))
            continue
        files = history.files.get(pr["number"], [])
        tests = [f for f in files if is_test_file(f)]
        code = [f for f in files if not is_test_file(f)]
        if not tests:
            skipped.append(Skipped(issue=number, reason=f"its fix (pull request #{pr['number']}) changed no tests"))
            continue
        if not code:
            skipped.append(Skipped(issue=number, reason=f"pull request #{pr['number']} changed only tests"))
            continue
        made = await _task(git, mirror, work, repo, issue, pr, tests, code, sandbox, hide)
        if isinstance(made, Skipped):
            skipped.append(made)
        else:
            tasks.append(made)
            progress(f"{made['instance_id']}: from #{number} and pull request #{pr['number']}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(tasks, indent=1) + "\n")
    return BacktestReport(tasks=tasks, skipped=skipped, out=str(out))


async def _task(
    git: _Git,
    mirror: Path,
    work: Path,
    repo: str,
    issue: dict[str, Any],
    pr: dict[str, Any],
    tests: list[str],
    code: list[str],
    sandbox: SandboxConfig,
    hide: list[Path],
) -> dict[str, Any] | Skipped:
    number, head = issue["number"], pr["head"]["sha"]
    gd = ("--git-dir", str(mirror))
    try:
        base = (await git(*gd, "merge-base", pr["base"]["sha"], head)).strip()
        test_patch = await git(*gd, "diff", "--no-color", "--binary", base, head, "--", *tests)
        gold = await git(*gd, "diff", "--no-color", "--binary", base, head, "--", *code)
    except ShopfloorError as exc:
        return Skipped(issue=number, reason=f"pull request #{pr['number']}'s commits are not readable: {exc}")
    runnable = [t for t in tests if t.endswith(".py") and not t.endswith("conftest.py")]
    with tempfile.TemporaryDirectory(dir=work, prefix="check-") as scratch:
        checkout = Path(scratch) / "repo"
        await git("clone", "-q", "--shared", "--no-checkout", str(mirror), str(checkout))
        await git("checkout", "-q", "--detach", base, cwd=checkout)
        await git("apply", "--whitespace=nowarn", "-", cwd=checkout, stdin=test_patch.encode())
        present = [t for t in runnable if (checkout / t).is_file()]
        if not present:
            return Skipped(issue=number, reason=f"pull request #{pr['number']} changed no Python test file that runs")
        command = f"{DEFAULT_TEST_COMMAND} -rA {' '.join(shlex.quote(t) for t in present)}"
        policy = CommandPolicy(timeout_s=TEST_TIMEOUT_S)
        before = await run_command(checkout, command, mode=sandbox, policy=policy, hide=hide)
        await git("apply", "--whitespace=nowarn", "-", cwd=checkout, stdin=gold.encode())
        after = await run_command(checkout, command, mode=sandbox, policy=policy, hide=hide)
    fail_to_pass, pass_to_pass = hidden_check(
        pytest_summary.outcomes_of(before.output), pytest_summary.outcomes_of(after.output)
    )
    if not fail_to_pass:
        return Skipped(issue=number, reason="its new tests do not go from failing to passing with the fix")
    instance = task_id(repo, number)
    task_git = work / "tasks" / f"{instance}.git"
    shutil.rmtree(task_git, ignore_errors=True)
    task_git.parent.mkdir(parents=True, exist_ok=True)
    await git("init", "-q", "--bare", "--initial-branch=main", str(task_git))
    ref = f"refs/shopfloor-backtest/{instance}"
    await git(*gd, "update-ref", ref, base)
    try:  # only the base and its ancestors: the fix and later history stay out
        await git("--git-dir", str(task_git), "fetch", "-q", "--no-tags", str(mirror), f"{ref}:refs/heads/main")
    finally:
        await git(*gd, "update-ref", "-d", ref)
    title, body = issue.get("title") or "", issue.get("body") or ""
    return {
        "instance_id": instance,
        "repo": repo,
        "base_commit": base,
        "problem_statement": f"{title}\n\n{body}".strip(),
        "test_patch": test_patch,
        "patch": gold,
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": pass_to_pass,
        "repo_path": str(task_git),
        "created_at": issue.get("created_at"),
        "pull_request": pr["number"],
    }
