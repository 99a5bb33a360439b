"""Confine tools to the workspace: resolve the paths a model names, and walk trees, without leaving it.

A named path is resolved the way the kernel would (symlinks at every component, then `..`), and
the result must lie inside the workspace's real root. The returned path is symlink-free, so
callers can open it with O_NOFOLLOW and notice a symlink swapped in after the check. A path to
write must not go through a symlink at all (resolve_symlink_free): the permission rules judged
the path as typed, so the written path must be that one.

Walks never descend into symlinked directories nor into `.git`; a glob pattern, matched one
component at a time, lets a walk skip directories that cannot hold a match.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from shopfloor.errors import ToolError

# Linux PATH_MAX / NAME_MAX: longer input cannot name a real file, and refusing it up front gives
# the model a clear message instead of an ENAMETOOLONG from deep inside the OS.
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
GIT_DIR = ".git"
_SHOWN_CHARS = 200


def shown(path: str) -> str:
    """A path quoted for a message: repr() escapes control characters, long input is cut."""
    if len(path) > _SHOWN_CHARS:
        return repr(path[:_SHOWN_CHARS]) + "..."
    return repr(path)


def workspace_root(root: Path) -> Path:
    """The real (symlink-free) path of the workspace root, which must be an existing directory."""
    try:
        real = Path(os.path.realpath(root, strict=True))
    except OSError as e:
        raise ToolError(f"workspace root '{root}' is not accessible: {e.strerror}") from None
    if not real.is_dir():
        raise ToolError(f"workspace root '{root}' is not a directory")
    return real


def is_inside(path: Path, real_root: Path) -> bool:
    """Whether a realpath()ed path lies in (or is) the real workspace root."""
    # realpath leaves `..` in its result only after a symlink loop; such a path is not trusted.
    return path.is_relative_to(real_root) and ".." not in path.parts


def resolve_in_workspace(root: Path, relative: str) -> Path:
    """Resolve `relative` (as a model or user wrote it) to a real path inside the workspace.

    "" and "." mean the root; an absolute path is accepted only if it lands inside the root.
    Paths that do not exist yet resolve as long as their existing part stays inside (a future
    write_file needs that). Raises ToolError for anything that leaves the workspace, whether by
    `..`, an absolute path, or a symlink at any component, and for input no file could have
    (NUL bytes, unencodable text, over-long paths).
    """
    real_root = workspace_root(root)
    if not isinstance(relative, str):
        raise ToolError(f"path must be a string, not {type(relative).__name__}")
    if "\x00" in relative:
        raise ToolError(f"path {shown(relative)} contains a NUL byte")
    try:
        encoded = os.fsencode(relative)
    except UnicodeError:
        raise ToolError(f"path {shown(relative)} is not valid text") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise ToolError(f"path is too long ({len(encoded)} bytes; at most {MAX_PATH_BYTES})")
    if any(len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")):
        raise ToolError(f"path {shown(relative)} has a component longer than {MAX_NAME_BYTES} bytes")

    # An absolute `relative` replaces the root in join(), so it is checked like any other path.
    candidate = os.path.join(real_root, relative)
    try:
        # Non-strict realpath resolves every existing component (a dangling symlink to its
        # target text) and appends the missing rest lexically, which is what we check.
        real = Path(os.path.realpath(candidate))
    except (OSError, ValueError) as e:
        raise ToolError(f"cannot resolve path {shown(relative)}: {e}") from None
    # After a symlink loop, realpath gives up and may leave later components unresolved
    # ('loop/../link' -> '<root>/link', link itself pointing outside): a second pass tells.
    if ".." in real.parts or os.path.realpath(real) != str(real):
        raise ToolError(f"path {shown(relative)} cannot be resolved (symlink loop)")
    if not is_inside(real, real_root):
        raise ToolError(f"path {shown(relative)} is outside the workspace")
    return real


def resolve_symlink_free(root: Path, relative: str) -> Path:
    """resolve_in_workspace for a write: the path must also name its file directly, through no
    symlink at any component (a symlinked directory, a symlinked or dangling file).

    The permission rules judge the path the model typed; a write through `gh/` when `gh` links
    to `.github` would land on a path they never saw. Refusing it, with the real path named,
    makes the typed path and the written one the same, so the rules judge what is written.
    """
    real = resolve_in_workspace(root, relative)
    real_root = workspace_root(root)
    lexical = Path(os.path.normpath(os.path.join(real_root, relative)))
    if real != lexical:
        where = "/".join(real.relative_to(real_root).parts) or "the workspace root"
        raise ToolError(
            f"path {shown(relative)} goes through a symbolic link and really is {shown(where)}; "
            "files are only written at their real path: name that path instead"
        )
    return real


def walk_files(
    real_root: Path,
    base: Path,
    descend: Callable[[tuple[str, ...]], bool] | None = None,
    skip: Callable[[tuple[str, ...], bool], bool] | None = None,
) -> Iterator[tuple[tuple[str, ...], Path]]:
    """(components relative to base, real path) of each regular file under base.

    Never descends into symlinked directories or `.git`; a symlinked file is yielded (under the
    link's name) only if its target is a regular file inside the workspace. `skip(parts, is_dir)`
    leaves out a file, or a directory and everything under it (the repository's ignores).
    """
    stack: list[tuple[tuple[str, ...], str]] = [((), str(base))]
    while stack:
        rel, directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            continue  # unreadable or vanished: skipped, as find and rg do
        for entry in entries:
            if entry.name == GIT_DIR:
                continue
            parts = rel + (entry.name,)
            try:
                if entry.is_symlink():
                    real = Path(os.path.realpath(entry.path))
                    if is_inside(real, real_root) and real.is_file() and not (skip and skip(parts, False)):
                        yield parts, real
                elif entry.is_dir(follow_symlinks=False):
                    if (descend is None or descend(parts)) and not (skip and skip(parts, True)):
                        stack.append((parts, entry.path))
                elif entry.is_file(follow_symlinks=False) and not (skip and skip(parts, False)):
                    yield parts, Path(entry.path)
            except OSError:
                continue


class GlobPattern:
    """A glob matched component by component, so walks can prune directories early.

    '*', '?' and '[...]' stay within one path component and match dotfiles too; a whole
    component '**' spans zero or more directories. Matching is case-sensitive.
    """

    def __init__(self, pattern: str) -> None:
        if "\x00" in pattern:
            raise ToolError(f"glob pattern {shown(pattern)} contains a NUL byte")
        if pattern.startswith("/"):
            raise ToolError(f"glob pattern {shown(pattern)} must be relative (no leading '/')")
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if not parts:
            raise ToolError(f"glob pattern {shown(pattern)} is empty")
        if ".." in parts:
            raise ToolError(f"glob pattern {shown(pattern)} must not contain '..'")
        if parts[-1] == "**":
            parts.append("*")  # 'src/**' means the files under src, not a file named src
        self.parts = parts
        self._rx = [None if p == "**" else re.compile(fnmatch.translate(p)) for p in parts]

    def _states(self, names: tuple[str, ...]) -> set[int]:
        """Pattern positions reachable after consuming `names` (an NFA over components)."""
        states = self._close({0})
        for name in names:
            step: set[int] = set()
            for i in states:
                if i < len(self.parts):
                    rx = self._rx[i]
                    if rx is None:
                        step.add(i)  # '**' swallows this component and may swallow more
                    elif rx.match(name):
                        step.add(i + 1)
            states = self._close(step)
            if not states:
                break
        return states

    def _close(self, states: set[int]) -> set[int]:
        todo, seen = list(states), set(states)
        while todo:
            i = todo.pop()
            if i < len(self.parts) and self._rx[i] is None and i + 1 not in seen:
                seen.add(i + 1)  # '**' may also match zero components
                todo.append(i + 1)
        return seen

    def matches(self, names: tuple[str, ...]) -> bool:
        return len(self.parts) in self._states(names)

    def may_match_below(self, names: tuple[str, ...]) -> bool:
        return any(i < len(self.parts) for i in self._states(names))
