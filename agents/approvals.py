"""Which commit a maintainer's `/shopfloor approve [<sha>]` approves — or why it approves none. Pure.

An approval names a commit. `/shopfloor approve <sha>` (7 to 40 hex digits) names the commit whose
sha starts with them. A bare `/shopfloor approve` names the head the maintainer could have seen:
the pull request's head at the comment's `created_at` (GitHub's clock, in the webhook), looked up
in the run's record of heads and the time each became the head. That record only ever learns of
a head after it was pushed, so a head recorded strictly before the comment's time really was
there (GitHub's times are whole seconds: a head from the comment's own second is not counted).

Either way the approval counts only when the commit it names is still the head: a push after the
comment (or a comment handled late, after a redelivery) is refused with a reply that names the
new head and asks for `/shopfloor approve <new sha>`, so nothing is merged that nobody approved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from shopfloor.models.factory_run import HeadSeen

HEADS_KEPT = 50
SHORT_SHA = 12
_SHA_ARG = re.compile(r"^[0-9a-fA-F]{7,40}$")


@dataclass(frozen=True)
class ApprovalDecision:
    sha: str | None  # the approved head; None: refused
    reason: str = ""  # why refused: a sentence for the maintainer (without the greeting)


def sha_argument(args: str) -> str | None:
    """The sha `/shopfloor approve <sha>` names (lowercase), or None for the bare form."""
    words = args.split()
    return words[0].lower() if words and _SHA_ARG.match(words[0]) else None


def record_head(heads: list[HeadSeen], sha: str, seen_at: datetime) -> None:
    """Note that `sha` is the head, known to be since `seen_at` at the latest (in place, bounded).

    The same head seen again with an earlier time (a webhook's GitHub time after our own read)
    moves its start back, never before the head that preceded it."""
    if heads and heads[-1].sha == sha:
        floor = heads[-2].since if len(heads) > 1 else None
        if seen_at < heads[-1].since and (floor is None or seen_at >= floor):
            heads[-1].since = seen_at
        return
    if heads and seen_at < heads[-1].since:
        seen_at = heads[-1].since  # keep the record ordered: a later head never starts earlier
    heads.append(HeadSeen(sha=sha, since=seen_at))
    del heads[:-HEADS_KEPT]


def head_at(heads: list[HeadSeen], at: datetime) -> str | None:
    """The head at `at`: the last one recorded strictly before it (None: no head yet).

    GitHub's times are whole seconds: a head whose time equals the comment's may have come
    after it, so it does not count."""
    found = None
    for head in heads:
        if head.since < at:
            found = head.sha
        else:
            break
    return found


def _short(sha: str) -> str:
    return sha[:SHORT_SHA]


def decide(heads: list[HeadSeen], current: str | None, args: str, written_at: datetime | None) -> ApprovalDecision:
    """The head an approval comment approves (`args`: what follows `/shopfloor approve`)."""
    if not current:
        return ApprovalDecision(None, "there is no pull request head to approve yet.")
    ask = f"Review `{_short(current)}`, then comment `/shopfloor approve {_short(current)}` to approve it."
    named = sha_argument(args)
    if named is not None:
        if current.startswith(named):
            return ApprovalDecision(current)
        return ApprovalDecision(
            None, f"it names `{named[:SHORT_SHA]}`, but the pull request's head is `{_short(current)}`. {ask}"
        )
    if written_at is None:
        return ApprovalDecision(None, f"shopfloor cannot tell which commit it approves. {ask}")
    seen = head_at(heads, written_at)
    if seen is None:
        return ApprovalDecision(None, f"it was written before the head `{_short(current)}` existed. {ask}")
    if seen != current:
        return ApprovalDecision(
            None, f"the head moved from `{_short(seen)}` to `{_short(current)}` after it was written. {ask}"
        )
    return ApprovalDecision(current)
