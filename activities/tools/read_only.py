"""The read-only tools: read_file, list_dir, glob and grep over a workspace directory.

Synchronous functions (run in a thread; grep runs ripgrep in a child process): workspace root and
argument model in, the text the model reads out.
Anything the model should read as an error raises ToolError. Nothing here reads through a path
that leaves the workspace: named paths go through resolve_in_workspace, tree walks never descend
into symlinked directories and skip symlinked files whose target lies outside.

`.git` is walked by neither glob nor grep (it is metadata, and huge); list_dir shows it as
".git/ (git metadata)" so the model knows the checkout is a git repository; naming a path inside
`.git` explicitly is allowed. Paths the repository ignores (gitignore.py: a `.venv`, build
output) are not walked either, and list_dir marks them; a path inside one, named as the place to
search, is searched.

Lines are split on "\\n" only (a trailing "\\r" is dropped), so read_file and grep agree on line
numbers with each other and with git and editors.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import structlog

from shopfloor.activities.tools.confine import (
    GIT_DIR,
    GlobPattern,
    is_inside,
    resolve_in_workspace,
    shown,
    walk_files,
    workspace_root,
)
from shopfloor.activities.tools.gitignore import Ignores
from shopfloor.agents.tools import GlobArgs, GrepArgs, ListDirArgs, ReadFileArgs
from shopfloor.errors import ToolError

log = structlog.get_logger(__name__)

SNIFF_BYTES = 8192  # binary detection looks for NUL bytes here, as git and grep do
UNDECODABLE_SHARE = 0.3  # more undecodable bytes than this in the sniff: not UTF-8 text
MAX_LINE_CHARS = 2000
# read_file never reads a whole file: a line's first READ_LINE_BYTES are kept (a UTF-8 character is
# at most 4 bytes) and the rest skipped in chunks, counted; one call reads at most READ_SCAN_BYTES
# (skipping to `offset` included) and shows at most READ_OUTPUT_CHARS.
READ_LINE_BYTES = 4 * MAX_LINE_CHARS
READ_SCAN_BYTES = 64 * 1024 * 1024
READ_OUTPUT_CHARS = 1_000_000
READ_CHUNK_BYTES = 1024 * 1024
GREP_LINE_CHARS = 500  # grep shows many lines; a match's context rarely needs more
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024
GREP_TIME_LIMIT_S = 30.0  # one grep call, all its ripgrep runs together
GREP_MAX_OUTPUT_BYTES = 32 * 1024 * 1024  # matching lines read from ripgrep before it is stopped
GREP_FILES_PER_RUN = 200  # open descriptors handed to one ripgrep run
MAX_PATTERN_CHARS = 2000
MAX_GLOB_CHARS = 1000
MAX_GLOB_RESULTS = 1000
MAX_DIR_ENTRIES = 1000
IGNORED_MARK = " (ignored by .gitignore)"


# --- read_file ---------------------------------------------------------------------------------


def read_file(root: Path, args: ReadFileArgs) -> str:
    """Lines offset..offset+limit-1 of a text file, numbered, with a note when more remain.

    Bounded whatever the file: long lines are cut (their rest skipped, not held), and one call
    reads at most READ_SCAN_BYTES and shows at most READ_OUTPUT_CHARS; the note then says where
    to go on from.
    """
    path = resolve_in_workspace(root, args.path)
    name = shown(args.path)
    if not os.path.lexists(path):
        raise ToolError(_missing(path, name))
    if path.is_dir():
        raise ToolError(f"{name} is a directory, not a file; use list_dir to see what it holds")
    out: list[str] = []
    more = n = chars = 0
    try:
        with _open_regular(path, name) as f:
            size = os.fstat(f.fileno()).st_size
            _refuse_non_text(f.read(SNIFF_BYTES), name, size)
            f.seek(0)
            lines = _BoundedLines(f, size)
            n = lines.skip(args.offset - 1)  # scanned in chunks, not line by line
            for raw, length, whole in lines:
                n += 1
                if len(out) == args.limit or chars >= READ_OUTPUT_CHARS:
                    more = 1 + lines.count_rest()
                    break
                out.append(f"{n:>6}\t{_shown_line(raw, length, whole)}")
                chars += len(out[-1])
    except OSError as e:  # an I/O error mid-read is the model's answer too, not a crashed activity
        raise ToolError(f"cannot read {name}: {e.strerror}") from None
    unread = f"the last {lines.unread:,} bytes of {name} were not read (read_file reads {READ_SCAN_BYTES // 2**20} MB a call)"
    further = "use grep, or run_command with tail, sed or head -c, to reach further"
    if not out:
        if lines.unread:
            raise ToolError(f"offset {args.offset} lies past what one call reads ({n:,} lines): {unread}; {further}")
        if n == 0:
            return f"{name} is empty (0 lines)"
        raise ToolError(f"offset {args.offset} is past the end of {name}, which has {n} lines")
    if more:
        at_least = "at least " if lines.unread else ""
        out.append(f"... {at_least}{more} more lines; call read_file with offset={args.offset + len(out)}")
    elif lines.unread:
        out.append(f"... {unread}; {further}")
    return "\n".join(out)


class _BoundedLines:
    """The lines of a file as (first bytes, length in bytes without its newline, whole): a line's
    first READ_LINE_BYTES + 1 are kept and the rest read in chunks, only counted; at most
    READ_SCAN_BYTES are read in all. `unread` is what that budget left of the file (`whole` is
    False for a line it cut short)."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f, self.size = f, size
        self.pos = 0  # tracked here: tell() is a system call, and this runs once a line
        self.unread = 0

    def __iter__(self) -> Iterator[tuple[bytes, int, bool]]:
        while not self._spent():
            raw = self._readline(READ_LINE_BYTES + 1)
            if not raw:
                return
            length, whole, newline = len(raw), True, raw.endswith(b"\n")
            if not newline and length > READ_LINE_BYTES:  # a long line: skip its rest, counting it
                while True:
                    if self._spent():
                        whole = False
                        break
                    part = self._readline(READ_CHUNK_BYTES)
                    length += len(part)
                    if not part or part.endswith(b"\n"):
                        newline = bool(part)
                        break
            yield raw, length - newline, whole

    def skip(self, lines: int) -> int:
        """Pass over up to `lines` lines, scanning chunks for newlines; how many there were."""
        passed, last = 0, b"\n"
        while passed < lines and not self._spent():
            chunk = self._read()
            if not chunk:
                return passed + (last != b"\n")  # a last line without a newline counts too
            found = chunk.count(b"\n")
            if found < lines - passed:
                passed, last = passed + found, chunk[-1:]
                continue
            end = -1
            for _ in range(lines - passed):
                end = chunk.index(b"\n", end + 1)
            self.pos -= len(chunk) - end - 1  # back to just after that newline
            self.f.seek(self.pos)
            return lines
        return passed

    def count_rest(self) -> int:
        """Lines after the current one, counted within the budget."""
        count, last = 0, b"\n"
        while not self._spent() and (chunk := self._read()):
            count += chunk.count(b"\n")
            last = chunk[-1:]
        return count + (last != b"\n")  # a last line without a newline still counts

    def _readline(self, limit: int) -> bytes:
        raw = self.f.readline(limit)
        self.pos += len(raw)
        return raw

    def _read(self) -> bytes:
        chunk = self.f.read(max(1, min(READ_CHUNK_BYTES, READ_SCAN_BYTES - self.pos)))
        self.pos += len(chunk)
        return chunk

    def _spent(self) -> bool:
        if self.pos < READ_SCAN_BYTES:
            return False
        self.unread = max(0, self.size - self.pos)
        return self.unread > 0


