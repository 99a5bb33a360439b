"""Task suites: a SWE-bench-format file (a JSON list, or JSON lines) over repositories on this
machine, or the suite built into shopfloor (`builtin`).

A SWE-bench task names its repository as "owner/name"; `--repos DIR` says where the git
directories are (DIR/owner__name, as SWE-bench's harness names them, or DIR/owner/name). A task
may carry `repo_path` itself (relative to the suite file). The built-in suite's repositories
are made here, under the eval's work folder, from the package's files: one commit each, the
base, and nothing else in them, so no agent can find the hidden tests in git's objects; the
hidden tests become the task's `test_patch` in a scratch repository of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from shopfloor.errors import UsageError
from shopfloor.models.eval_task import EvalTask

BUILTIN = "builtin"
_FIXED_DATE = "2026-01-01T00:00:00Z"  # the built-in repositories' commits, so their shas never change


class Suite(BaseModel):
    name: str
    tasks: list[EvalTask]
    scripted_dir: str | None = None  # cassettes `scripted:<name>` plays per task (the built-in suite's)


def builtin_dir() -> Path:
    return Path(str(resources.files("shopfloor.evals").joinpath(BUILTIN)))


def load_suite(spec: str, work_dir: Path, repos: Path | None = None) -> Suite:
    """The suite `spec` names: `builtin`, or a path to a SWE-bench-format JSON or JSON-lines file."""
    if spec == BUILTIN:
        return _builtin_suite(work_dir / "repos")
    path = Path(spec)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"no suite file {spec} (give a SWE-bench-format JSON file, or `builtin`)") from None
    except OSError as exc:
        raise UsageError(f"cannot read {spec}: {exc.strerror}") from None
    rows = _rows(text, spec)
    tasks = []
    for i, row in enumerate(rows, 1):
        try:
            task = EvalTask.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"{spec}: task {i}: {where}: {first['msg']}") from None
        tasks.append(task.model_copy(update={"repo_path": _repo_path(task, path.parent, repos, spec)}))
    ids = [t.instance_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{spec}: instance ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return Suite(name=path.stem, tasks=tasks)


def _rows(text: str, spec: str) -> list[dict]:
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise UsageError(f"{spec} is not JSON or JSON lines: line {exc.lineno}: {exc.msg}") from None
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{spec} holds no tasks (a JSON list of SWE-bench task objects)")
    return rows


def _repo_path(task: EvalTask, suite_dir: Path, repos: Path | None, spec: str) -> str:
    if task.repo_path:
        given = Path(task.repo_path)
        found = given if given.is_absolute() else suite_dir / given
        candidates = [found]
    elif repos is not None:
        owner, _, name = task.repo.partition("/")
        candidates = [
            repos / task.repo.replace("/", "__"),
            repos / owner / name,
            repos / f"{task.repo.replace('/', '__')}.git",
        ]
    else:
        raise UsageError(f"{spec}: task {task.instance_id}: where is {task.repo}? Give --repos DIR (DIR/owner__name).")
    for c in candidates:
        if (c / ".git").exists() or (c / "HEAD").is_file():
            return str(c.resolve())
    raise UsageError(
        f"{spec}: task {task.instance_id}: no git repository for {task.repo} at {' or '.join(str(c) for c in candidates)}"
    )


# -- the built-in suite ---------------------------------------------------------------------------


def _git(cwd: Path, home: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "shopfloor eval",
        "GIT_AUTHOR_EMAIL": "eval@shopfloor.invalid",
        "GIT_COMMITTER_NAME": "shopfloor eval",
        "GIT_COMMITTER_EMAIL": "eval@shopfloor.invalid",
        "GIT_AUTHOR_DATE": _FIXED_DATE,
        "GIT_COMMITTER_DATE": _FIXED_DATE,
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed making the built-in suite: {done.stderr.strip()[:300]}")
    return done.stdout


def _builtin_suite(repos: Path) -> Suite:
    root = builtin_dir()
    tasks = []
    for folder in sorted(p for p in root.iterdir() if (p / "task.yaml").is_file()):
        meta = yaml.safe_load((folder / "task.yaml").read_text())
        base, test_patch, gold, git_dir = _materialize(folder, repos)
        made = {"instance_id": folder.name, "base_commit": base, "test_patch": test_patch, "patch": gold}
        tasks.append(EvalTask.model_validate({**meta, **made, "repo_path": git_dir}))
    return Suite(name=BUILTIN, tasks=tasks, scripted_dir=str(root / "scripted"))


def _materialize(folder: Path, repos: Path) -> tuple[str, str, str, str]:
    """(base sha, test patch, gold patch, bare repository) for a built-in task; the same sha every
    time. The gold patch (its `solution/` files) shows the hidden tests can pass; no agent sees it."""
    repos.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=repos, prefix=".make-") as scratch:
        work, home = Path(scratch) / "work", Path(scratch) / "home"
        home.mkdir()
        shutil.copytree(folder / "repo", work, ignore=shutil.ignore_patterns("__pycache__"))
        _git(work, home, "init", "-q", "-b", "main")
        _git(work, home, "add", "--all")
        _git(work, home, "commit", "-q", "-m", f"{folder.name}: the code at the bug")
        base = _git(work, home, "rev-parse", "HEAD").strip()
        git_dir = repos / f"{folder.name}.git"
        if not (git_dir / "HEAD").is_file() or _head(git_dir) != base:
            shutil.rmtree(git_dir, ignore_errors=True)
            _git(Path(scratch), home, "clone", "-q", "--bare", "--no-local", str(work), str(git_dir))
        skip = shutil.ignore_patterns("__pycache__")
        shutil.copytree(folder / "solution", work, dirs_exist_ok=True, ignore=skip)
        # Re-read every file: a copied fix can keep the size and mtime git's index remembers
        # (a fresh checkout writes both within a second), and `add` would see no change.
        _git(work, home, "rm", "-r", "-q", "--cached", ".")
        _git(work, home, "add", "--all")
        gold = _git(work, home, "diff", "--cached", "--no-color", base)
        _git(work, home, "reset", "-q", "--hard", base)
        shutil.copytree(folder / "hidden", work, dirs_exist_ok=True, ignore=skip)
        _git(work, home, "add", "--all")
        test_patch = _git(work, home, "diff", "--cached", "--no-color", base)
    return base, test_patch, gold, str(git_dir)


def _head(git_dir: Path) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()
