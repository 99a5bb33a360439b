"""edit_file and write_file on temp-dir workspaces: results, error results, confinement."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from shopfloor.activities.tools.editing import edit_file, write_file
from shopfloor.agents.tools import EditFileArgs, WriteFileArgs
from shopfloor.errors import ToolError

pytestmark = pytest.mark.fast

APP = """\
def login(user):
    return Login(user)


def logout(user):
    return None


def logout_all(users):
    return None
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(APP)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    return root


def edit(root: Path, path: str, old: str, new: str) -> str:
    return edit_file(root, EditFileArgs(path=path, old=old, new=new))


def write(root: Path, path: str, content: str) -> str:
    return write_file(root, WriteFileArgs(path=path, content=content))


# --- edit_file ---------------------------------------------------------------------------------


def test_edit_replaces_the_unique_occurrence_and_shows_context(ws: Path) -> None:
    out = edit(ws, "src/app.py", "    return Login(user)\n", "    session = Login(user)\n    return session\n")
    assert out.startswith("edited src/app.py: replaced 1 occurrence (lines 2-3)")
    assert "     3\t    return session" in out
    assert "     1\tdef login(user):" in out
    assert (ws / "src" / "app.py").read_text() == APP.replace(
        "    return Login(user)\n", "    session = Login(user)\n    return session\n"
    )


def test_edit_can_delete_text(ws: Path) -> None:
    out = edit(ws, "src/app.py", "def logout_all(users):\n    return None\n", "")
    assert "replaced 1 occurrence (removed; at line" in out
    assert "logout_all" not in (ws / "src" / "app.py").read_text()


def test_edit_not_found(ws: Path) -> None:
    with pytest.raises(ToolError, match="was not found in src/app.py"):
        edit(ws, "src/app.py", "def signup(user):", "x")
    assert (ws / "src" / "app.py").read_text() == APP


def test_edit_not_found_hints_at_whitespace_differences(ws: Path) -> None:
    with pytest.raises(ToolError) as e:
        edit(ws, "src/app.py", "def login(user):\n  return   Login(user)", "x")
    message = str(e.value)
    assert "whitespace/indentation is ignored at line(s) 1" in message
    assert "    return Login(user)" in message  # the real text, to copy


def test_edit_not_found_hints_at_a_fragment_with_other_spacing(ws: Path) -> None:
    with pytest.raises(ToolError, match="whitespace/indentation is ignored at line\\(s\\) 2;"):
        edit(ws, "src/app.py", "return  Login(user)", "x")


def test_edit_not_found_hints_at_a_similar_line(ws: Path) -> None:
    with pytest.raises(ToolError, match="most similar line is 1: 'def login\\(user\\):'"):
        edit(ws, "src/app.py", "def logn(user):", "x")


def test_edit_several_occurrences_lists_their_lines(ws: Path) -> None:
    with pytest.raises(ToolError) as e:
        edit(ws, "src/app.py", "    return None\n", "    return 1\n")
    assert "occurs 2 times in src/app.py (at lines 6, 10)" in str(e.value)
    assert "more surrounding lines" in str(e.value)
    assert (ws / "src" / "app.py").read_text() == APP