def _shown_line(raw: bytes, length: int, whole: bool) -> str:
    if length <= READ_LINE_BYTES:
        return _clip(_decode(raw), MAX_LINE_CHARS)
    text = raw[:READ_LINE_BYTES].decode("utf-8", "replace")[:MAX_LINE_CHARS]
    return f"{text} ... [line truncated: {'more than ' if not whole else ''}{length:,} bytes]"


def _refuse_non_text(head: bytes, name: str, size: int) -> None:
    if b"\x00" in head:
        raise ToolError(f"{name} is a binary file ({size} bytes) and cannot be shown as text")
    # surrogateescape maps each byte that is not valid UTF-8 to one lone surrogate we can count.
    bad = sum(1 for c in head.decode("utf-8", "surrogateescape") if "\udc80" <= c <= "\udcff")
    if bad > len(head) * UNDECODABLE_SHARE:
        raise ToolError(
            f"{name} is not UTF-8 text ({bad} of its first {len(head)} bytes cannot be decoded); "
            "it may be binary or in another encoding"
        )


def _missing(path: Path, name: str) -> str:
    message = f"{name} does not exist"
    try:  # suggest near misses from the same directory: models often get one letter wrong
        near = difflib.get_close_matches(path.name, os.listdir(path.parent), n=3)
    except OSError:
        near = []
    if near:
        message += f"; similar names in that directory: {', '.join(map(_show_name, near))}"
    return message + "; use list_dir or glob to find the right path"


