"""Eval suites written by tests: a local repository with hidden tests, a task of it in
SWE-bench's shape, and a fake model's answers told apart by task (and agent)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_runs import cli_env

from shopfloor.testing import ScriptTurn


def eval_env(settings) -> dict[str, str]:
    return cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
    )


def local_repo(root: Path, files: dict[str, str], hidden: dict[str, str]) -> tuple[str, str]:
    """A repository at `root` with `files` committed; (base sha, test patch adding `hidden`)."""

    def git(*args: str) -> str:
        env = cli_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
        return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True).stdout

    root.mkdir(parents=True)
    git("init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git("add", "--all")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD").strip()
    for name, text in hidden.items():
        (root / name).write_text(text)
    git("add", "--all")
    patch = git("diff", "--cached", base)
    git("reset", "-q", "--hard", base)
    return base, patch


def swe_task(instance_id: str, repo: str, base: str, patch: str, problem: str, f2p: str, p2p: str) -> dict:
    return {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": base,
        "problem_statement": problem,
        "test_patch": patch,
        "patch": "",
        "FAIL_TO_PASS": json.dumps([f2p]),
        "PASS_TO_PASS": json.dumps([p2p]),
        "version": "0.1",
        "hints_text": "",
    }


def by_task(turns: dict[str, list[ScriptTurn]]):
    """The fake model's answers: each task's script, told apart by a word of its issue."""

    def answer(index: int, body: dict) -> ScriptTurn:
        first = json.dumps(body["messages"][:2])
        (key,) = [k for k in turns if k in first]
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return turns[key][done]

    return answer
