"""A pull request's files the way GitHub lists them: the diff from the merge base to the head,
one entry per file with its status, line counts and unified patch (hunks only, no headers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from shopfloor.simulator.git.cmd import EMPTY_TREE_SHA, FileChange, GitError, run_git

if TYPE_CHECKING:
    from shopfloor.simulator.git.repos import BareRepo

_DIFF_OPTS = ("--no-color", "--no-ext-diff", "--no-textconv", "-M", "--full-index")
_STATUS: dict[str, Literal["added", "removed", "modified", "renamed"]] = {
    "A": "added",
    "D": "removed",
    "M": "modified",
    "T": "modified",
    "R": "renamed",
}


def changed_files(repo: BareRepo, base: str, head: str) -> list[FileChange]:
    """Files changed on `head` since it forked from `base` (GitHub's three-dot compare)."""
    head_sha = repo.resolve(head)
    base_sha = repo.resolve(base)
    if head_sha is None or base_sha is None:
        raise GitError(f"cannot compare {base}...{head}: unknown revision")
    start = repo.merge_base(base_sha, head_sha) or EMPTY_TREE_SHA  # unrelated histories: everything
    raw = run_git(["diff", "--raw", "-z", "--no-abbrev", *_DIFF_OPTS, start, head_sha, "--"], git_dir=repo.path)
    entries = _parse_raw(raw.stdout.decode(errors="replace"))
    patch = run_git(["diff", "--patch", *_DIFF_OPTS, start, head_sha, "--"], git_dir=repo.path)
    chunks = _split_patch(patch.stdout.decode(errors="replace"))
    if len(chunks) != len(entries):  # both come from the same diff queue, in the same order
        raise GitError(f"cannot list files of {base}...{head}: {len(entries)} entries but {len(chunks)} patches")
    return [_change(entry, chunk) for entry, chunk in zip(entries, chunks, strict=True)]


def _parse_raw(out: str) -> list[tuple[str, str, str, str | None]]:
    """`git diff --raw -z` → [(status letter, new blob sha, path, previous path)]."""
    fields = out.split("\0")
    result: list[tuple[str, str, str, str | None]] = []
    i = 0
    while i < len(fields) and fields[i].startswith(":"):
        meta = fields[i][1:].split(" ")
        new_sha, letter = meta[3], meta[4][0]
        if letter in ("R", "C"):
            result.append((letter, new_sha, fields[i + 2], fields[i + 1]))
            i += 3
        else:
            result.append((letter, new_sha, fields[i + 1], None))
            i += 2
    return result


def _split_patch(text: str) -> list[str]:
    """A multi-file patch cut at each `diff --git` line (hunk lines never start that way)."""
    chunks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            chunks.append([])
        if chunks:
            chunks[-1].append(line)
    return ["".join(chunk) for chunk in chunks]


def _change(entry: tuple[str, str, str, str | None], chunk: str) -> FileChange:
    letter, new_sha, path, previous = entry
    lines = chunk.splitlines(keepends=True)
    first_hunk = next((i for i, line in enumerate(lines) if line.startswith("@@")), None)
    patch = "".join(lines[first_hunk:]).rstrip("\n") if first_hunk is not None else None
    additions = deletions = 0
    for line in lines[first_hunk:] if first_hunk is not None else ():
        if line.startswith("+"):
            additions += 1
        elif line.startswith("-"):
            deletions += 1
    status = _STATUS.get(letter, "modified")
    return FileChange(
        filename=path,
        status=status,
        additions=additions,
        deletions=deletions,
        changes=additions + deletions,
        patch=patch,
        previous_filename=previous if status == "renamed" else None,
        blob_sha=None if status == "removed" else new_sha,
    )