# --- list_dir ----------------------------------------------------------------------------------


def list_dir(root: Path, args: ListDirArgs) -> str:
    """The entries of a directory, sorted by name, one a line; directories end with '/'."""
    real_root = workspace_root(root)
    path = resolve_in_workspace(real_root, args.path)
    name = shown(args.path)
    if not os.path.lexists(path):
        raise ToolError(_missing(path, name))
    if not path.is_dir():
        raise ToolError(f"{name} is a file, not a directory; use read_file to read it")
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        raise ToolError(f"cannot list {name}: {e.strerror}") from None
    if not entries:
        return f"{name} is an empty directory"
    ignores = Ignores(real_root)
    here = path.relative_to(real_root).parts
    marked = not ignores.under_ignored(here)  # inside an ignored directory named on purpose: no marks
    lines = [
        _describe(e, real_root) + (IGNORED_MARK if marked and _is_ignored(ignores, here, e) else "")
        for e in entries[:MAX_DIR_ENTRIES]
    ]
    if len(entries) > MAX_DIR_ENTRIES:
        lines.append(f"... {len(entries) - MAX_DIR_ENTRIES} more entries not shown; use glob to narrow")
    return "\n".join(lines)


def _is_ignored(ignores: Ignores, here: tuple[str, ...], entry: os.DirEntry[str]) -> bool:
    if entry.name == GIT_DIR:
        return False
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    return ignores.ignored((*here, entry.name), is_dir)


class _Skipped:
    """The repository's ignores for a walk from `prefix`, counting what they left out. A walk
    that starts inside an ignored directory was asked for by name: nothing is left out."""

    def __init__(self, real_root: Path, prefix: tuple[str, ...]) -> None:
        self._ignores = Ignores(real_root)
        self._prefix = prefix
        self._named = self._ignores.under_ignored(prefix)
        self.count = 0

    def skip(self, rel: tuple[str, ...], is_dir: bool) -> bool:
        if self._named or not self._ignores.ignored(self._prefix + rel, is_dir):
            return False
        self.count += 1
        return True

    def note(self) -> str:
        if not self.count:
            return ""
        return f" ({self.count} path(s) ignored by .gitignore were not searched; name one as the path to search it)"


def _describe(entry: os.DirEntry[str], real_root: Path) -> str:
    name = _show_name(entry.name)
    try:
        if entry.is_symlink():
            target = os.readlink(entry.path)
            real = Path(os.path.realpath(entry.path))
            # Only the link text is shown; a target outside is never stat()ed or followed.
            if not is_inside(real, real_root):
                return f"{name} -> {_show_name(target)} (outside the workspace)"
            if not real.exists():
                return f"{name} -> {_show_name(target)} (broken)"
            slash = "/" if real.is_dir() and not target.endswith("/") else ""
            return f"{name} -> {_show_name(target)}{slash}"
        if entry.name == GIT_DIR:
            return f"{name}{'/' if entry.is_dir() else ''} (git metadata)"
        if entry.is_dir():
            return f"{name}/"
        if not entry.is_file():
            return f"{name} (special file)"
    except OSError:
        pass  # vanished or unreadable while listing: the bare name is still true
    return name


