"""Putting a run's checkout `.git` back to what shopfloor made it, before git runs there outside
the sandbox and before a command's sandbox is set up from it.

The agent's commands can write `.git`. A planted filter driver in `.git/config` (run by `git add`
on the worker), an include, a `commondir` or per-worktree config redirecting git, attributes for
every path in `info/attributes`, or alternates naming a directory the sandbox hides (it mounts the
alternates back read-only) would otherwise escape the sandbox. So the config and the alternates
are rewritten and the rest removed each time; an object store that is no longer a real directory
makes the caller re-clone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from shopfloor.activities.git_cmd import GitError

# A checkout's whole .git/config (the mirror, made by `git init --bare` without user config, is
# sha1): nothing in it names a program, a file to include or a remote.
CHECKOUT_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"


def pin_git_dir(path: Path, mirror: Path) -> None:
    """Put back what the agent's commands may have changed in the checkout's .git that git, run
    outside the sandbox, would act on: its config, its alternates (the sandbox mounts the
    directories they name back, read-only), a commondir or per-worktree config redirecting it.
    GitError when the object store itself is no longer a real directory (the caller re-clones)."""
    git_dir = path / ".git"
    for d in (git_dir, git_dir / "objects"):
        if d.is_symlink() or not d.is_dir():
            raise GitError(f"{d} is not a directory: the checkout was tampered with")
    info = git_dir / "objects" / "info"
    if info.is_symlink() or (info.exists() and not info.is_dir()):
        unlink(info)
    info.mkdir(exist_ok=True)
    unlink(git_dir / "commondir", git_dir / "config.worktree")
    # info/attributes would apply to every path, as .gitattributes files do
    git_info = git_dir / "info"
    if git_info.is_symlink() or (git_info.exists() and not git_info.is_dir()):
        unlink(git_info)
    unlink(git_info / "attributes")
    _replace_file(git_dir / "config", CHECKOUT_CONFIG)
    _replace_file(info / "alternates", f"{mirror / 'objects'}\n")


def _replace_file(target: Path, text: str) -> None:
    """Write `target` anew (a symlink there is replaced, never followed)."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, target)


def unlink(*paths: Path) -> None:
    """Remove files that may not be there (a symlink is removed, never followed)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(path)
