"""Issues similar to one being triaged, through GitHub's issue search.

Keywords come from the title only: lower-cased runs of letters and digits, so no quote, colon or
operator from untrusted text can reach the query as syntax (`repo:x` in a title is two words,
and `OR`/`NOT` are folded to stop-words). GitHub ANDs words, so one query with every keyword
finds close matches only; when that finds too few, one query per leading keyword widens the net,
and candidates must share at least two keywords. At most MAX_SEARCHES requests, one page each:
the search API allows 30 requests a minute.
"""

from __future__ import annotations

import re
from typing import Any

from shopfloor.activities.github.api import GitHubApi
from shopfloor.models.github_reads import (
    SimilarIssue,
    SimilarIssuesInput,
    SimilarIssuesOutput,
)

MAX_KEYWORDS = 6
MAX_SEARCHES = 3  # one for all keywords, then one each for the two leading ones
_WORD = re.compile(r"[^\W_]{2,40}")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "did",
        "do",
        "does",
        "doesn",
        "don",
        "for",
        "from",
        "has",
        "have",
        "how",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "it",
        "its",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "why",
        "will",
        "with",
        "without",
        "won",
        "would",
        "you",
        "your",
        "after",
        "before",
        "again",
        "all",
        "also",
        "any",
        "no",
        "nor",
        "only",
        "same",
        "some",
        "such",
        "than",
        "too",
        "very",
        "just",
        "get",
        "gets",
        "got",
        "use",
        "using",
        "used",
        "via",
        "per",
    ]
)
# Words every bug report uses: kept, but searched for last.
_GENERIC = frozenset(
    [
        "error",
        "errors",
        "bug",
        "bugs",
        "issue",
        "problem",
        "fail",
        "fails",
        "failed",
        "failing",
        "broken",
        "crash",
        "crashes",
        "wrong",
        "work",
        "works",
        "working",
        "unable",
        "cant",
    ]
)


def keywords(title: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _WORD.findall(title.lower()):
        if word not in _STOP:
            seen.setdefault(word)
    words = list(seen)
    return ([w for w in words if w not in _GENERIC] + [w for w in words if w in _GENERIC])[:MAX_KEYWORDS]


def _search(api: GitHubApi, repo: str, words: list[str], per_page: int) -> list[dict[str, Any]]:
    data = api.get("/search/issues", q=f"repo:{repo} is:issue " + " ".join(words), per_page=per_page)
    return list((data or {}).get("items") or [])


def similar_issues(api: GitHubApi, inp: SimilarIssuesInput) -> SimilarIssuesOutput:
    words = keywords(inp.title)
    if not words:
        return SimilarIssuesOutput()
    per_page = min(100, inp.limit * 3 + 1)
    found: dict[int, tuple[int, dict[str, Any]]] = {}  # number -> (rank bonus, item)
    queries = [words] + ([[w] for w in words[:2]] if len(words) > 1 else [])
    for n, query in enumerate(queries[:MAX_SEARCHES]):
        for item in _search(api, inp.repo, query, per_page):
            number = item.get("number")
            if number == inp.number or "pull_request" in item or not isinstance(number, int):
                continue
            found.setdefault(number, (10 if n == 0 else 0, item))  # all keywords beat some
        if n == 0 and len(found) >= inp.limit:
            break
    need = min(2, len(words))
    ranked: list[tuple[int, int, dict[str, Any]]] = []
    for number, (bonus, item) in found.items():
        title_words = set(_WORD.findall((item.get("title") or "").lower()))
        body_words = set(_WORD.findall((item.get("body") or "")[:20_000].lower()))
        shared = [w for w in words if w in title_words or w in body_words]
        if bonus or len(shared) >= need:
            score = bonus + 2 * sum(w in title_words for w in words) + len(shared)
            ranked.append((score, number, item))
    ranked.sort(key=lambda r: (-r[0], r[2].get("state") != "open", -r[1]))
    return SimilarIssuesOutput(
        keywords=words,
        issues=[
            SimilarIssue(
                number=number,
                title=(item.get("title") or "")[:256],
                state=item.get("state") or "",
                url=item.get("html_url") or "",
            )
            for _, number, item in ranked[: inp.limit]
        ],
    )
