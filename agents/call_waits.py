"""How a tool call waiting for an operator is named and shown: the id a maintainer types in
`/shopfloor approve-call <id>`, the progress comment's lines and `shopfloor status`'s. Pure: no I/O.

Call ids come from the provider (or the model, with text actions), summaries quote the model's
arguments: in markdown both go into inert code spans (agents/progress.py `untrusted`), and the id
a person answers with is the call id cut to the characters a comment command can carry.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime

from shopfloor.models.call_waits import CallWait

MAX_ID_CHARS = 64
_NOT_ID = re.compile(r"[^A-Za-z0-9_.:-]")


def answer_id(call_id: str) -> str:
    """The id a person names a waiting call by: the call id with only letters, digits and `_.:-`."""
    return _NOT_ID.sub("", call_id)[:MAX_ID_CHARS]


def parse_answer(args: str) -> tuple[str, str]:
    """`<id> [note]` from a comment command's arguments: the id as answer_id cuts it ("" when none
    was given), and the rest as a note for the record (the model reads a rejection's)."""
    words = args.split(None, 1)
    if not words:
        return "", ""
    note = " ".join(words[1].split())[:300] if len(words) > 1 else ""
    return answer_id(words[0]), note


def when(at: datetime) -> str:
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M UTC")


def how_to_answer(wait: CallWait) -> str:
    """The three ways to answer, in markdown."""
    cid, wid = answer_id(wait.call_id), _plain(wait.workflow_id)
    if not cid:  # nothing a comment could name: the CLI's update takes the only pending call
        return f"run `shopfloor approve {wid}` or `shopfloor reject {wid} --reason <why>`"
    return (
        f"comment `/shopfloor approve-call {cid}` or `/shopfloor reject-call {cid} <why>` "
        f"(write access needed), or run `shopfloor approve {wid} --call {cid}`"
    )


def _plain(text: str) -> str:
    """A workflow id fit for a code span: no backticks, no whitespace."""
    return re.sub(r"[`\s]", "", text)[:200]


def status_lines(waits: list[CallWait]) -> list[str]:
    """`shopfloor status`'s lines for the waiting calls (plain text)."""
    lines: list[str] = []
    for w in waits:
        # The CLI names the call by its own id (quoted for a shell), which the agent run matches exactly.
        cid, cli = answer_id(w.call_id), shlex.quote(w.call_id)
        lines += [
            f"waiting   {w.agent} · call {cid} · step {w.step} · {w.summary}",
            f"          since {when(w.since)} · refused at {when(w.until)} if nobody answers"
            + (f" · {w.reason}" if w.reason else ""),
            f"          answer: shopfloor approve {w.workflow_id} --call {cli}"
            f"  |  shopfloor reject {w.workflow_id} --call {cli} --reason <why>",
        ]
    return lines
