"""The editing tools: edit_file and write_file on a workspace directory.

Pure synchronous functions like the read-only tools: workspace root and argument model in, the
text the model reads out; anything the model should read as an error raises ToolError. Every
path goes through resolve_symlink_free (inside the workspace, and no symlink on the way, so the
path the permission rules judged is the one written), and nothing is written inside `.git`.

Files are replaced atomically (a temp file in the same directory, renamed over the old one) and
keep their permission bits. A file whose lines all end in CRLF keeps CRLF: the model's `old`,
`new` and `content` are matched and written with "\\n" and converted. Text is UTF-8; a byte order
mark stays where it was.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import uuid
from pathlib import Path

from shopfloor.activities.tools.confine import GIT_DIR, resolve_symlink_free, shown, workspace_root
from shopfloor.activities.tools.read_only import MAX_LINE_CHARS, SNIFF_BYTES, _missing, _open_regular
from shopfloor.agents.tools import EditFileArgs, WriteFileArgs
from shopfloor.errors import ToolError

MAX_EDIT_BYTES = 10 * 1024 * 1024
CONTEXT_LINES = 3
MAX_SHOWN_LINES = 30
MAX_LISTED = 10


# --- edit_file ---------------------------------------------------------------------------------


def edit_file(root: Path, args: EditFileArgs) -> str:
    """Replace the one occurrence of `old` with `new`; zero or several occurrences are errors."""
    real_root = workspace_root(root)
    path, rel = _target(real_root, args.path)
    if args.old == "":
        raise ToolError("`old` is empty; to create a file or replace all of it, use write_file")
    if args.old == args.new:
        raise ToolError("`old` and `new` are the same text; nothing would change")
    if not os.path.lexists(path):
        raise ToolError(_missing(path, shown(args.path)))
    if path.is_dir():
        raise ToolError(f"{shown(args.path)} is a directory, not a file")
    text, crlf, mode = _read_text(path, shown(args.path))
    old, new = _lf(args.old) if crlf else args.old, _lf(args.new) if crlf else args.new

    starts = _occurrences(text, old)
    if not starts:
        raise ToolError(_not_found(text, old, rel))
    if len(starts) > 1:
        lines = [str(_line_of(text, i)) for i in starts]
        listed = ", ".join(lines[:MAX_LISTED]) + (", ..." if len(lines) > MAX_LISTED else "")
        raise ToolError(
            f"`old` occurs {len(starts)} times in {rel} (at lines {listed}); "
            "include more surrounding lines in `old` so that it matches exactly once"
        )
    i = starts[0]
    result = text[:i] + new + text[i + len(old) :]
    _write_atomic(path, _encode(result.replace("\n", "\r\n") if crlf else result), mode)

    first = _line_of(result, i)
    if new:
        last = first + new.count("\n") - (1 if new.endswith("\n") else 0)
        where = f"lines {first}-{max(first, last)}"
    else:
        last, where = first, f"removed; at line {first}"
    return f"edited {rel}: replaced 1 occurrence ({where})\n" + _context(result, first, last)


def _occurrences(text: str, old: str) -> list[int]:
    """Start offsets of `old` in `text`, overlapping ones included (they are not unique either)."""
    starts, i = [], text.find(old)
    while i != -1:
        starts.append(i)
        i = text.find(old, i + 1)
    return starts


def _not_found(text: str, old: str, rel: str) -> str:
    message = f"`old` was not found in {rel}"
    lines = text.split("\n")
    norm = [" ".join(ln.split()) for ln in lines]  # whitespace runs collapsed, ends stripped
    want = [" ".join(ln.split()) for ln in old.strip("\n").split("\n")]
    hits = [n + 1 for n in range(len(lines) - len(want) + 1) if norm[n : n + len(want)] == want]
    if not hits and len(want) == 1 and want[0]:  # a fragment of one line
        hits = [n + 1 for n, ln in enumerate(norm) if want[0] in ln]
    if hits:
        at = ", ".join(map(str, hits[:MAX_LISTED]))
        first = "\n".join(map(_clip, lines[hits[0] - 1 : hits[0] - 1 + min(len(want), MAX_SHOWN_LINES)]))
        return (
            f"{message} exactly, but it matches when whitespace/indentation is ignored at line(s) {at}; "
            f"the file has there:\n{first}\nCopy the text exactly (read_file shows it) and retry"
        )
    close = difflib.get_close_matches(want[0], norm, n=1, cutoff=0.75) if want[0] else []
    if close:
        n = norm.index(close[0]) + 1
        similar = _clip(lines[n - 1].strip())
        return f"{message}; the most similar line is {n}: {similar!r}. Use read_file to check the exact text"
    return f"{message}; use read_file or grep to see its current content"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _context(text: str, first: int, last: int) -> str:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    lo, hi = max(1, first - CONTEXT_LINES), min(len(lines), last + CONTEXT_LINES)
    numbers = list(range(lo, hi + 1))
    if len(numbers) > MAX_SHOWN_LINES:  # a long replacement: its head and tail are enough
        half = MAX_SHOWN_LINES // 2
        numbers = numbers[:half] + [0] + numbers[-half:]
    return "\n".join(f"{n:>6}\t{_clip(lines[n - 1])}" if n else "   ...\t" for n in numbers)


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else f"{line[:MAX_LINE_CHARS]} ... [line truncated: {len(line)} chars]"


# --- write_file --------------------------------------------------------------------------------


def write_file(root: Path, args: WriteFileArgs) -> str:
    """Create a file (and its parent directories) or replace all of its content."""
    real_root = workspace_root(root)
    path, rel = _target(real_root, args.path)
    name = shown(args.path)
    existed = os.path.lexists(path)
    content, mode, crlf = args.content, None, False
    if existed:
        if path.is_dir():
            raise ToolError(f"{name} is an existing directory; name a file inside it")
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{name} is not a regular file (a device, FIFO or socket)")
        mode = stat.S_IMODE(st.st_mode)
        if "\r" not in content:
            with _open_regular(path, name) as f:
                crlf = _is_crlf(f.read(MAX_EDIT_BYTES))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create {name}: a file is in the way of its parent directory") from None
    except OSError as e:
        raise ToolError(f"cannot create the directories for {name}: {e.strerror}") from None
    data = _encode(content.replace("\n", "\r\n") if crlf else content)
    _write_atomic(path, data, mode)
    n = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    if existed:
        how = "overwrote the existing file" + (", kept its CRLF line endings" if crlf else "")
    else:
        how = "created a new file"
    return f"wrote {rel} ({n} lines, {len(data)} bytes); {how}"


# --- shared ------------------------------------------------------------------------------------


def _target(real_root: Path, relative: str) -> tuple[Path, str]:
    """The resolved path and its display form; refuses the workspace root, `.git`, and paths
    through a symlink (the protected-path rules judged the path as typed)."""
    path = resolve_symlink_free(real_root, relative)
    parts = path.relative_to(real_root).parts
    if not parts:
        raise ToolError(f"{shown(relative)} is the workspace root, not a file")
    if any(p.casefold() == GIT_DIR for p in parts):
        raise ToolError(f"{shown(relative)} is inside .git; git metadata cannot be edited with this tool")
    return path, "/".join(parts)


def _read_text(path: Path, name: str) -> tuple[str, bool, int]:
    """(text with "\\n" newlines when the file is all-CRLF, whether it is, permission bits)."""
    try:
        with _open_regular(path, name) as f:
            st = os.fstat(f.fileno())
            if st.st_size > MAX_EDIT_BYTES:
                raise ToolError(f"{name} is too large to edit ({st.st_size} bytes); use write_file or run_command")
            data = f.read()
    except OSError as e:
        raise ToolError(f"cannot read {name}: {e.strerror}") from None
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ToolError(f"{name} is a binary file; edit_file only changes UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"{name} is not UTF-8 text (invalid byte at offset {e.start}); it cannot be edited") from None
    crlf = _is_crlf(data)
    return (_lf(text) if crlf else text), crlf, stat.S_IMODE(st.st_mode)


def _is_crlf(data: bytes) -> bool:
    """Whether every line break is CRLF (a mixed file is edited byte for byte instead)."""
    crlf = data.count(b"\r\n")
    return crlf > 0 and crlf == data.count(b"\n")


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate from JSON "\\ud800" is not text
        raise ToolError(f"the text is not valid Unicode (at character {e.start}); nothing was written") from None


def _write_atomic(path: Path, data: bytes, mode: int | None) -> None:
    """Write via a temp file renamed over `path`: no reader ever sees half a file."""
    tmp = path.with_name(f".{path.name[:200]}.{uuid.uuid4().hex[:8]}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)  # the umask applies, as for any new file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ToolError(f"cannot write {shown(path.name)}: {e.strerror}") from None
