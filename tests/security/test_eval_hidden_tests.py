"""`eval run --agents factory` gives the factory a task's repository on the GitHub simulator. A
real task's source repository holds its future: the upstream fix, the tests that check it (the
eval's hidden tests), on its branch, behind tags. An agent that can read git history, or fetch
any ref of its remote, would find them (`git log --all -p`). The published repository is the base
tree alone, exported with `git archive` into a repository of one commit, so no object of the
future, and no hidden test, exists anywhere the factory's agents can read: its remote, its issue.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_runs import cli_env
from eval_runs import swe_task
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.eval_factory import EvalFactoryActivities
from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import put_json
from shopfloor.evals.suites import load_suite
from shopfloor.models.eval_run import PublishInput

HIDDEN = "from calc.ops import add\n\n\ndef test_add_hidden_marker():\n    assert add(2, 3) == 5\n"
FIXED = "def add(a, b):\n    return a + b\n"
PROBLEM = "add(2, 3) returns -1."


def git(root: Path, *args: str, check: bool = True) -> str:
    env = cli_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, check=check)
    return done.stdout.decode(errors="replace")  # trees are binary


def source_with_its_future(root: Path) -> tuple[str, str, str]:
    """The task's source: the base commit, then the upstream fix with its test on main, a branch
    and a tag. (base sha, the test patch, the fix's sha)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in {"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    return a - b\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "--all")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests").mkdir()
    (root / "tests/test_add.py").write_text(HIDDEN)
    git(root, "add", "tests/test_add.py")
    patch = git(root, "diff", "--cached", base, "--", "tests/test_add.py")
    (root / "calc/ops.py").write_text(FIXED)
    git(root, "commit", "-q", "-am", "upstream fix: add adds (closes the issue)")
    fix = git(root, "rev-parse", "HEAD").strip()
    git(root, "branch", "upstream-fix")
    git(root, "tag", "v1.0.1")
    return base, patch, fix


async def test_the_published_repository_holds_the_base_tree_and_nothing_of_the_tasks_future(
    simulator, settings, temporal_client, blobs, tmp_path
):
    repos = tmp_path / "repos"
    base, patch, fix = source_with_its_future(repos / "acme__calc")
    suite = tmp_path / "swe.json"
    task = swe_task("acme__calc-1", "acme/calc", base, patch, PROBLEM, "tests/test_add.py::test_add_hidden_marker", "")
    suite.write_text(json.dumps([task]))
    (loaded,) = load_suite(str(suite), tmp_path / "suite", repos).tasks
    assert "test_add_hidden_marker" in loaded.test_patch  # the eval holds the hidden test: the factory must not
    worker = settings.model_copy(
        update={
            "github_api_url": simulator.api_url,
            "github_token": SecretStr(BOT_TOKEN),
            "repo_models": ["openai:fake-model"],
        }
    )
    publish = PublishInput(
        task_digest=await put_json(blobs, loaded.model_dump(by_alias=True)),
        eval_run="hidden",
        model="openai:fake-model",
        max_steps=30,
        approval_timeout_s=60,
    )
    activities = EvalFactoryActivities(temporal_client, worker, blobs, Workspaces(tmp_path / "workspaces", blobs))
    published = await ActivityEnvironment().run(activities.eval_publish, publish)
    try:
        owner, name = published.repo.split("/")
        remote = simulator.data_dir / "repos" / owner / f"{name}.git"
        # What an agent's `git fetch` of any ref could bring: every ref and every object of the remote.
        refs = git(remote, "for-each-ref", "--format=%(refname)").split()
        commits = git(remote, "rev-list", "--all").split()
        objects = git(remote, "cat-file", "--batch-all-objects", "--batch")
        known = [sha for sha in (base, fix) if git(remote, "cat-file", "-t", sha, check=False).strip()]
        issue = simulator.api().get(f"/repos/{published.repo}/issues/{published.number}").json()
    finally:
        await temporal_client.get_workflow_handle(published.workflow_id).terminate("test over: no worker runs it")

    assert commits == [published.base_sha] and len(commits) == 1, commits  # one commit: no history
    assert refs == ["refs/heads/main"], refs  # no branch or tag of the source came along
    assert known == [], known  # the source's own commits, the base's and the fix's, are not there
    assert "test_add_hidden_marker" not in objects and "return a + b" not in objects
    assert "return a - b" in objects  # the base tree itself is
    assert issue["body"] == PROBLEM and "test_add" not in json.dumps(issue)
