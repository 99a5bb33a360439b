"""`/shopfloor <command> [args]` in a comment, parsed into a `CommentCommand`. Pure: no I/O.

The first line that starts with `/shopfloor` decides (later ones are ignored); lines inside
fenced code blocks and quoted lines (`>`) do not count, so quoting someone's command or showing
one in an example does not run it. `/shopfloor <instructions>` — a first word that is no command,
followed by more words (`/shopfloor also handle negative numbers`) — is `fix` with the whole
instructions as its args. A single unknown word (`/shopfloor aprove`, a typo) gives None, so a
misspelt command never starts work: the comment is still delivered, and the workflow may answer
it. Whether the sender may run the command is checked by the workflow, not here.
"""

from __future__ import annotations

import re
from typing import TypeGuard, get_args

from shopfloor.agents.untrusted_text import sanitize
from shopfloor.models.inbox import CommandName, CommentCommand

PREFIX = "/shopfloor"
KNOWN: frozenset[str] = frozenset(get_args(CommandName))
MAX_ARGS_CHARS = 500
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def command_lines(text: str) -> list[str]:
    """Lines of `text` that could carry a command: outside code fences and quotes, stripped."""
    lines: list[str] = []
    fence: str | None = None
    for raw in sanitize(text).split("\n"):
        opened = _FENCE.match(raw)
        if fence is not None:
            # A fence closes on a line of the same character, at least as long.
            closes = opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence)
            if closes and not raw.strip().strip(fence[0]):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        line = raw.strip()
        if line.startswith(">") or raw.startswith("    "):  # a quote, or an indented code block
            continue
        lines.append(line)
    return lines


def parse_command(text: str | None) -> CommentCommand | None:
    """The command of a comment, or None (no command line, or an unknown command)."""
    if not text:
        return None
    for line in command_lines(text):
        if not line.startswith(PREFIX):
            continue
        rest = line[len(PREFIX) :]
        if rest and not rest[0].isspace():
            continue  # `/shopfloorish`: not our prefix
        words = rest.split(None, 1)
        if not words:
            return None  # a bare `/shopfloor` is the first command line: nothing to run
        name = words[0].lower()
        args = words[1].strip()[:MAX_ARGS_CHARS] if len(words) > 1 else ""
        if _is_known(name):
            return CommentCommand(name=name, args=args)
        if args:  # instructions in the command's place: a fix with them
            return CommentCommand(name="fix", args=rest.strip()[:MAX_ARGS_CHARS])
        return None
    return None


def _is_known(name: str) -> TypeGuard[CommandName]:
    return name in KNOWN
