"""Which lines of a pull request's diff a review comment may sit on, by GitHub's rule, shared by the
simulator (which enforces it) and the reviewer's activity (which keeps its comments within it).

A line comment must name a line inside one of the file's hunks, on the side it names: RIGHT, the
new file's added and context lines; LEFT, the old file's removed and context lines. A multi-line
comment's first line must lie in the same hunk. GitHub rejects a whole review (422) when one of
its comments is anywhere else, a file the pull request does not change included. The legacy
`position` counts the patch's lines below its first `@@` header, later headers included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Side = Literal["LEFT", "RIGHT"]

_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class DiffLine:
    hunk: int  # which hunk, from 0
    position: int  # lines below the patch's first header, from 1
    old: int | None  # its line in the old file (None: added)
    new: int | None  # its line in the new file (None: removed)


@dataclass
class FileDiff:
    """One file's patch, as lines a comment may name."""

    rows: list[str]  # the patch from its first hunk header on; a position indexes it
    lines: list[DiffLine] = field(default_factory=list)
    headers: list[int] = field(default_factory=list)  # each hunk's header position (0: the first)

    @classmethod
    def parse(cls, patch: str) -> FileDiff:
        rows = patch.split("\n")
        first = next((i for i, text in enumerate(rows) if _HEADER.match(text)), len(rows))
        rows = rows[first:]
        if rows and rows[-1] == "":
            rows.pop()  # the patch's final newline
        diff = cls(rows)
        old = new = 0
        for position, text in enumerate(rows):
            if header := _HEADER.match(text):
                old, new = int(header.group(1)), int(header.group(2))
                diff.headers.append(position)
                continue
            hunk = len(diff.headers) - 1
            if text.startswith("+"):
                diff.lines.append(DiffLine(hunk, position, None, new))
                new += 1
            elif text.startswith("-"):
                diff.lines.append(DiffLine(hunk, position, old, None))
                old += 1
            elif not text.startswith("\\"):  # a context line ("\ No newline at end of file" names none)
                diff.lines.append(DiffLine(hunk, position, old, new))
                old += 1
                new += 1
        return diff

    def find(self, line: int, side: Side) -> DiffLine | None:
        """The diff line a comment on `line` of `side` names, or None when it is off the diff."""
        for entry in self.lines:
            if (entry.new if side == "RIGHT" else entry.old) == line:
                return entry
        return None

    def at_position(self, position: int) -> DiffLine | None:
        return next((entry for entry in self.lines if entry.position == position), None)

    def allows(
        self, line: int, side: Side = "RIGHT", start_line: int | None = None, start_side: Side | None = None
    ) -> bool:
        """Whether GitHub takes a comment on `line` (from `start_line`, for a multi-line one)."""
        end = self.find(line, side)
        if end is None:
            return False
        if start_line is None:
            return True
        start = self.find(start_line, start_side or side)
        return start is not None and start.hunk == end.hunk and start.position <= end.position

    def hunk_up_to(self, entry: DiffLine) -> str:
        """GitHub's `diff_hunk` of a comment: its hunk's text from the header to its line."""
        return "\n".join(self.rows[self.headers[entry.hunk] : entry.position + 1])
