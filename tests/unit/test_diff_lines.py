"""GitHub's rule for where a review comment may sit, on a patch as GitHub's API gives it."""

from __future__ import annotations

import pytest

from shopfloor.diff_lines import FileDiff

pytestmark = pytest.mark.fast

# Two hunks: line 2 of the old file replaced by two lines, then line 11 replaced.
PATCH = (
    "@@ -1,3 +1,4 @@\n def f():\n-    return 1\n+    return 2\n+    # two\n x = 1\n"
    "@@ -10,2 +11,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
)


def test_new_lines_and_context_take_a_right_side_comment_removed_lines_a_left_side_one():
    diff = FileDiff.parse(PATCH)
    assert [n for n in range(1, 20) if diff.allows(n, "RIGHT")] == [1, 2, 3, 4, 11, 12]
    assert [n for n in range(1, 20) if diff.allows(n, "LEFT")] == [1, 2, 3, 10, 11]


def test_a_range_must_stay_inside_one_hunk_and_run_forward():
    diff = FileDiff.parse(PATCH)
    assert diff.allows(4, "RIGHT", start_line=1)
    assert not diff.allows(12, "RIGHT", start_line=3)  # from the first hunk into the second
    assert not diff.allows(1, "RIGHT", start_line=4)  # backwards
    assert diff.allows(2, "RIGHT", start_line=2, start_side="LEFT")  # from the removed line to its replacement


def test_positions_count_from_the_first_header_through_later_ones():
    diff = FileDiff.parse(PATCH)
    first, later = diff.at_position(1), diff.at_position(7)
    assert first is not None and (first.old, first.new) == (1, 1)
    assert diff.at_position(6) is None  # the second header is a position, but names no line
    assert later is not None and (later.old, later.new) == (10, 11)
    assert diff.at_position(99) is None


def test_a_comments_diff_hunk_runs_from_its_header_to_its_line():
    diff = FileDiff.parse(PATCH)
    entry = diff.find(12, "RIGHT")
    assert entry is not None
    assert diff.hunk_up_to(entry) == "@@ -10,2 +11,2 @@\n a\n-b\n+c"


@pytest.mark.parametrize("patch", ["", "Binary files differ", "@@ not a header @@\n+x\n"])
def test_no_hunk_takes_no_comment(patch):
    diff = FileDiff.parse(patch)
    assert not any(diff.allows(n, side) for n in range(0, 5) for side in ("LEFT", "RIGHT"))
