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
