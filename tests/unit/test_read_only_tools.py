"""The read-only tools on temp-dir workspaces: their output, their errors, and confinement.

The workspace holds symlinks that point outside it, at a directory holding a secret string; no
tool output (nor error) may ever contain that secret.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shopfloor.activities.tools import read_only
from shopfloor.activities.tools.confine import resolve_in_workspace
from shopfloor.activities.tools.read_only import glob, grep, list_dir, read_file
from shopfloor.agents.tools import GlobArgs, GrepArgs, ListDirArgs, ReadFileArgs
from shopfloor.errors import ToolError

SECRET = "TOPSECRET-4242"

APP = """\
import os


def login(user):
    return Login(user)


class Login:
    def __init__(self, user):
        self.user = user
"""


def build_workspace(base: Path) -> tuple[Path, Path]:
    """A workspace and an outside directory, with links from the one into the other."""
    outside = base / "outside"
    (outside / "nested").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "more.py").write_text(f"key = '{SECRET}'\n")
    (outside / "nested" / "deep.py").write_text(f"# {SECRET}\n")

    ws = base / "ws"
    (ws / "src" / "util").mkdir(parents=True)
    (ws / "README.md").write_text("hello\nworld\n")
    (ws / "src" / "app.py").write_text(APP)
    (ws / "src" / "util" / "helpers.py").write_text("def helper():\n    return 'LOGIN ok'\n")
    (ws / "src" / "data.bin").write_bytes(b"\x89PNG\x00\x00def login\x00")
    (ws / ".github" / "workflows").mkdir(parents=True)
    (ws / ".github" / "workflows" / "ci.yml").write_text("name: ci\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\ndef login_in_git = 1\n")

    (ws / "alias.py").symlink_to("src/app.py")  # inside -> inside: fine to read
    (ws / "docs").symlink_to("src")  # a directory link inside the workspace
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "leak.py").symlink_to(outside / "more.py")
    (ws / "src" / "rel_leak.py").symlink_to("../../outside/more.py")  # relative escape
    (ws / "out").symlink_to(outside)  # a directory link pointing outside
    (ws / "dangling").symlink_to(outside / "not-yet")  # where a write would land outside
    (ws / "loop").symlink_to("loop")
    return ws, outside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path)[0]


def tool_error(fn, *args) -> str:
    with pytest.raises(ToolError) as info:
        fn(*args)
    message = str(info.value)
    assert SECRET not in message
    return message


# --- resolve_in_workspace ----------------------------------------------------------------------


@pytest.mark.fast
def test_resolve_inside_paths(ws: Path) -> None:
    real = ws.resolve()
    assert resolve_in_workspace(ws, "") == real
    assert resolve_in_workspace(ws, ".") == real
    assert resolve_in_workspace(ws, "src/app.py") == real / "src" / "app.py"
    assert resolve_in_workspace(ws, "./src/../README.md") == real / "README.md"
    assert resolve_in_workspace(ws, str(real / "src")) == real / "src"  # absolute but inside
    assert resolve_in_workspace(ws, "alias.py") == real / "src" / "app.py"  # link inside: followed
    assert resolve_in_workspace(ws, "docs/app.py") == real / "src" / "app.py"
    assert resolve_in_workspace(ws, ".git/config") == real / ".git" / "config"  # reading .git is allowed


@pytest.mark.fast
def test_resolve_not_yet_existing_paths_inside(ws: Path) -> None:
    real = ws.resolve()
    assert resolve_in_workspace(ws, "src/new/deeper/file.py") == real / "src" / "new" / "deeper" / "file.py"
    assert resolve_in_workspace(ws, "docs/new.py") == real / "src" / "new.py"


@pytest.mark.fast
def test_resolve_through_symlinked_root(tmp_path: Path, ws: Path) -> None:
    (tmp_path / "root-link").symlink_to(ws)
    assert resolve_in_workspace(tmp_path / "root-link", "src/app.py") == ws.resolve() / "src" / "app.py"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../x", "path '../x' is outside the workspace"),
        ("src/../../x", "outside the workspace"),
        ("/etc/passwd", "path '/etc/passwd' is outside the workspace"),
        ("//etc/passwd", "outside the workspace"),
        ("leak.txt", "outside the workspace"),  # final component is a link out
        ("src/rel_leak.py", "outside the workspace"),  # relative link out
        ("out", "outside the workspace"),
        ("out/nested/deep.py", "outside the workspace"),  # a middle component is a link out
        ("out/new-file.py", "outside the workspace"),  # not existing yet, behind a link out
        ("dangling", "outside the workspace"),  # dangling link: its target text counts
        ("docs/../../outside/secret.txt", "outside the workspace"),
        ("loop/../../../etc/passwd", "outside the workspace"),
        ("a\x00b", "NUL byte"),
        ("x" * 5000, "too long"),
        ("y" * 300, "longer than 255 bytes"),
        ("bad\ud800", "not valid text"),
    ],
)
def test_resolve_refuses(ws: Path, path: str, expected: str) -> None:
    assert expected in tool_error(resolve_in_workspace, ws, path)


@pytest.mark.fast
def test_resolve_refuses_outside_absolute_path(tmp_path: Path, ws: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    assert "outside the workspace" in tool_error(resolve_in_workspace, ws, str(secret))
    # a sibling directory sharing the root's name as a prefix is not inside it
    (tmp_path / "ws2").mkdir()
    assert "outside the workspace" in tool_error(resolve_in_workspace, ws, str(tmp_path / "ws2"))


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("prop"))[0]


_PIECES = [
    "..",
    ".",
    "",
    "src",
    "app.py",
    "leak.txt",
    "out",
    "docs",
    "loop",
    "dangling",
    ".git",
    "alias.py",
    "nested",
    "\x00",
    "~",
    "x" * 260,
    "outside",
    "/",
]


@pytest.mark.fast
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.one_of(
        st.text(max_size=60),
        st.lists(st.sampled_from(_PIECES), max_size=8).map("/".join),
        st.lists(st.sampled_from(_PIECES), max_size=8).map(lambda ps: "/" + "/".join(ps)),
    ),
    under_root=st.booleans(),
)
def test_resolve_property_inside_or_error(shared_ws: Path, path: str, under_root: bool) -> None:
    if under_root:  # absolute paths that start at the workspace, as models often write them
        path = f"{shared_ws}/{path}"
    real_root = shared_ws.resolve()
    try:
        result = resolve_in_workspace(shared_ws, path)
    except ToolError:
        return
    assert result.is_absolute()
    assert result == real_root or result.is_relative_to(real_root)
    # resolving again (what open() does) must not lead anywhere else
    assert Path(os.path.realpath(result)).is_relative_to(real_root)


# --- read_file ---------------------------------------------------------------------------------


@pytest.mark.fast
def test_read_file_numbered(ws: Path) -> None:
    assert read_file(ws, ReadFileArgs(path="README.md")) == "     1\thello\n     2\tworld"
    assert read_file(ws, ReadFileArgs(path="alias.py", limit=1)).startswith("     1\timport os\n")


@pytest.mark.fast
def test_read_file_paging(ws: Path) -> None:
    (ws / "ten.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    page = read_file(ws, ReadFileArgs(path="ten.txt", offset=3, limit=4))
    assert page.splitlines() == [
        "     3\tline 3",
        "     4\tline 4",
        "     5\tline 5",
        "     6\tline 6",
        "... 4 more lines; call read_file with offset=7",
    ]
    last = read_file(ws, ReadFileArgs(path="ten.txt", offset=7, limit=4))
    assert last.splitlines()[-1] == "    10\tline 10"  # exactly the rest: no note
    assert "more lines" not in last
    assert "offset 11 is past the end" in tool_error(read_file, ws, ReadFileArgs(path="ten.txt", offset=11))


@pytest.mark.fast
def test_read_file_counts_last_line_without_newline_and_crlf(ws: Path) -> None:
    (ws / "crlf.txt").write_bytes(b"a\r\nb\r\nc\r\nd")
    out = read_file(ws, ReadFileArgs(path="crlf.txt", limit=1))
    assert out == "     1\ta\n... 3 more lines; call read_file with offset=2"


@pytest.mark.fast
def test_read_file_empty_and_long_lines(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    assert "empty" in read_file(ws, ReadFileArgs(path="empty.txt"))
    (ws / "min.js").write_text("x" * 5000 + "\nshort\n")
    first, second = read_file(ws, ReadFileArgs(path="min.js")).splitlines()
    assert first == "     1\t" + "x" * 2000 + " ... [line truncated: 5000 chars]"
    assert second == "     2\tshort"


@pytest.mark.fast
def test_read_file_errors_say_what_to_do(ws: Path) -> None:
    assert "directory" in (m := tool_error(read_file, ws, ReadFileArgs(path="src"))) and "list_dir" in m
    missing = tool_error(read_file, ws, ReadFileArgs(path="src/ap.py"))
    assert "does not exist" in missing and "app.py" in missing  # a near miss is suggested
    assert "binary" in tool_error(read_file, ws, ReadFileArgs(path="src/data.bin"))
    (ws / "gbk.txt").write_bytes("中文注释很多很多很多".encode("gbk"))
    assert "not UTF-8" in tool_error(read_file, ws, ReadFileArgs(path="gbk.txt"))
    os.mkfifo(ws / "fifo")  # must be refused, not block forever
    assert "not a regular file" in tool_error(read_file, ws, ReadFileArgs(path="fifo"))


@pytest.mark.fast
def test_symlink_loop_is_an_error_not_a_crash(ws: Path) -> None:
    assert "symbolic links" in tool_error(read_file, ws, ReadFileArgs(path="loop"))
    assert "does not exist" in tool_error(read_file, ws, ReadFileArgs(path="loop/x"))
    assert "outside the workspace" in tool_error(list_dir, ws, ListDirArgs(path="loop/../.."))


@pytest.mark.fast
def test_read_file_replaces_stray_bytes(ws: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9 au lait, mostly ascii text here\n")
    assert read_file(ws, ReadFileArgs(path="latin.txt")) == "     1\tcaf\ufffd au lait, mostly ascii text here"


@pytest.mark.fast
@pytest.mark.parametrize("path", ["leak.txt", "leak.py", "src/rel_leak.py", "out/secret.txt", "../outside/secret.txt"])
def test_read_file_never_reads_outside(ws: Path, path: str) -> None:
    assert "outside the workspace" in tool_error(read_file, ws, ReadFileArgs(path=path))


@pytest.mark.fast
def test_read_file_refuses_a_symlink_swapped_in_after_the_check(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = ws.resolve() / "README.md"
    monkeypatch.setattr(read_only, "resolve_in_workspace", lambda root, rel: real)
    real.unlink()
    real.symlink_to(ws.parent / "outside" / "secret.txt")  # the race: a link appears at the checked path
    assert "cannot read" in tool_error(read_file, ws, ReadFileArgs(path="README.md"))


# --- list_dir ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_list_dir_root(ws: Path) -> None:
    outside = ws.parent / "outside"
    assert list_dir(ws, ListDirArgs()).splitlines() == [
        ".git/ (git metadata)",
        ".github/",
        "README.md",
        "alias.py -> src/app.py",
        "dangling -> " + str(outside / "not-yet") + " (outside the workspace)",
        "docs -> src/",
        "leak.py -> " + str(outside / "more.py") + " (outside the workspace)",
        "leak.txt -> " + str(outside / "secret.txt") + " (outside the workspace)",
        "loop -> loop (broken)",
        "out -> " + str(outside) + " (outside the workspace)",
        "src/",
    ]


@pytest.mark.fast
def test_list_dir_subdirectories(ws: Path) -> None:
    assert list_dir(ws, ListDirArgs(path="src")).splitlines() == [
        "app.py",
        "data.bin",
        "rel_leak.py -> ../../outside/more.py (outside the workspace)",
        "util/",
    ]
    assert list_dir(ws, ListDirArgs(path="docs/util")) == "helpers.py"  # through a link inside
    assert list_dir(ws, ListDirArgs(path=".git")) == "config"  # explicit .git is allowed
    (ws / "hollow").mkdir()
    assert "empty directory" in list_dir(ws, ListDirArgs(path="hollow"))


@pytest.mark.fast
def test_list_dir_errors(ws: Path) -> None:
    assert "read_file" in tool_error(list_dir, ws, ListDirArgs(path="README.md"))
    assert "does not exist" in tool_error(list_dir, ws, ListDirArgs(path="nope"))
    for path in ("out", "out/nested", "..", "/tmp"):
        assert "outside the workspace" in tool_error(list_dir, ws, ListDirArgs(path=path))


@pytest.mark.fast
def test_list_dir_cap_and_odd_names(ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(read_only.MAX_DIR_ENTRIES + 5):
        (many / f"f{i:05}").touch()
    lines = list_dir(ws, ListDirArgs(path="many")).splitlines()
    assert len(lines) == read_only.MAX_DIR_ENTRIES + 1
    assert lines[0] == "f00000" and lines[-1] == "... 5 more entries not shown; use glob to narrow"

    odd = ws / "odd"
    odd.mkdir()
    (odd / os.fsdecode(b"bad\xff.txt")).touch()
    (odd / "two\nlines").touch()
    out = list_dir(ws, ListDirArgs(path="odd"))
    out.encode("utf-8")  # the activity stores output as UTF-8: no lone surrogates may remain
    assert out.splitlines() == ["'bad\\udcff.txt'", "'two\\nlines'"]


# --- glob --------------------------------------------------------------------------------------


@pytest.mark.fast
def test_glob_recursive_skips_git_and_links_out(ws: Path) -> None:
    assert glob(ws, GlobArgs(pattern="**/*.py")).splitlines() == [
        "alias.py",  # a link to a file inside the workspace counts as a file
        "src/app.py",
        "src/util/helpers.py",
    ]
    everything = glob(ws, GlobArgs(pattern="**")).splitlines()
    assert everything == [
        ".github/workflows/ci.yml",
        "README.md",
        "alias.py",
        "src/app.py",
        "src/data.bin",
        "src/util/helpers.py",
    ]


@pytest.mark.fast
def test_glob_forms(ws: Path) -> None:
    assert glob(ws, GlobArgs(pattern="*.py")) == "alias.py"  # '*' stays in one directory
    assert glob(ws, GlobArgs(pattern="src/**")).splitlines() == ["src/app.py", "src/data.bin", "src/util/helpers.py"]
    assert glob(ws, GlobArgs(pattern="src/*/*.py")) == "src/util/helpers.py"
    assert glob(ws, GlobArgs(pattern="**/util/**/*.py")) == "src/util/helpers.py"
    assert glob(ws, GlobArgs(pattern="*.py", path="src")) == "src/app.py"  # paths stay root-relative
    assert glob(ws, GlobArgs(pattern="**/*.yml")) == ".github/workflows/ci.yml"  # dotdirs match
    assert glob(ws, GlobArgs(pattern="src/[a-d]*.*")) == "src/app.py\nsrc/data.bin"
    none = glob(ws, GlobArgs(pattern="*.rs"))
    assert none == "no files match '*.rs' in '.'; '*' does not cross directories, try '**/*.rs'"


@pytest.mark.fast
def test_glob_errors(ws: Path) -> None:
    assert "must not contain '..'" in tool_error(glob, ws, GlobArgs(pattern="../outside/*"))
    assert "must be relative" in tool_error(glob, ws, GlobArgs(pattern="/etc/*"))
    assert "outside the workspace" in tool_error(glob, ws, GlobArgs(pattern="*", path="out"))
    assert "is a file" in tool_error(glob, ws, GlobArgs(pattern="*", path="README.md"))


@pytest.mark.fast
def test_glob_cap(ws: Path) -> None:
    gen = ws / "gen"
    gen.mkdir()
    for i in range(read_only.MAX_GLOB_RESULTS + 3):
        (gen / f"m{i:05}.txt").touch()
    lines = glob(ws, GlobArgs(pattern="gen/*.txt")).splitlines()
    assert len(lines) == read_only.MAX_GLOB_RESULTS + 1
    assert lines[0] == "gen/m00000.txt"
    assert lines[-1] == "... 3 more files not shown; narrow the pattern or path"


# --- grep --------------------------------------------------------------------------------------


def test_grep_output_sorted_by_path_then_line(ws: Path) -> None:
    # data.bin (binary) and .git/config also contain "def login": neither is searched
    assert grep(ws, GrepArgs(pattern=r"def \w+")).splitlines() == [
        "alias.py:4: def login(user):",
        "alias.py:9:     def __init__(self, user):",
        "src/app.py:4: def login(user):",
        "src/app.py:9:     def __init__(self, user):",
        "src/util/helpers.py:1: def helper():",
    ]


def test_grep_line_numbers_agree_with_read_file(ws: Path) -> None:
    hit = grep(ws, GrepArgs(pattern="^class", path="src/app.py"))
    assert hit == "src/app.py:8: class Login:"
    assert read_file(ws, ReadFileArgs(path="src/app.py", offset=8, limit=1)).startswith("     8\tclass Login:")


def test_grep_ignore_case_and_glob_filter(ws: Path) -> None:
    assert grep(ws, GrepArgs(pattern="login", glob="*.py", path="src")).splitlines() == [
        "src/app.py:4: def login(user):"
    ]
    assert grep(ws, GrepArgs(pattern="login", ignore_case=True, path="src")).splitlines() == [
        "src/app.py:4: def login(user):",
        "src/app.py:5:     return Login(user)",
        "src/app.py:8: class Login:",
        "src/util/helpers.py:2:     return 'LOGIN ok'",
    ]
    # a glob with '/' is matched against the path, relative to `path` or to the root
    assert grep(ws, GrepArgs(pattern="login", ignore_case=True, glob="util/*.py", path="src")) == (
        "src/util/helpers.py:2:     return 'LOGIN ok'"
    )
    assert grep(ws, GrepArgs(pattern="login", ignore_case=True, glob="src/util/*")) == (
        "src/util/helpers.py:2:     return 'LOGIN ok'"
    )
    assert grep(ws, GrepArgs(pattern="login", glob="*.md")) == "no matches for 'login' in '.' (files matching '*.md')"


@pytest.mark.fast
def test_grep_errors(ws: Path) -> None:
    message = tool_error(grep, ws, GrepArgs(pattern="def (login"))
    assert message.startswith("invalid regular expression 'def (login': missing ), unterminated subpattern")
    assert "binary" in tool_error(grep, ws, GrepArgs(pattern="x", path="src/data.bin"))
    assert "does not exist" in tool_error(grep, ws, GrepArgs(pattern="x", path="nope"))
    assert "must not contain '..'" in tool_error(grep, ws, GrepArgs(pattern="x", glob="../*"))


def test_grep_caps_and_skips_large_files(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 30)
    out = grep(ws, GrepArgs(pattern="^hit$", path="many.txt", max_matches=5)).splitlines()
    assert out[:5] == [f"many.txt:{n}: hit" for n in range(1, 6)]
    assert out[5] == "... 25 more matches not shown (max_matches=5); narrow the pattern, path or glob"
    (ws / "big.log").write_text("needle\n" + "x" * read_only.GREP_MAX_FILE_BYTES)
    out = grep(ws, GrepArgs(pattern="needle")).splitlines()
    assert out == [
        "no matches for 'needle' in '.'",
        "note: 1 file(s) over 2 MB were not searched; page them with read_file",
    ]
    assert "too large" in tool_error(grep, ws, GrepArgs(pattern="needle", path="big.log"))
    (ws / "a.js").write_text("x" * 900)
    long = grep(ws, GrepArgs(pattern="x", glob="*.js"))
    assert long == "a.js:1: " + "x" * 500 + " ... [line truncated: 900 chars]"


def test_grep_never_reads_outside(ws: Path) -> None:
    assert grep(ws, GrepArgs(pattern="TOPSECRET")) == "no matches for 'TOPSECRET' in '.'"
    assert "outside the workspace" in tool_error(grep, ws, GrepArgs(pattern="x", path="out"))
    assert "outside the workspace" in tool_error(grep, ws, GrepArgs(pattern="x", path="leak.txt"))


# --- the secret never shows ----------------------------------------------------------------------


def test_secret_never_appears_in_any_output(ws: Path) -> None:
    calls = (
        [(list_dir, ListDirArgs(path=p)) for p in (".", "src", "docs", "out", "..", "leak.txt")]
        + [
            (read_file, ReadFileArgs(path=p))
            for p in ("leak.txt", "leak.py", "out/secret.txt", "src/rel_leak.py", "dangling")
        ]
        + [(glob, GlobArgs(pattern=p)) for p in ("**", "**/*", "*", "out/**", "**/secret*", "**/*.py")]
        + [
            (grep, GrepArgs(pattern=p, path=q))
            for p in (".", "TOPSECRET", "(?i)topsecret")
            for q in (".", "src", "docs")
        ]
    )
    seen = 0
    for fn, args in calls:
        try:
            out = fn(ws, args)
        except ToolError as e:
            out = str(e)
        assert SECRET not in out, (fn.__name__, args)
        seen += 1
    assert seen == len(calls)


# --- the repository's ignores ------------------------------------------------------------------


def ignoring_workspace(base: Path) -> Path:
    """A checkout with a `.venv` inside it (as the quickstart makes one), build output, logs,
    and a nested `.gitignore` that re-includes one log and ignores a generated file."""
    ws = base / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def login():\n    return 'LOGIN'\n")
    (ws / ".gitignore").write_text("# local\n.venv/\nbuild\n*.log\n")
    (ws / ".venv" / "lib" / "site").mkdir(parents=True)
    (ws / ".venv" / "lib" / "site" / "dep.py").write_text("def login():\n    return 'vendored LOGIN'\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.py").write_text("LOGIN = 1\n")
    (ws / "debug.log").write_text("LOGIN failed\n")
    (ws / "logs").mkdir()
    (ws / "logs" / ".gitignore").write_text("!keep.log\ngenerated.py\n")
    (ws / "logs" / "keep.log").write_text("LOGIN kept\n")
    (ws / "logs" / "other.log").write_text("LOGIN other\n")
    (ws / "logs" / "generated.py").write_text("LOGIN generated\n")
    (ws / ".git" / "info").mkdir(parents=True)
    (ws / ".git" / "info" / "exclude").write_text("scratch.py\n")
    (ws / "scratch.py").write_text("LOGIN scratch\n")
    return ws


def test_glob_and_grep_leave_out_what_the_repository_ignores(tmp_path: Path) -> None:
    ws = ignoring_workspace(tmp_path)
    found = glob(ws, GlobArgs(pattern="**/*.py", path=".")).splitlines()
    assert found == ["src/app.py"]
    logs = glob(ws, GlobArgs(pattern="**/*.log", path=".")).splitlines()
    assert logs == ["logs/keep.log"]  # re-included by the nested .gitignore, deeper wins
    hits = grep(ws, GrepArgs(pattern="LOGIN", path=".")).splitlines()
    assert hits == ["logs/keep.log:1: LOGIN kept", "src/app.py:2:     return 'LOGIN'"]
    none = glob(ws, GlobArgs(pattern="**/dep.py", path="."))
    assert none.startswith("no files match") and "ignored by .gitignore were not searched" in none


def test_an_ignored_directory_named_on_purpose_is_searched(tmp_path: Path) -> None:
    ws = ignoring_workspace(tmp_path)
    assert glob(ws, GlobArgs(pattern="**/*.py", path=".venv")).splitlines() == [".venv/lib/site/dep.py"]
    assert grep(ws, GrepArgs(pattern="vendored", path=".venv")).splitlines() == [
        ".venv/lib/site/dep.py:2:     return 'vendored LOGIN'"
    ]
    assert "vendored" in read_file(ws, ReadFileArgs(path=".venv/lib/site/dep.py"))


def test_list_dir_marks_what_the_repository_ignores(tmp_path: Path) -> None:
    ws = ignoring_workspace(tmp_path)
    listed = list_dir(ws, ListDirArgs(path=".")).splitlines()
    assert ".venv/ (ignored by .gitignore)" in listed and "build/ (ignored by .gitignore)" in listed
    assert "debug.log (ignored by .gitignore)" in listed and "scratch.py (ignored by .gitignore)" in listed
    assert "src/" in listed and ".gitignore" in listed and ".git/ (git metadata)" in listed
    assert list_dir(ws, ListDirArgs(path="logs")).splitlines() == [
        ".gitignore",
        "generated.py (ignored by .gitignore)",
        "keep.log",
        "other.log (ignored by .gitignore)",
    ]
    assert list_dir(ws, ListDirArgs(path=".venv")).splitlines() == ["lib/"]  # named on purpose: no marks


def test_an_ignore_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    ws = ignoring_workspace(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.write_text("src/\n")
    (ws / "src" / ".gitignore").symlink_to(outside)  # would hide src/app.py if followed
    assert "src/app.py" in glob(ws, GlobArgs(pattern="**/*.py", path="."))
