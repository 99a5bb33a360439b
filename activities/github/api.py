"""GitHub's REST endpoints, called through PyGithub's requester (blocking; run in a thread).

Paths are spelled out rather than reached through PyGithub's object graph, so each step is
exactly one documented request, and a failure names the request that failed ("GET /repos/...").

Every caller goes through `call_github` (blocking) or `read_github` / `write_github` (async, in a
worker thread; writes under the installation's write lock): this thread's session for the
repository, a GitHubApi that knows who we are, and any failure mapped by `github_failure`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote, urlencode

from github import GithubException

from shopfloor.activities.github.clients import PER_PAGE, GitHubClients, Session
from shopfloor.activities.github.conditional import Remembered
from shopfloor.activities.github.errors import github_failure

_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')
MAX_PAGES = 50  # 5,000 items: past that an issue is not one shopfloor should be editing

_P = ParamSpec("_P")
_T = TypeVar("_T")


def q(segment: str) -> str:
    """One path segment, escaped (labels and logins may hold spaces, '/' or '#')."""
    return quote(segment, safe="")


class GitHubApi:
    def __init__(self, session: Session, own_login: Callable[[], str] | None = None) -> None:
        self.session = session
        self._requester = session.github.requester
        self._own_login = own_login
        self.last = ""  # the request in flight, for error messages

    def own_login(self) -> str:
        """Who our comments and reviews are authored by (asked of GitHub once per worker)."""
        if self._own_login is None:
            raise RuntimeError("this GitHubApi was built without an identity")
        return self._own_login()

    def request(self, verb: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Any:
        self.last = f"{verb} {path}"
        _, data = self._requester.requestJsonAndCheck(verb, path, parameters=params, input=body)
        return data

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def poll(self, path: str, **params: Any) -> Any:
        """GET for a read that is repeated (CI's state while a run waits): asked conditionally,
        so an unchanged answer is a 304 that costs no rate limit and reuses the remembered body."""
        self.last = f"GET {path}"
        return self._fetch(path, params or None, conditional=True)[1]

    def _fetch(self, url: str, params: dict[str, Any] | None, *, conditional: bool) -> tuple[dict[str, Any], Any]:
        if not conditional:
            return self._requester.requestJsonAndCheck("GET", url, parameters=params)
        asked = url + ("?" + urlencode(sorted((k, str(v)) for k, v in params.items())) if params else "")
        remembered = self.session.remembered.get(self.session.key, asked)
        headers = {"If-None-Match": remembered.etag} if remembered is not None else None
        status, answer_headers, output = self._requester.requestJson("GET", url, parameters=params, headers=headers)
        if status == 304 and remembered is not None:
            return remembered.headers, remembered.data
        data = json.loads(output) if output else None
        if status >= 400:
            raise self._requester.createException(status, answer_headers, data if isinstance(data, dict) else {})
        etag = {k.lower(): v for k, v in answer_headers.items()}.get("etag")
        if etag:
            self.session.remembered.put(self.session.key, asked, Remembered(etag, answer_headers, data))
        return answer_headers, data

    def get_or_none(self, path: str, **params: Any) -> Any:
        """GET, with 404 meaning "absent" rather than an error."""
        try:
            return self.get(path, **params)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def paginate(
        self, path: str, *, items: str | None = None, conditional: bool = False, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item of a listing, following `Link: rel="next"` (`items`: the key of the list
        inside an object page, as for check runs; `conditional`: each page asked as `poll` asks)."""
        url: str | None = path
        query: dict[str, Any] | None = {"per_page": PER_PAGE, **params}
        for _ in range(MAX_PAGES):
            if url is None:
                return
            self.last = f"GET {path}"
            headers, data = self._fetch(url, query, conditional=conditional)
            yield from (data.get(items) or []) if items else (data or [])
            match = _NEXT_LINK.search(headers.get("link", ""))
            url, query = (match.group(1), None) if match else (None, None)


def call_github(
    clients: GitHubClients, repo: str, fn: Callable[Concatenate[GitHubApi, _P], _T], *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """Blocking: `fn(api, *args, **kwargs)` on this thread's session for `repo`. Every failure
    (finding the session included) leaves as the one ApplicationError `github_failure` maps it
    to, naming the request in flight."""
    api: GitHubApi | None = None
    try:
        session = clients.session(repo)
        api = GitHubApi(session, own_login=lambda: clients.own_login(session))
        return fn(api, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure leaves as one mapped ApplicationError
        raise github_failure(exc, api.last if api else "", auth_hint=clients.auth_hint) from None


async def read_github(
    clients: GitHubClients, repo: str, fn: Callable[Concatenate[GitHubApi, _P], _T], *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """`call_github` in a worker thread (PyGithub blocks)."""
    return await asyncio.to_thread(lambda: call_github(clients, repo, fn, *args, **kwargs))


async def write_github(
    clients: GitHubClients, repo: str, fn: Callable[Concatenate[GitHubApi, _P], _T], *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """`call_github` in a worker thread under the write lock of `repo`'s installation (or token):
    one write at a time per installation, per worker."""
    try:
        key = await asyncio.to_thread(clients.write_key, repo)
    except Exception as exc:  # noqa: BLE001 - mapped like any other failure
        raise github_failure(exc, auth_hint=clients.auth_hint) from None
    async with clients.write_lock(key):
        return await asyncio.to_thread(lambda: call_github(clients, repo, fn, *args, **kwargs))