# --- glob --------------------------------------------------------------------------------------


def glob(root: Path, args: GlobArgs) -> str:
    """Files (not directories) under `path` whose path relative to it matches the pattern."""
    real_root = workspace_root(root)
    base = _existing_dir(real_root, args.path)
    pattern = _glob_pattern(args.pattern)
    prefix = base.relative_to(real_root).parts
    skipped = _Skipped(real_root, prefix)
    hits = sorted(
        "/".join(map(_show_name, prefix + rel))
        for rel, _ in walk_files(real_root, base, pattern.may_match_below, skipped.skip)
        if pattern.matches(rel)
    )
    if not hits:
        message = f"no files match {shown(args.pattern)} in {shown(args.path)}"
        if "/" not in args.pattern:
            message += f"; '*' does not cross directories, try '**/{args.pattern}'"
        return message + skipped.note()
    lines = hits[:MAX_GLOB_RESULTS]
    if len(hits) > MAX_GLOB_RESULTS:
        lines.append(f"... {len(hits) - MAX_GLOB_RESULTS} more files not shown; narrow the pattern or path")
    return "\n".join(lines)


def _existing_dir(real_root: Path, relative: str) -> Path:
    path = resolve_in_workspace(real_root, relative)
    if not os.path.lexists(path):
        raise ToolError(_missing(path, shown(relative)))
    if not path.is_dir():
        raise ToolError(f"{shown(relative)} is a file, not a directory")
    return path


# --- grep --------------------------------------------------------------------------------------


def grep(root: Path, args: GrepArgs) -> str:
    """Lines matching a regular expression, as 'path:line: text', sorted by path then line.

    Python picks the files (confined to the workspace, text of at most 2 MB, opened without
    following links); ripgrep searches them, handed over as open descriptors, in a process that
    is killed after GREP_TIME_LIMIT_S. Its regex engine runs in linear time, so no pattern can
    stall the worker the way a backtracking one (Python's `re`) does.
    """
    real_root = workspace_root(root)
    _check_pattern(args.pattern, args.ignore_case)
    target = resolve_in_workspace(real_root, args.path)
    name = shown(args.path)
    if not os.path.lexists(target):
        raise ToolError(_missing(target, name))
    filt = _glob_pattern(args.glob) if args.glob else None
    explicit = not target.is_dir()
    if explicit:  # a file named explicitly is searched whatever the glob says
        files = [("/".join(map(_show_name, target.relative_to(real_root).parts)), target)]
    else:
        prefix = target.relative_to(real_root).parts
        skipped = _Skipped(real_root, prefix)
        files = sorted(
            ("/".join(map(_show_name, prefix + rel)), path)
            for rel, path in walk_files(real_root, target, skip=skipped.skip)
            if filt is None or _selected(filt, args.glob or "", rel, prefix + rel)
        )

    search = _Search(args, time.monotonic() + GREP_TIME_LIMIT_S)
    large = 0
    batch: list[tuple[str, int]] = []
    try:
        for rel, path in files:
            if search.stopped:
                break
            try:
                batch.append((rel, _open_text(path, shown(rel))))
            except _Skip as skip:
                if explicit:
                    raise ToolError(f"{skip}; grep searches text files of at most 2 MB") from None
                large += skip.large
            except ToolError:
                if explicit:
                    raise
                continue  # unreadable, or not a regular file, while walking: nothing to search
            if len(batch) == GREP_FILES_PER_RUN:
                search.run(batch)
                _close(batch)
        if (batch or not files) and not search.stopped:
            search.run(batch)  # with no file at all it still checks the pattern
    finally:
        _close(batch)

    out = search.shown
    if not out:
        out.append(f"no matches for {shown(args.pattern)} in {name}")
        if args.glob:
            out[0] += f" (files matching {shown(args.glob)})"
        if not explicit:
            out[0] += skipped.note()
    elif search.total > len(out):
        at_least = "at least " if search.stopped else ""
        out.append(
            f"... {at_least}{search.total - len(out)} more matches not shown (max_matches={args.max_matches}); "
            "narrow the pattern, path or glob"
        )
    if search.stopped:
        out.append(f"note: grep stopped early ({search.stopped}): the results are incomplete; narrow the path or glob")
    if large:
        out.append(f"note: {large} file(s) over 2 MB were not searched; page them with read_file")
    return "\n".join(out)


