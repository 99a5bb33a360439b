"""GitHub's merge button on a bare repository: merge commit, squash, or rebase.

git 2.30 cannot merge without a working tree, so each merge runs in a throw-away repository
whose only objects directory is the bare repository's own (GIT_OBJECT_DIRECTORY): nothing is
copied in or out, and the result only becomes visible when the base branch is moved with a
compare-and-swap `update-ref`. A conflict leaves the base branch where it was.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import structlog

from shopfloor.simulator.git.cmd import (
    GitError,
    MergeConflict,
    failure_message,
    identity_env,
    run_git,
)

if TYPE_CHECKING:
    from shopfloor.simulator.git.repos import BareRepo

log = structlog.get_logger(__name__)

Method = Literal["merge", "squash", "rebase"]
_PROBE_IDENTITY = ("shopfloor simulator", "simulator@shopfloor.invalid")


class _Scratch:
    """A working tree in a temp dir, reading and writing the bare repository's objects."""

    def __init__(self, repo: BareRepo, tmp: Path, identity: dict[str, str]) -> None:
        self.dir = tmp / "work"
        self.env = {"GIT_OBJECT_DIRECTORY": str(repo.path.resolve() / "objects"), **identity}
        run_git(["init", "--quiet", str(self.dir)])

    def git(self, *args: str, check: bool = True, input: bytes | None = None) -> tuple[int, str]:
        done = run_git(args, cwd=self.dir, env=self.env, check=check, input=input)
        return done.returncode, (done.stdout + done.stderr).decode(errors="replace")

    def conflicted(self) -> bool:
        _, out = self.git("ls-files", "--unmerged")
        return bool(out.strip())

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")[1].strip()


def _message(title: str, message: str) -> str:
    return f"{title}\n\n{message}" if message.strip() else title


def _combine(scratch: _Scratch, repo: BareRepo, base_sha: str, head_sha: str, method: Method, msg: str) -> str:
    """Run the merge in `scratch`; return the commit the base branch should move to."""
    if method == "rebase":
        start = repo.merge_base(base_sha, head_sha)
        if start is None:
            raise GitError(f"cannot rebase {head_sha} onto {base_sha}: no common history")
        scratch.git("checkout", "--quiet", "--detach", head_sha)
        code, out = scratch.git("rebase", "--force-rebase", "--quiet", "--onto", base_sha, start, check=False)
        if code != 0:
            if scratch.conflicted() or "CONFLICT" in out:
                raise MergeConflict(f"rebasing {head_sha[:12]} onto {base_sha[:12]} conflicts: {out.strip()[-1500:]}")
            raise GitError(f"git rebase failed (exit {code}): {out.strip()[-1500:]}")
        return scratch.head()
    scratch.git("checkout", "--quiet", "--detach", base_sha)
    if method == "merge":
        args = ["merge", "--no-ff", "--no-edit", "--no-verify", "-m", msg, head_sha]
    else:
        args = ["merge", "--squash", "--no-verify", head_sha]
    code, out = scratch.git(*args, check=False)
    if code != 0:
        if scratch.conflicted() or "CONFLICT" in out:
            raise MergeConflict(f"merging {head_sha[:12]} into {base_sha[:12]} conflicts: {out.strip()[-1500:]}")
        raise GitError(f"git {args[0]} {args[1]} failed (exit {code}): {out.strip()[-1500:]}")
    if method == "merge":
        return scratch.head()
    tree = scratch.git("write-tree")[1].strip()
    return scratch.git("commit-tree", tree, "-p", base_sha, "-F", "-", input=msg.encode())[1].strip()


def merge(
    repo: BareRepo,
    base_branch: str,
    head_sha: str,
    *,
    method: Method,
    title: str,
    message: str,
    author: tuple[str, str],
    committer: tuple[str, str] | None = None,
) -> str:
    """Merge `head_sha` into `base_branch` like GitHub's merge button; return the branch's new tip.

    merge: a merge commit with parents (base, head), message "title\\n\\nmessage".
    squash: one commit on base with head's combined change and that message.
    rebase: head's commits replayed onto base (new shas, authors kept, committer = committer).
    """
    if method not in ("merge", "squash", "rebase"):
        raise GitError(f"unknown merge method {method!r}")
    with repo.lock:
        base_sha = repo.ref_sha(base_branch)
        if base_sha is None:
            raise GitError(f"cannot merge into {base_branch}: no such branch")
        head = repo.resolve(head_sha)
        if head is None:
            raise GitError(f"cannot merge {head_sha}: no such commit")
        with tempfile.TemporaryDirectory(prefix="shopfloor-sim-merge-") as tmp:
            scratch = _Scratch(repo, Path(tmp), identity_env(author, committer))
            new_sha = _combine(scratch, repo, base_sha, head, method, _message(title, message))
        done = run_git(["update-ref", f"refs/heads/{base_branch}", new_sha, base_sha], git_dir=repo.path, check=False)
        if done.returncode != 0:
            raise GitError(failure_message(["update-ref", f"refs/heads/{base_branch}"], done))
    log.info("sim_merged", repo=repo.path.name, base=base_branch, head=head, method=method, new=new_sha)
    return new_sha


def can_merge(repo: BareRepo, base_sha: str, head_sha: str) -> bool:
    """True when merging head into base would have no conflicts (nothing is moved)."""
    base, head = repo.resolve(base_sha), repo.resolve(head_sha)
    if base is None or head is None:
        raise GitError(f"cannot test merging {head_sha} into {base_sha}: unknown revision")
    if repo.is_ancestor(base, head) or repo.is_ancestor(head, base):
        return True
    if repo.merge_base(base, head) is None:
        return False  # GitHub refuses unrelated histories too
    with tempfile.TemporaryDirectory(prefix="shopfloor-sim-probe-") as tmp:
        scratch = _Scratch(repo, Path(tmp), identity_env(_PROBE_IDENTITY))
        try:
            _combine(scratch, repo, base, head, "merge", "probe")
        except MergeConflict:
            return False
    return True


def test_merge(repo: BareRepo, base_sha: str, head_sha: str) -> str | None:
    """The merge commit of head into base that GitHub keeps as `refs/pull/<n>/merge` (a merge
    commit even when one contains the other); None when they conflict or share no history."""
    base, head = repo.resolve(base_sha), repo.resolve(head_sha)
    if base is None or head is None or repo.merge_base(base, head) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="shopfloor-sim-test-merge-") as tmp:
        scratch = _Scratch(repo, Path(tmp), identity_env(_PROBE_IDENTITY))
        try:
            return _combine(scratch, repo, base, head, "merge", f"Merge {head} into {base}")
        except MergeConflict:
            return None
