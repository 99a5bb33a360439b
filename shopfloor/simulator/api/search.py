"""`GET /search/issues`: the qualifiers an issue bot uses (repo, is, state, label, in, author) plus
free-text words, matched as GitHub matches them: whole words (a plural `s` folded), quoted phrases
as consecutive words, and only against what the index holds — an issue is indexed a while after it
changes (`search_index_delay_s`), and until then search sees its previous version, or nothing."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from shopfloor.simulator.auth import can
from shopfloor.simulator.deps import actor_of, paginate, sim_of
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.search_index import Indexed, has_phrase, indexed, phrase_words
from shopfloor.simulator.store import Issue, Repo

router = APIRouter()


@dataclass
class Query:
    repos: list[str] = field(default_factory=list)
    kind: str | None = None  # "issue" | "pr"
    state: str | None = None
    labels: list[str] = field(default_factory=list)
    scopes: set[str] = field(default_factory=set)  # title / body / comments
    authors: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)


def parse(q: str) -> Query:
    try:
        tokens = shlex.split(q)
    except ValueError:  # an unbalanced quote: treat the text as plain words
        tokens = q.split()
    out = Query()
    for token in tokens:
        key, sep, value = token.partition(":")
        key = key.lower()
        if not sep or not value:
            out.words.append(token.lower())
        elif key == "repo":
            out.repos.append(value.lower())
        elif key in ("is", "type"):
            v = value.lower()
            if v in ("issue", "pr", "pull-request"):
                out.kind = "pr" if v != "issue" else "issue"
            elif v in ("open", "closed"):
                out.state = v
            elif v == "merged":
                out.kind, out.state = "pr", "merged"
        elif key == "state":
            out.state = value.lower()
        elif key == "label":
            out.labels.extend(v.strip().lower() for v in value.split(","))
        elif key == "in":
            out.scopes.update(v.strip().lower() for v in value.split(","))
        elif key == "author":
            out.authors.append(value.lower())
        else:
            out.words.append(token.lower())
    return out


def matches(query: Query, doc: Indexed) -> bool:
    if query.kind == "issue" and doc.is_pr or query.kind == "pr" and not doc.is_pr:
        return False
    if query.state == "merged":
        if not doc.merged:
            return False
    elif query.state and doc.state != query.state:
        return False
    if any(label not in doc.labels for label in query.labels):
        return False
    if query.authors and doc.author not in query.authors:
        return False
    scopes = query.scopes or {"title", "body", "comments"}
    fields = [
        words
        for scope, words in (("title", doc.title), ("body", doc.body), ("comments", doc.comments))
        if scope in scopes
    ]
    return all(any(has_phrase(words, phrase_words(word)) for words in fields) for word in query.words)


@router.get("/search/issues")
def search_issues(request: Request) -> JSONResponse:
    sim, actor = sim_of(request), actor_of(request)
    q = request.query_params.get("q", "").strip()
    if not q:
        raise GitHubError(422, "Validation Failed", errors=[{"resource": "Search", "field": "q", "code": "missing"}])
    query = parse(q)
    with sim.store.lock:
        repos: list[Repo] = [
            r
            for r in sim.store.repos.values()
            if can(r, actor.user, "read") and (not query.repos or r.full_name.lower() in query.repos)
        ]
        t = datetime.now(UTC)
        delay = sim.config.search_index_delay_s
        found = [
            (r, i) for r in repos for i in r.issues.values() if (doc := indexed(i, t, delay)) and matches(query, doc)
        ]
        found.sort(key=lambda ri: ri[1].created_at, reverse=request.query_params.get("order", "desc") != "asc")

        def shape(ri: tuple[Repo, Issue]) -> dict:
            data = sim.shapes.issue(*ri)
            data["score"] = 1.0
            return data

        return paginate(
            request,
            found,
            shape=shape,
            wrap="items",
            extra={"total_count": len(found), "incomplete_results": False, "search_type": "lexical"},
        )
