"""Text a model wrote, made fit to post on GitHub: no HTML comments, so no shopfloor markers. Pure.

shopfloor finds its own comments, reviews and pull requests again by hidden markers
(`<!-- shopfloor:<workflow-id>:<kind> -->`), and the webhook edge routes a comment on one of its
pull requests by the marker that ends the body. A model's text (a pull request's title and body,
a review and its line comments, a reply) may carry a marker copied from anywhere, so every such
text passes through `for_github` before it is written: HTML comments (and with them every marker)
and invisible characters are removed, the same way untrusted text is cleaned before a model reads
it. The GitHub write activities apply it to every body they post and add shopfloor's own marker
after it, so the only marker in what shopfloor writes is the one it put there.
"""

from __future__ import annotations

import re

from shopfloor.agents.untrusted_text import sanitize


def for_github(text: str | None) -> str:
    """`text` without HTML comments (markers included) or hidden characters. Idempotent."""
    return sanitize(text or "")


def with_own_marker_kept(body: str, marker: str) -> tuple[str, bool]:
    """(`body` cleaned by `for_github`, whether it ended with `marker`): the writer puts its own
    marker back where it was, after the cleaning removed it with everything else."""
    stripped = body.rstrip()
    ends = stripped.endswith(marker)
    return for_github(stripped.removesuffix(marker).rstrip() if ends else body), ends


def safe_login(login: str) -> str:
    """A login fit to quote in a comment: GitHub logins are letters, digits and hyphens."""
    return re.sub(r"[^A-Za-z0-9-]", "", login)[:39] or "there"


def reply_ref(comment_id: int | None, delivery_id: str) -> str:
    """What a reply to one comment is keyed by (its marker kind's tail): the comment's id, or the
    delivery's when there is none, so a redelivered comment gets the same reply, never a second."""
    ref = str(comment_id) if comment_id is not None else re.sub(r"[^A-Za-z0-9_.-]", "", delivery_id)[:64]
    return ref or "command"
