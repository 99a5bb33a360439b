"""The shapes a parsed shell command takes (see shell_parse), and $'...' decoding."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class ShellParseError(ValueError):
    """The text is not a shell command this parser can read."""


@dataclass
class Word:
    text: str
    quoted: bool = False  # some part of it was quoted or escaped
    expanded: bool = False  # it holds a $-expansion or a substitution, so its value is unknown
    subs: list[Script] = field(default_factory=list)  # commands run to build it


@dataclass
class Redirect:
    op: str  # "<", ">", ">>", ">|", "<>", "&>", "&>>", ">&", "<&", "<<", "<<-", "<<<"
    target: Word
    fd: str = ""
    body: str | None = None  # a heredoc's text
    body_subs: list[Script] = field(default_factory=list)  # substitutions in an unquoted heredoc


@dataclass
class Command:
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    group: Script | None = None  # the body of a ( … ) subshell


@dataclass
class Pipeline:
    commands: list[Command]


Script = list[Pipeline]


_ANSI_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.S)
_ANSI_SIMPLE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _unescape_one(m: re.Match[str]) -> str:
    """One backslash escape of a $'...' string, as bash decodes it."""
    e = m.group(1)
    if e[0] in "xuU" and len(e) > 1:
        return chr(min(int(e[1:], 16), 0x10FFFF))
    if e[0] in "01234567":
        return chr(int(e, 8))
    if e[0] == "c" and len(e) > 1:
        return chr(ord(e[1]) & 0x1F)
    return _ANSI_SIMPLE.get(e, "\\" + e)


def unescape_ansi_c(raw: str) -> str:
    """The text of a $'...' string from its raw inside."""
    return _ANSI_ESCAPE.sub(_unescape_one, raw)
