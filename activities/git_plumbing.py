"""Git plumbing in one bare repository (a worker's mirror): trees, commits and diffs built without
a work tree, each a function of its inputs (a retry builds the same commit).

git runs through git_cmd.GitRunner (the safe options and clean environment every worker git takes).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from shopfloor.activities.git_cmd import GIT_TIMEOUT_S, GitRunner, diff_argv


def git_date(when: datetime) -> str:
    """A fixed git date: whole seconds, UTC (a naive datetime is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return f"@{int(when.timestamp())} +0000"


class Git:
    """git in one bare repository, run by `runner`."""

    def __init__(self, git_dir: Path, runner: GitRunner) -> None:
        self.git_dir = git_dir
        self.runner = runner

    async def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float = GIT_TIMEOUT_S,
        ok: tuple[int, ...] = (0,),
    ) -> tuple[int, bytes, bytes]:
        """(exit code, stdout, stderr); GitError (stderr redacted) for a code outside `ok`."""
        return await self.runner.run(
            [f"--git-dir={self.git_dir}", *args], cwd=self.git_dir, env=env, stdin=stdin, timeout=timeout, ok=ok
        )

    async def out(
        self, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT_S
    ) -> str:
        """What `git ARGS` prints, stripped; GitError unless it exits 0."""
        return (await self.run(*args, env=env, stdin=stdin, timeout=timeout))[1].decode().strip()

    async def has_commit(self, sha: str) -> bool:
        code, _, _ = await self.run("cat-file", "-e", f"{sha}^{{commit}}", ok=(0, 1, 128))
        return code == 0

    async def tree_of(self, rev: str) -> str:
        return await self.out("rev-parse", "--verify", f"{rev}^{{tree}}")

    async def tree_with_patch(self, base: str, patch: Path, scratch: Path) -> str:
        """The tree of `base` with the patch file `patch` applied, in index space (as workspace.py
        replays it): git reads the patch, this process never holds it."""
        env = {"GIT_INDEX_FILE": str(scratch / "index")}
        await self.run("read-tree", base, env=env)
        await self.run("apply", "--cached", "--binary", "--whitespace=nowarn", str(patch), env=env)
        return await self.out("write-tree", env=env)

    async def diff_to_file(self, dest: Path, *args: str, limit: int | None = None) -> tuple[int, bool]:
        """`git diff ARGS` built as every diff a reader sees (git_cmd.diff_argv: text, no drivers,
        no attribute files), streamed into the new file `dest`: (bytes, complete)."""
        return await self.runner.to_file(
            [f"--git-dir={self.git_dir}", *diff_argv(*args)], cwd=self.git_dir, dest=dest, limit=limit
        )

    async def commit_tree(self, tree: str, parent: str, message: str, name: str, email: str, date: str) -> str:
        """A commit that is a pure function of its arguments: the same inputs, the same sha."""
        ident = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": date,
        }
        text = message.strip("\n") + "\n"
        return await self.out("commit-tree", tree, "-p", parent, "-F", "-", env=ident, stdin=text.encode())

    async def changed_paths(self, old: str, new: str) -> list[str]:
        """Every path whose entry differs between two tree-ishes: content, mode (`chmod +x`), type
        (a file become a symlink or a submodule), added or deleted. No rename detection, so a
        rename lists both its sides. Raw tree entries: no attributes or diff drivers involved."""
        raw = (
            await self.run("diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-ext-diff", "--no-textconv", old, new)
        )[1]
        # -z --raw: ":<old mode> <new mode> <old sha> <new sha> <status>\0<path>\0" per entry.
        # Read in pairs: a path may itself start with ":".
        fields = raw.split(b"\0")
        paths = {fields[i + 1].decode("utf-8", "surrogateescape") for i in range(0, len(fields) - 1, 2)}
        return sorted(paths)

    async def numstat(self, old: str, new: str) -> tuple[int, int, int]:
        """(files changed, lines added, lines deleted); binary files count as files only."""
        argv = diff_argv("--numstat", "-z", "--no-renames", old, new)
        raw = (await self.run(*argv))[1].decode("utf-8", "replace")
        files = adds = dels = 0
        for entry in raw.split("\0"):
            fields = entry.split("\t")
            if len(fields) < 3:
                continue
            files += 1
            adds += int(fields[0]) if fields[0].isdigit() else 0
            dels += int(fields[1]) if fields[1].isdigit() else 0
        return files, adds, dels