def _check_pattern(pattern: str, ignore_case: bool) -> None:
    """Refuse a pattern that is not a regular expression with the message Python's `re` gives,
    which models know (it is parsed here, never matched); what only ripgrep refuses (look-around,
    backreferences) is reported by _Search."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(
            f"the pattern is {len(pattern)} characters long; grep patterns are limited to {MAX_PATTERN_CHARS}"
        )
    try:
        re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as e:
        raise ToolError(f"invalid regular expression {shown(pattern)}: {e}") from None
    except (RecursionError, OverflowError, MemoryError):
        raise ToolError(f"invalid regular expression {shown(pattern)}: it is too complex") from None


def _glob_pattern(pattern: str) -> GlobPattern:
    if len(pattern) > MAX_GLOB_CHARS:
        raise ToolError(f"the glob pattern is {len(pattern)} characters long; globs are limited to {MAX_GLOB_CHARS}")
    return GlobPattern(pattern)


def _selected(filt: GlobPattern, glob_text: str, rel: tuple[str, ...], from_root: tuple[str, ...]) -> bool:
    if "/" not in glob_text:
        return filt.matches(rel[-1:])  # '*.py' filters by file name at any depth, as rg does
    return filt.matches(rel) or filt.matches(from_root)  # relative to path or to the root


class _Skip(Exception):
    """A file grep does not search (binary, too large)."""

    def __init__(self, message: str, *, large: bool = False) -> None:
        super().__init__(message)
        self.large = large


def _open_text(path: Path, name: str) -> int:
    """An open descriptor of a text file of at most GREP_MAX_FILE_BYTES (the caller closes it)."""
    with _open_regular(path, name) as f:
        size = os.fstat(f.fileno()).st_size
        if size > GREP_MAX_FILE_BYTES:
            raise _Skip(f"{name} is too large ({size} bytes)", large=True)
        try:
            head = f.read(SNIFF_BYTES)
        except OSError as e:
            raise ToolError(f"cannot read {name}: {e.strerror}") from None
        if b"\x00" in head:
            raise _Skip(f"{name} is a binary file")
        return os.dup(f.fileno())


def _close(batch: list[tuple[str, int]]) -> None:
    for _, fd in batch:
        os.close(fd)
    batch.clear()


def ripgrep() -> str:
    """The rg executable: beside this Python (the `ripgrep` wheel installs it there) or on PATH."""
    beside = Path(sys.executable).parent / "rg"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("rg")
    if found is None:
        log.error(
            "ripgrep (rg) is missing, so the grep tool cannot run; install the ripgrep package",
            looked_in=[str(beside.parent), "PATH"],
        )
        raise ToolError("grep is unavailable on this worker (ripgrep is not installed); use glob and read_file instead")
    return found


class _Search:
    """ripgrep over batches of open files: the first max_matches lines are kept and the rest
    counted, until the deadline passes or GREP_MAX_OUTPUT_BYTES of matching lines were read."""

    def __init__(self, args: GrepArgs, deadline: float) -> None:
        self.args = args
        self.deadline = deadline
        self.shown: list[str] = []
        self.total = 0
        self.read = 0
        self.stopped = ""  # why the search ended early, if it did

    def run(self, batch: list[tuple[str, int]]) -> None:
        names = {f"/dev/fd/{fd}": rel for rel, fd in batch}
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.stopped = f"it took over {GREP_TIME_LIMIT_S:.0f} s"
            return
        command = [
            ripgrep(),
            "--no-config",
            "--text",
            "--crlf",
            "--null",
            "--line-number",
            "--with-filename",
            "--no-heading",
            "--color=never",
            "--threads=1",
            "--ignore-case" if self.args.ignore_case else "--case-sensitive",
            "--regexp",
            self.args.pattern,
            "--",
            *(names or ["-"]),  # no file: an empty stdin, to check the pattern
        ]
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                pass_fds=[fd for _, fd in batch],
                env={"PATH": os.environ.get("PATH", "")},
            )
            timer = threading.Timer(remaining, proc.kill)
            timer.start()
            try:
                self._collect(proc, {k.encode(): v for k, v in names.items()})
            finally:
                timer.cancel()
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                if proc.stdout is not None:  # always: stdout=PIPE
                    proc.stdout.close()
            if proc.returncode == 2:  # ripgrep's error, such as a pattern it cannot compile
                errors.seek(0)
                complaint = errors.read(4000).decode(errors="replace")
                lines = [line for line in complaint.splitlines() if line.strip()]
                if not all(line.startswith("rg: /dev/fd/") for line in lines):
                    raise ToolError(_rg_error(self.args.pattern, complaint))
                # A file that failed to read midway is skipped, as unreadable files always were.
        if proc.returncode < 0 and not self.stopped:  # killed by the timer
            self.stopped = f"it took over {GREP_TIME_LIMIT_S:.0f} s"

    def _collect(self, proc: subprocess.Popen[bytes], names: dict[bytes, str]) -> None:
        assert proc.stdout is not None  # started with stdout=PIPE
        for record in proc.stdout:  # b"/dev/fd/N\0LINE:text\n"
            self.read += len(record)
            path, _, rest = record.partition(b"\0")
            number, _, text = rest.partition(b":")
            self.total += 1
            if len(self.shown) < self.args.max_matches:
                line = text.removesuffix(b"\n").removesuffix(b"\r").decode("utf-8", "replace")
                self.shown.append(f"{names.get(path, '?')}:{int(number)}: {_clip(line, GREP_LINE_CHARS)}")
            if self.read > GREP_MAX_OUTPUT_BYTES:
                self.stopped = f"over {GREP_MAX_OUTPUT_BYTES // (1024 * 1024)} MB of matching lines"
                proc.kill()
                return


def _rg_error(pattern: str, stderr: str) -> str:
    """ripgrep's complaint about a pattern, as one sentence the model can act on."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    detail = next((line.removeprefix("error: ") for line in lines if line.startswith("error: ")), None)
    if detail is None:
        detail = lines[0].removeprefix("rg: ") if lines else "ripgrep could not run it"
    return (
        f"invalid regular expression {shown(pattern)}: {detail}. grep uses ripgrep's regex syntax: like "
        "Python's re, but without look-around or backreferences, and a match never spans lines"
    )


# --- shared ------------------------------------------------------------------------------------


def _open_regular(path: Path, name: str) -> BinaryIO:
    """Open a resolved path for reading, refusing anything but a regular file.

    O_NOFOLLOW catches a symlink swapped in after resolution; O_NONBLOCK keeps a FIFO from
    hanging the open; fstat() checks the file actually opened, not the name.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ToolError(f"cannot read {name}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"{name} is not a regular file (a device, FIFO or socket)")
    return os.fdopen(fd, "rb")


def _decode(raw: bytes) -> str:
    return raw.removesuffix(b"\n").removesuffix(b"\r").decode("utf-8", "replace")


def _clip(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    return f"{line[:cap]} ... [line truncated: {len(line)} chars]"


def _show_name(name: str) -> str:
    # A name holding a newline or an undecodable byte would break line-oriented output.
    return name if name.isprintable() else repr(name)