def test_edit_overlapping_occurrences_are_not_unique(ws: Path) -> None:
    (ws / "a.txt").write_text("aaa\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        edit(ws, "a.txt", "aa", "b")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("same", "same", "the same text"), ("", "x", "use write_file")],
)
def test_edit_refuses_no_op_and_empty_old(ws: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        edit(ws, "src/app.py", old, new)


def test_edit_missing_file_and_directory(ws: Path) -> None:
    with pytest.raises(ToolError, match="does not exist; similar names in that directory: app.py"):
        edit(ws, "src/ap.py", "a", "b")
    with pytest.raises(ToolError, match="is a directory"):
        edit(ws, "src", "a", "b")


def test_edit_refuses_binary_and_non_utf8(ws: Path) -> None:
    (ws / "img.png").write_bytes(b"\x89PNG\x00\x00abc")
    with pytest.raises(ToolError, match="binary file"):
        edit(ws, "img.png", "abc", "x")
    (ws / "latin.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        edit(ws, "latin.txt", "caf", "x")


def test_edit_preserves_crlf_bom_and_mode(ws: Path) -> None:
    path = ws / "win.bat"
    path.write_bytes("\ufeff@echo off\r\necho one\r\necho two\r\n".encode())
    os.chmod(path, 0o754)
    out = edit(ws, "win.bat", "echo one\necho two\n", "echo 1\necho 2\necho 3\n")
    assert "lines 2-4" in out
    assert path.read_bytes() == "\ufeff@echo off\r\necho 1\r\necho 2\r\necho 3\r\n".encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o754


def test_edit_of_a_mixed_newline_file_is_byte_exact(ws: Path) -> None:
    path = ws / "mixed.txt"
    path.write_bytes(b"one\r\ntwo\nthree\r\n")
    edit(ws, "mixed.txt", "two\n", "2\n")
    assert path.read_bytes() == b"one\r\n2\nthree\r\n"


def test_edit_is_confined(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        edit(ws, "../outside.txt", "outside", "x")
    (ws / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        edit(ws, "link.txt", "outside", "x")
    with pytest.raises(ToolError, match="inside .git"):
        edit(ws, ".git/config", "[core]", "[core]\n\thooksPath = /tmp")
    assert (tmp_path / "outside.txt").read_text() == "outside\n"


# --- write_file --------------------------------------------------------------------------------


def test_write_creates_with_parents(ws: Path) -> None:
    out = write(ws, "pkg/sub/new.py", "x = 1\ny = 2\n")
    assert out == "wrote pkg/sub/new.py (2 lines, 12 bytes); created a new file"
    assert (ws / "pkg" / "sub" / "new.py").read_text() == "x = 1\ny = 2\n"
    assert stat.S_IMODE((ws / "pkg" / "sub" / "new.py").stat().st_mode) & 0o644 == 0o644


def test_write_overwrites_and_keeps_mode(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    os.chmod(script, 0o755)
    out = write(ws, "run.sh", "#!/bin/sh\necho new")
    assert out == "wrote run.sh (2 lines, 18 bytes); overwrote the existing file"
    assert script.read_text() == "#!/bin/sh\necho new"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []


def test_write_keeps_crlf_of_an_all_crlf_file(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"a\r\nb\r\n")
    assert "kept its CRLF line endings" in write(ws, "win.txt", "c\nd\n")
    assert (ws / "win.txt").read_bytes() == b"c\r\nd\r\n"


def test_write_empty_file(ws: Path) -> None:
    assert write(ws, "empty.txt", "") == "wrote empty.txt (0 lines, 0 bytes); created a new file"
    assert (ws / "empty.txt").read_bytes() == b""


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".git/config", "sub/.git/config", ".GIT/x"])
def test_write_refuses_git_metadata(ws: Path, path: str) -> None:
    with pytest.raises(ToolError, match="inside .git"):
        write(ws, path, "#!/bin/sh\nevil\n")
    assert not (ws / ".git" / "hooks").exists()


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/shopfloor-escape", "src/../../escape.txt"])
def test_write_refuses_escapes(ws: Path, tmp_path: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        write(ws, path, "x")
    assert not (tmp_path / "escape.txt").exists()


def test_write_refuses_through_a_symlinked_directory(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (ws / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ToolError, match="outside the workspace"):
        write(ws, "out/x.txt", "x")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_write_refuses_directories_and_file_parents(ws: Path) -> None:
    with pytest.raises(ToolError, match="existing directory"):
        write(ws, "src", "x")
    with pytest.raises(ToolError, match="workspace root"):
        write(ws, ".", "x")
    with pytest.raises(ToolError, match="a file is in the way"):
        write(ws, "src/app.py/inner.txt", "x")
    assert (ws / "src" / "app.py").read_text() == APP


def test_write_refuses_invalid_unicode(ws: Path) -> None:
    with pytest.raises(ToolError, match="not valid Unicode"):
        write(ws, "bad.txt", "a\ud800b")
    assert not (ws / "bad.txt").exists()
