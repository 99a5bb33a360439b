"""Which workspace paths the repository ignores (`.gitignore` files and `.git/info/exclude`), so
glob and grep do not walk a `.venv`, `node_modules` or build output, and list_dir says so.

Matched with `pathspec`'s git-compatible rules, read by Python: git itself is never run on the
workspace here (its configuration is the model's to write, and some of it runs commands). As in
git, each `.gitignore` speaks for its own directory and below, a deeper file's verdict wins over
a shallower one's, and nothing under an ignored directory is looked at. Files are read once per
walk, only regular files, at most MAX_IGNORE_FILE_BYTES each.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pathspec import GitIgnoreSpec

from shopfloor.activities.tools.confine import GIT_DIR

IGNORE_FILE = ".gitignore"
MAX_IGNORE_FILE_BYTES = 1024 * 1024


def _read_rules(path: Path) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return []  # absent, a link, unreadable: no rules
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        raw = os.read(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    return raw.decode("utf-8", "replace").splitlines()


class Ignores:
    """The ignore rules of one workspace, read as a walk reaches each directory."""

    def __init__(self, real_root: Path) -> None:
        self._root = real_root
        self._specs: dict[tuple[str, ...], GitIgnoreSpec | None] = {}

    def _spec(self, directory: tuple[str, ...]) -> GitIgnoreSpec | None:
        if directory not in self._specs:
            lines = _read_rules(self._root.joinpath(*directory, IGNORE_FILE))
            if not directory:
                lines = _read_rules(self._root / GIT_DIR / "info" / "exclude") + lines
            rules = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
            self._specs[directory] = GitIgnoreSpec.from_lines(rules) if rules else None
        return self._specs[directory]

    def ignored(self, parts: tuple[str, ...], is_dir: bool) -> bool:
        """Whether the path `parts` (relative to the workspace root) is ignored."""
        verdict = False
        for depth in range(len(parts)):
            spec = self._spec(parts[:depth])
            if spec is None:
                continue
            found = spec.check_file("/".join(parts[depth:]) + ("/" if is_dir else ""))
            if found.include is not None:
                verdict = found.include
        return verdict

    def under_ignored(self, parts: tuple[str, ...]) -> bool:
        """Whether `parts` (a directory) or any directory above it is ignored: named on purpose."""
        return any(self.ignored(parts[: n + 1], is_dir=True) for n in range(len(parts)))
