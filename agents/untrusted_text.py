"""Hidden content stripped from untrusted text (issue, PR and comment titles and bodies).

What a human reviewer does not see on GitHub must not reach a model either (docs/design.md, Trust
and safety): HTML comments (also unterminated ones, which hide everything after them), zero-width
characters, bidi controls and every other Unicode format character (category Cf), plus control
characters other than tab and newline. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata

# Named for readers; the Cf test below covers them all (and soft hyphens, tag characters ...).
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"
_KEEP_CONTROLS = {"\t", "\n"}

# Terminated, or running to the end of the text: GitHub renders neither.
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)


def _visible(ch: str) -> bool:
    category = unicodedata.category(ch)
    if category == "Cf":
        return False
    if category == "Cc":
        return ch in _KEEP_CONTROLS
    return True


def strip_format_chars(text: str) -> str:
    return "".join(ch for ch in text if _visible(ch))


def sanitize(text: str) -> str:
    """`text` without hidden content. Idempotent; never contains `<!--` or a format character."""
    if not text:
        return ""
    # \r\n and lone \r become \n: a \r would otherwise be dropped as a control character.
    text = strip_format_chars(text.replace("\r\n", "\n").replace("\r", "\n"))
    # Removing one comment can join `<!` and `--` into a new one: repeat until nothing changes.
    while "<!--" in text:
        text = _HTML_COMMENT.sub("", text)
    return text
