"""The simulator's search index: what `GET /search/issues` matches against, as GitHub's does.

GitHub matches words, not substrings (`log` does not find "Login"), and indexes an issue a while
after it changes. Here an issue's indexed version is taken `delay` seconds after its `updated_at`;
until then a search sees the version indexed before (an edit is found by its old words), or, for
an issue never indexed, nothing. A version is indexed when a search first finds it ready.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from shopfloor.simulator.store import Issue

_WORD = re.compile(r"[^\W_]+")


def _stem(word: str) -> str:
    """A plural's `s` folded (`logins` → `login`), as GitHub's English analysis does, roughly."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def phrase_words(text: str) -> tuple[str, ...]:
    return tuple(_stem(w) for w in _WORD.findall(text.lower()))


def has_phrase(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    """Whether `phrase` occurs in `words` as consecutive words (an empty phrase always does)."""
    if not phrase:
        return True
    n = len(phrase)
    return any(words[i : i + n] == phrase for i in range(len(words) - n + 1))


@dataclass(frozen=True)
class Indexed:
    title: tuple[str, ...]
    body: tuple[str, ...]
    comments: tuple[str, ...]
    state: str
    labels: frozenset[str]
    author: str
    is_pr: bool
    merged: bool

    @classmethod
    def of(cls, issue: Issue) -> Indexed:
        return cls(
            title=phrase_words(issue.title),
            body=phrase_words(issue.body or ""),
            comments=phrase_words(" ".join(c.body for c in issue.comments)),
            state=issue.state,
            labels=frozenset(label.name.lower() for label in issue.labels),
            author=issue.user.login.lower(),
            is_pr=issue.pr is not None,
            merged=bool(issue.pr and issue.pr.merged),
        )


def indexed(issue: Issue, at: datetime, delay_s: float) -> Indexed | None:
    """What search sees of `issue` at `at` (the store lock held)."""
    if at >= issue.updated_at + timedelta(seconds=delay_s):
        issue.search_index = Indexed.of(issue)
    found = issue.search_index
    return found if isinstance(found, Indexed) else None
