"""Bare git repositories on disk, driven by the `git` CLI: the simulator's source of truth for code.

Refs, commits, diffs and merges all come from real git, so what an agent pushes over smart HTTP
and what the REST API reports about it cannot disagree. Diffs live in `git_diff`, merges in
`git_merge`; everything is importable from here.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Literal

import structlog

from shopfloor.simulator.git.cmd import (
    ZERO_SHA,
    CommitInfo,
    FileChange,
    GitError,
    MergeConflict,
    RefUpdate,
    identity_env,
    parse_commit,
    run_git,
)

__all__ = [
    "DEFAULT_AUTHOR",
    "ZERO_SHA",
    "BareRepo",
    "CommitInfo",
    "FileChange",
    "GitError",
    "MergeConflict",
    "RefUpdate",
]

log = structlog.get_logger(__name__)

DEFAULT_AUTHOR = ("shopfloor simulator", "simulator@shopfloor.invalid")

_locks_guard = threading.Lock()
_locks: dict[Path, threading.RLock] = {}


def repo_lock(path: Path) -> threading.RLock:
    """One lock per repository path, shared by every BareRepo object for that path."""
    key = path.resolve()
    with _locks_guard:
        return _locks.setdefault(key, threading.RLock())


class BareRepo:
    """A bare repository at `path`. Methods are thread-safe; ref moves are compare-and-swap."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = repo_lock(self.path)

    def __repr__(self) -> str:
        return f"BareRepo({str(self.path)!r})"

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        default_branch: str = "main",
        source_dir: Path | None = None,
        author: tuple[str, str] = DEFAULT_AUTHOR,
    ) -> BareRepo:
        """A new bare repository whose first commit holds every file of `source_dir`.

        The source's `.git` is skipped and its `.gitignore` files are honoured (build output
        and virtualenvs stay out); executable bits and symlinks are kept. With no source, or
        nothing in it, the first commit holds a README.md.
        """
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise GitError(f"cannot create a repository at {path}: the directory is not empty")
        path.parent.mkdir(parents=True, exist_ok=True)
        run_git(["init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(path)])
        repo = cls(path)
        run_git(["config", "receive.autogc", "false"], git_dir=path)
        with tempfile.TemporaryDirectory(prefix="shopfloor-sim-init-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **identity_env(author)}
            if source_dir is not None:
                run_git(["--work-tree", str(source_dir), "add", "--all", "."], git_dir=path, cwd=source_dir, env=env)
            listed = run_git(["ls-files", "-z"], git_dir=path, env=env).stdout
            if not listed:
                readme = f"# {path.name.removesuffix('.git')}\n".encode()
                blob = repo._hash_blob(readme)
                run_git(["update-index", "--add", "--cacheinfo", f"100644,{blob},README.md"], git_dir=path, env=env)
            tree = run_git(["write-tree"], git_dir=path, env=env).stdout.decode().strip()
            sha = run_git(["commit-tree", tree, "-m", "Initial commit"], git_dir=path, env=env).stdout.decode().strip()
        run_git(["update-ref", f"refs/heads/{default_branch}", sha, ZERO_SHA], git_dir=path)
        log.info("sim_repo_created", path=str(path), default_branch=default_branch, sha=sha)
        return repo

    def fork_to(self, path: Path) -> BareRepo:
        """A fork at `path`: a bare clone holding this repository's branches and tags (never its
        `refs/pull/*`, as on GitHub)."""
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise GitError(f"cannot fork to {path}: the directory is not empty")
        path.parent.mkdir(parents=True, exist_ok=True)
        run_git(["clone", "--quiet", "--bare", "--", str(self.path), str(path)])
        run_git(["config", "receive.autogc", "false"], git_dir=path)
        log.info("sim_repo_forked", source=str(self.path), path=str(path))
        return BareRepo(path)

    # -- refs ------------------------------------------------------------------------------

    def default_branch(self) -> str:
        done = run_git(["symbolic-ref", "--short", "HEAD"], git_dir=self.path)
        return done.stdout.decode().strip()

    def refs(self) -> dict[str, str]:
        """Every branch and tag: full ref name → object sha."""
        out = run_git(
            ["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags"], git_dir=self.path
        ).stdout.decode()
        pairs = (line.split(" ", 1) for line in out.splitlines() if line)
        return {ref: sha for sha, ref in pairs}

    def branches(self) -> dict[str, str]:
        prefix = "refs/heads/"
        return {ref[len(prefix) :]: sha for ref, sha in self.refs().items() if ref.startswith(prefix)}

    def ref_sha(self, branch: str) -> str | None:
        if not _safe_name(branch):
            return None
        done = run_git(
            ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"], git_dir=self.path, check=False
        )
        return (done.stdout.decode().strip() or None) if done.returncode == 0 else None

    def resolve(self, rev: str) -> str | None:
        """A branch, tag, or full or abbreviated sha → the full commit sha, or None."""
        if not rev or not _safe_name(rev):
            return None
        for candidate in (f"refs/heads/{rev}", f"refs/tags/{rev}", rev):
            done = run_git(
                ["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], git_dir=self.path, check=False
            )
            if done.returncode == 0:
                return done.stdout.decode().strip()
        return None

    def set_branch(self, branch: str, sha: str, *, force: bool = False, expected_old: str | None = None) -> None:
        """Point `branch` at `sha` (creating it). Without force, only a fast-forward is allowed."""
        _check_branch_name(branch)
        if not self.commit_exists(sha):
            raise GitError(f"cannot move {branch} to {sha}: no such commit")
        with self.lock:
            old = self.ref_sha(branch)
            if expected_old is not None and (old or ZERO_SHA) != expected_old:
                raise GitError(f"cannot move {branch}: it is at {old or 'nothing'}, not at {expected_old}")
            if old is not None and not force and not self.is_ancestor(old, sha):
                raise GitError(f"Update is not a fast forward: {branch} is at {old}, not an ancestor of {sha}")
            run_git(["update-ref", f"refs/heads/{branch}", sha, old or ZERO_SHA], git_dir=self.path)

    def set_pull_head(self, number: int, sha: str, source: BareRepo | None = None) -> None:
        """Point `refs/pull/<number>/head` at `sha`, fetching it from `source` (a fork) first when
        this repository lacks it: GitHub keeps every pull request's head there, forks' included."""
        if source is not None:
            self.fetch_commit(source, sha)
        if not self.commit_exists(sha):
            raise GitError(f"cannot set refs/pull/{number}/head to {sha}: no such commit")
        run_git(["update-ref", f"refs/pull/{number}/head", sha], git_dir=self.path)

    def set_test_merge(self, number: int, base_sha: str, head_sha: str) -> bool:
        """Point `refs/pull/<number>/merge` at the merge of head into base, or remove it when they
        conflict, as GitHub's mergeability job does; True when they merge cleanly."""
        from shopfloor.simulator.git.merge import test_merge

        merged = test_merge(self, base_sha, head_sha)
        if merged is None:
            run_git(["update-ref", "-d", f"refs/pull/{number}/merge"], git_dir=self.path, check=False)
            return False
        run_git(["update-ref", f"refs/pull/{number}/merge", merged], git_dir=self.path)
        return True

    def fetch_commit(self, source: BareRepo, sha: str) -> None:
        """Bring `sha` and its history over from `source` (fork and parent share a network)."""
        if not self.commit_exists(sha):
            with self.lock:
                run_git(
                    [
                        "-c",
                        "uploadpack.allowAnySHA1InWant=true",
                        "fetch",
                        "--quiet",
                        "--no-tags",
                        "--",
                        str(source.path),
                        sha,
                    ],
                    git_dir=self.path,
                )

    def delete_branch(self, branch: str) -> None:
        with self.lock:
            old = self.ref_sha(branch)
            if old is None:
                raise GitError(f"cannot delete branch {branch}: it does not exist")
            run_git(["update-ref", "-d", f"refs/heads/{branch}", old], git_dir=self.path)

    # -- commits ---------------------------------------------------------------------------

    def commit(self, sha: str) -> CommitInfo:
        full = self.resolve(sha) if _safe_name(sha) else None
        if full is None:
            raise GitError(f"no commit {sha} in {self.path.name}")
        raw = run_git(["cat-file", "commit", full], git_dir=self.path).stdout
        return parse_commit(full, raw)

    def commit_exists(self, sha: str) -> bool:
        return (
            _safe_name(sha)
            and run_git(["cat-file", "-e", f"{sha}^{{commit}}"], git_dir=self.path, check=False).returncode == 0
        )

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        done = run_git(["merge-base", "--is-ancestor", ancestor, descendant], git_dir=self.path, check=False)
        if done.returncode not in (0, 1):
            raise GitError(
                f"cannot compare {ancestor} and {descendant}: {done.stderr.decode(errors='replace').strip()}"
            )
        return done.returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        done = run_git(["merge-base", a, b], git_dir=self.path, check=False)
        return (done.stdout.decode().strip() or None) if done.returncode == 0 else None

    def commits_between(self, base: str, head: str) -> list[CommitInfo]:
        """The commits reachable from head but not from base, oldest first (`git log base..head`)."""
        shas = run_git(["rev-list", "--reverse", "--topo-order", head, f"^{base}", "--"], git_dir=self.path)
        return self._commits(shas.stdout.decode().split())

    def _commits(self, shas: list[str]) -> list[CommitInfo]:
        if not shas:
            return []
        out = run_git(["cat-file", "--batch"], git_dir=self.path, input="\n".join(shas).encode() + b"\n").stdout
        result: list[CommitInfo] = []
        pos = 0
        for sha in shas:
            header_end = out.index(b"\n", pos)
            _, kind, size = out[pos:header_end].decode().split(" ")
            if kind != "commit":
                raise GitError(f"{sha} is a {kind}, not a commit")
            start = header_end + 1
            result.append(parse_commit(sha, out[start : start + int(size)]))
            pos = start + int(size) + 1
        return result

    # -- diffs and merges (git_diff, git_merge) --------------------------------------------

    def changed_files(self, base: str, head: str) -> list[FileChange]:
        from shopfloor.simulator.git.diff import changed_files

        return changed_files(self, base, head)

    def can_merge(self, base_sha: str, head_sha: str) -> bool:
        from shopfloor.simulator.git.merge import can_merge

        return can_merge(self, base_sha, head_sha)

    def merge(
        self,
        base_branch: str,
        head_sha: str,
        *,
        method: Literal["merge", "squash", "rebase"],
        title: str,
        message: str,
        author: tuple[str, str],
        committer: tuple[str, str] | None = None,
    ) -> str:
        from shopfloor.simulator.git.merge import merge

        return merge(
            self, base_branch, head_sha, method=method, title=title, message=message, author=author, committer=committer
        )

    # -- files -----------------------------------------------------------------------------

    def _entry(self, rev: str, path: str) -> tuple[str, str, str] | None:
        """(mode, type, sha) of `path` at `rev`, or None."""
        sha = self.resolve(rev)
        path = path.strip("/")
        if sha is None or not path:
            return None
        out = run_git(["ls-tree", "-z", sha, "--", path], git_dir=self.path).stdout.decode(errors="replace")
        for record in out.split("\0"):
            meta, _, name = record.partition("\t")
            if name == path:
                mode, kind, obj = meta.split(" ")
                return mode, kind, obj
        return None

    def list_dir(self, rev: str) -> list[tuple[str, str]]:
        """(name, "blob" or "tree") of each entry at the root of `rev`, directories first."""
        out = run_git(["ls-tree", "-z", rev], git_dir=self.path).stdout.decode(errors="replace")
        entries = []
        for record in out.split("\0"):
            meta, _, name = record.partition("\t")
            if name:
                entries.append((name, meta.split(" ")[1]))
        return sorted(entries, key=lambda e: (e[1] != "tree", e[0]))

    def read_file(self, rev: str, path: str) -> bytes | None:
        entry = self._entry(rev, path)
        if entry is None or entry[1] != "blob":
            return None
        return run_git(["cat-file", "blob", entry[2]], git_dir=self.path).stdout

    def blob_sha(self, rev: str, path: str) -> str | None:
        entry = self._entry(rev, path)
        return entry[2] if entry is not None and entry[1] == "blob" else None

    def _hash_blob(self, content: bytes) -> str:
        return run_git(["hash-object", "-w", "--stdin"], git_dir=self.path, input=content).stdout.decode().strip()

    def write_file(
        self, branch: str, path: str, content: bytes, *, message: str, author: tuple[str, str]
    ) -> tuple[str, str]:
        """One new commit on `branch` (made from the default branch if absent) setting `path`.

        Returns (commit sha, blob sha). An existing file keeps its mode (an executable stays one).
        """
        _check_branch_name(branch)
        path = path.strip("/")
        if not path or any(part in ("", ".", "..", ".git") for part in path.split("/")):
            raise GitError(f"cannot write {path!r}: not a valid path in a repository")
        with self.lock:
            old = self.ref_sha(branch)
            parent = old or self.ref_sha(self.default_branch())
            if parent is None:
                raise GitError(f"cannot write to {branch}: neither it nor the default branch exists")
            blob = self._hash_blob(content)
            existing = self._entry(parent, path)
            mode = existing[0] if existing is not None and existing[0] in ("100644", "100755") else "100644"
            with tempfile.TemporaryDirectory(prefix="shopfloor-sim-write-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **identity_env(author)}
                run_git(["read-tree", parent], git_dir=self.path, env=env)
                run_git(["update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}"], git_dir=self.path, env=env)
                tree = run_git(["write-tree"], git_dir=self.path, env=env).stdout.decode().strip()
                sha = (
                    run_git(
                        ["commit-tree", tree, "-p", parent, "-F", "-"],
                        git_dir=self.path,
                        env=env,
                        input=message.encode(),
                    )
                    .stdout.decode()
                    .strip()
                )
            run_git(["update-ref", f"refs/heads/{branch}", sha, old or ZERO_SHA], git_dir=self.path)
        return sha, blob


def _safe_name(rev: str) -> bool:
    """Never let a caller's string reach git as an option or carry control characters."""
    return bool(rev) and not rev.startswith("-") and not any(c in rev for c in "\0\n\r ")


def _check_branch_name(branch: str) -> None:
    ok = _safe_name(branch) and run_git(["check-ref-format", f"refs/heads/{branch}"], check=False).returncode == 0
    if not ok:
        raise GitError(f"{branch!r} is not a valid branch name")
