"""The one git layer every worker uses: what a ref name may be (git's own rules, and stricter), the
runner's clean environment, and how commits reach a mirror when a server will not serve them by id."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from shopfloor.activities.git_cmd import GitRunner, WorkspaceError, check_ref_name, is_full_sha, is_ref_name
from shopfloor.activities.git_mirror import Mirrors
from shopfloor.activities.path_locks import PathLocks

SHA1 = "0123456789abcdef0123456789abcdef01234567"
SHA256 = "0123456789abcdef" * 4

# Every kind of name the code hands to git: a workspace's base (HEAD, a branch, a tag, a sha), the
# run's push branch, a pull request's base branch, the refs fetched by name.
USED = ["HEAD", "main", "feature", "v1.2.3", "release/2024-01", "shopfloor/issue-1", "shopfloor/pr-12-fix"]
USED += ["refs/heads/main", "refs/pull/7/head", "dependabot/npm_and_yarn/lodash-4.17.21", "ünïcode", SHA1, SHA256]
# What git refuses (git check-ref-format refs/heads/<name>), one rule each.
GIT_REFUSES = ["a..b", ".hidden", "a/.b", "x.lock", "a/x.lock/b", "a b", "a\tb", "a~1", "a^", "a:b", "a?", "a*"]
GIT_REFUSES += ["a[b", "a\\b", "a//b", "a/", "a.", "a@{1}", "a\x01b", "a\x7fb"]
# What git accepts but a worker does not: an option, invisible or Unicode-space characters.
STRICTER = ["-x", "--upload-pack=evil", "a\u00a0b", "a\u200bb", "@"]


@pytest.mark.fast
@pytest.mark.parametrize("name", USED)
def test_every_name_the_code_uses_is_accepted(name: str) -> None:
    assert is_ref_name(name)
    check_ref_name("ref", name)


@pytest.mark.fast
@pytest.mark.parametrize("name", ["", *GIT_REFUSES, *STRICTER])
def test_names_git_or_a_worker_refuses_are_refused(name: str) -> None:
    assert not is_ref_name(name)
    with pytest.raises(WorkspaceError, match="is not usable"):
        check_ref_name("ref", name)


@pytest.mark.fast
def test_a_full_sha_is_40_or_64_lowercase_hex_digits() -> None:
    assert is_full_sha(SHA1) and is_full_sha(SHA256)
    assert not any(is_full_sha(s) for s in (None, "", SHA1[:12], SHA1.upper(), SHA1 + "0", f"{SHA1}\n"))


def test_the_rule_is_git_check_ref_format_or_stricter(tmp_path: Path) -> None:
    """Compared with git itself: every name accepted here git accepts, every name git refuses is
    refused here, and the names refused only here are the ones git would take."""

    def git_accepts(name: str) -> bool:
        done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], cwd=tmp_path, capture_output=True)
        return done.returncode == 0

    for name in USED:
        assert git_accepts(name), name
    for name in GIT_REFUSES:
        assert not git_accepts(name), name
    for name in STRICTER:
        assert git_accepts(name) or name == "@", name  # git refuses a whole refname of "@" only


async def test_git_runs_without_the_hosts_config_or_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's global config (an alias, a hooks path) is not read, and a repository's own hook
    does not run: the runner's environment and options win over both."""
    fake_home = tmp_path / "host-home"
    fake_home.mkdir()
    flag = tmp_path / "hook-ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "post-checkout").write_text(f"#!/bin/sh\ntouch {flag}\n")
    (hooks / "post-checkout").chmod(0o755)
    (fake_home / ".gitconfig").write_text(f"[alias]\n\tst = status\n[core]\n\thooksPath = {hooks}\n")
    monkeypatch.setenv("HOME", str(fake_home))
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    (repo / ".git" / "hooks" / "post-checkout").write_text(f"#!/bin/sh\ntouch {flag}\n")
    (repo / ".git" / "hooks" / "post-checkout").chmod(0o755)
    runner = GitRunner(tmp_path / "worker-home")
    code, _, err = await runner.run(["st"], cwd=repo, ok=(0, 1))
    assert code == 1 and b"'st' is not a git command" in err
    await runner.run(["commit", "-q", "--allow-empty", "-m", "one"], cwd=repo)
    await runner.run(["checkout", "-q", "-b", "other"], cwd=repo)
    assert not flag.exists(), "a hook ran"


async def test_output_cut_at_its_cap_returns_while_the_event_loop_is_busy(tmp_path: Path) -> None:
    """A diff cut at its cap ends even when the worker's event loop is slow to come back to the
    pipe: what git wrote past the cap is read and dropped, or asyncio's wait() never returns
    (the pipe, paused with a full buffer, never saw its end)."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    (repo / "big.txt").write_bytes(b"a line of text\n" * 1_000_000)  # 15 MB of diff
    subprocess.run(["git", "-C", str(repo), "add", "big.txt"], check=True, capture_output=True)
    runner = GitRunner(tmp_path / "worker-home")

    async def busy_neighbour() -> None:  # another activity hogging the loop between its awaits
        while True:
            time.sleep(0.02)
            await asyncio.sleep(0)

    neighbours = [asyncio.create_task(busy_neighbour()) for _ in range(3)]
    try:
        for i in range(5):
            dest = tmp_path / f"diff-{i}"
            written, complete = await runner.to_file(
                ["diff", "--cached"], cwd=repo, dest=dest, limit=1024 * 1024, timeout=20
            )
            assert (written, complete) == (1024 * 1024, False)
            assert dest.stat().st_size == 1024 * 1024
    finally:
        for task in neighbours:
            task.cancel()
        await asyncio.gather(*neighbours, return_exceptions=True)


def _git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    return subprocess.run(
        ["git", *ident, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


async def test_a_commit_the_server_will_not_serve_by_id_comes_with_the_branches(tmp_path: Path) -> None:
    """A server that refuses a `want` for a commit no ref advertises (git's protocol v0 without
    uploadpack.allowReachableSHA1InWant): ensure_commit falls back to fetching every branch and
    tag, and a commit on none of them is a clear WorkspaceError, not a git error."""
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q")
    _git(src, "commit", "-q", "--allow-empty", "-m", "one")
    first = _git(src, "rev-parse", "HEAD")
    _git(src, "commit", "-q", "--allow-empty", "-m", "two")
    dangling = _git(src, "commit-tree", "-m", "on no branch", "HEAD^{tree}")

    runner = GitRunner(tmp_path / "home")
    mirror = await Mirrors(tmp_path / "worker", runner, PathLocks()).open(str(src))
    await mirror.run("config", "protocol.version", "0")  # the old protocol: only tips by id
    with pytest.raises(WorkspaceError, match="Server does not allow request for unadvertised object"):
        await mirror.ensure_commit(first, fallback=())
    await mirror.ensure_commit(first)  # by default: every branch and tag
    assert await mirror.has_commit(first)
    assert (await mirror.out("rev-parse", f"refs/shopfloor/base/{first}")) == first  # pinned
    with pytest.raises(WorkspaceError, match=f"commit {dangling} is not in the repository at"):
        await mirror.ensure_commit(dangling)
