"""Protected-path globs (a repository policy's `protected_paths`), matched like `.gitignore` entries.

The one translation of these globs to regular expressions, for every place that asks: the
policy's `is_protected` and the permission check on edit_file / write_file. Pure string work.
What docs/policy.md promises, against a path relative to the repository root ("src/a.py"):

- `*` and `?` match within one path segment; `[abc]`, `[a-z]`, `[!a]` (or `[^a]`) and POSIX
  classes such as `[[:digit:]]` are character classes, which never match `/`; `\\x` is a literal x;
- `**` spans segments: `a/**/b` matches `a/b` and `a/x/y/b`, `**/x` matches `x` at any depth, and
  `dir/**` matches `dir` itself and everything under it (another `**`, as in `a**b`, also spans);
- a pattern without a `/` (a trailing one aside) matches a name at any depth; one with a `/` is
  anchored at the root, and a leading `/` or `./` only anchors;
- a pattern that matches a directory covers everything under it, and a trailing `/` is ignored
  (it names the directory or a file of that name: protecting too much is the safe mistake);
- matching is case-sensitive, as git's is; a pattern with nothing left to match matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["first_match", "glob_regex", "matches"]

_NOTHING = re.compile(r"(?!)")
_POSIX = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


def _char_class(p: str, i: int) -> tuple[str, int] | None:
    """The class that opens at `p[i] == "["` as a regex, and where it ends; None when no `]` closes
    it (the `[` is then a literal). A `]` right after `[` or `[!` is a member; a reversed range
    (`z-a`) has no members."""
    j = i + 1
    negate = j < len(p) and p[j] in "!^"
    j += negate
    items: list[str] = []
    first = True
    while j < len(p):
        c = p[j]
        if c == "]" and not first:
            break
        first = False
        if p.startswith("[:", j) and (end := p.find(":]", j + 2)) != -1 and p[j + 2 : end] in _POSIX:
            items.append(_POSIX[p[j + 2 : end]])
            j = end + 2
            continue
        if c == "\\" and j + 1 < len(p):
            j += 1
            c = p[j]
        j += 1
        if j + 1 < len(p) and p[j] == "-" and p[j + 1] != "]":
            hi, j = p[j + 1], j + 2
            if hi == "\\" and j < len(p):
                hi, j = p[j], j + 1
            if c <= hi:
                items.append(f"{re.escape(c)}-{re.escape(hi)}")
            continue
        items.append(re.escape(c))
    else:
        return None
    body = "".join(items)
    if negate:
        return f"[^/{body}]", j + 1
    return (f"(?!/)[{body}]" if body else "(?!)"), j + 1


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """`pattern` as a regex to `fullmatch` against a normalized relative path (no `.` or `..`
    segments, no leading or trailing `/`)."""
    p = pattern.strip()
    anchored = "/" in p.rstrip("/")
    while p.startswith("./"):
        p = p[2:]
    p = p.strip("/")
    if not p:
        return _NOTHING
    out: list[str] = []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            out.append(re.escape(p[i + 1] if i + 1 < n else c))
            i += 2
        elif p.startswith("**/", i) and (i == 0 or p[i - 1] == "/"):
            out.append("(?:.*/)?")  # zero or more directories
            i += 3
        elif p.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")  # `dir/**`: the directory itself and everything under it
            i += 3
        elif p.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (cls := _char_class(p, i)) is not None:
            out.append(cls[0])
            i = cls[1]
        else:
            out.append(re.escape(c))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"  # no `/`: a name at any depth
    return re.compile(prefix + "".join(out) + "(?:/.*)?", re.S)  # a directory covers what is in it


def matches(pattern: str, path: str) -> bool:
    """Whether `pattern` covers `path` (normalized, relative to the repository root)."""
    return glob_regex(pattern).fullmatch(path) is not None


def first_match(patterns: Iterable[str], path: str) -> str | None:
    """The first of `patterns` that covers `path`, if any."""
    return next((p for p in patterns if matches(p, path)), None)
