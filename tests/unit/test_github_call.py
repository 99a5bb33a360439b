"""The one wrapper every GitHub caller goes through (activities/github/api.py): this thread's
session for the repository, a GitHubApi that knows who we are, every failure mapped by
`github_failure` naming the request in flight, and writes one at a time per installation."""

from __future__ import annotations

import asyncio
import threading

import pytest
import requests
from github import GithubException
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi, call_github, read_github, write_github

pytestmark = pytest.mark.fast


class _Requester:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.threads: list[int] = []

    def requestJsonAndCheck(self, verb, path, parameters=None, input=None):  # noqa: N802 - PyGithub's name
        self.threads.append(threading.get_ident())
        if self.fail is not None:
            raise self.fail
        return {}, {"verb": verb, "path": path, "body": input}


class _Github:
    def __init__(self, requester: _Requester) -> None:
        self.requester = requester


class _Session:
    def __init__(self, requester: _Requester) -> None:
        self.github = _Github(requester)
        self.key = "installation:7"
        self.auth_hint = "hint"


class FakeClients:
    """The parts of GitHubClients the wrapper uses."""

    auth_hint = "check the token"

    def __init__(self, fail: BaseException | None = None, session_fails: BaseException | None = None) -> None:
        self.requester = _Requester(fail)
        self.session_fails = session_fails
        self.key_fails: BaseException | None = None
        self.locks: dict[str, asyncio.Lock] = {}
        self.sessions: list[str] = []

    def session(self, repo: str) -> _Session:
        if self.session_fails is not None:
            raise self.session_fails
        self.sessions.append(repo)
        return _Session(self.requester)

    def own_login(self, session: _Session) -> str:
        return "shopfloor[bot]"

    def write_key(self, repo: str) -> str:
        if self.key_fails is not None:
            raise self.key_fails
        return "installation:7"

    def write_lock(self, key: str) -> asyncio.Lock:
        return self.locks.setdefault(key, asyncio.Lock())


def _comment(api: GitHubApi, number: int, *, body: str) -> dict:
    return api.post(f"/repos/acme/app/issues/{number}/comments", {"body": body})


def test_runs_the_call_on_the_repos_session_with_arguments_and_identity():
    clients = FakeClients()
    out = call_github(clients, "acme/app", _comment, 7, body="hi")  # type: ignore[arg-type]
    assert out == {"verb": "POST", "path": "/repos/acme/app/issues/7/comments", "body": {"body": "hi"}}
    assert clients.sessions == ["acme/app"]
    assert call_github(clients, "acme/app", lambda api: api.own_login()) == "shopfloor[bot]"  # type: ignore[arg-type]


def test_a_failed_request_is_mapped_and_names_the_request():
    clients = FakeClients(fail=GithubException(404, {"message": "Not Found"}, {}, None))
    with pytest.raises(ApplicationError) as info:
        call_github(clients, "acme/app", _comment, 7, body="hi")  # type: ignore[arg-type]
    assert info.value.type == "GitHubNotFound" and info.value.non_retryable
    assert info.value.message.startswith("POST /repos/acme/app/issues/7/comments: 404 Not Found")
    assert info.value.__cause__ is None and info.value.__suppress_context__  # `from None`, as before


def test_a_failure_before_any_request_is_mapped_without_a_request_name():
    clients = FakeClients(session_fails=requests.exceptions.ConnectionError("refused"))
    with pytest.raises(ApplicationError) as info:
        call_github(clients, "acme/app", _comment, 7, body="hi")  # type: ignore[arg-type]
    assert info.value.type == "GitHubUnavailable" and not info.value.non_retryable
    assert info.value.message == "GitHub unreachable: ConnectionError"


def test_a_bug_in_the_call_is_mapped_non_retryable():
    def broken(api: GitHubApi) -> None:
        api.get("/repos/acme/app")
        raise KeyError("number")

    with pytest.raises(ApplicationError) as info:
        call_github(FakeClients(), "acme/app", broken)  # type: ignore[arg-type]
    assert info.value.type == "GitHubUnexpected" and info.value.non_retryable
    assert info.value.message == "GET /repos/acme/app: unexpected KeyError: 'number'"


def test_401_carries_the_auth_hint():
    clients = FakeClients(fail=GithubException(401, {"message": "Bad credentials"}, {}, None))
    with pytest.raises(ApplicationError) as info:
        call_github(clients, "acme/app", lambda api: api.get("/user"))  # type: ignore[arg-type]
    assert info.value.message == "GET /user: 401 Bad credentials: check the token"


async def test_reads_run_in_a_worker_thread_without_the_write_lock():
    clients = FakeClients()
    async with clients.write_lock("installation:7"):  # a write in progress does not hold reads up
        out = await asyncio.wait_for(read_github(clients, "acme/app", _comment, 1, body="x"), 5)  # type: ignore[arg-type]
    assert out["path"].endswith("/1/comments")
    assert clients.requester.threads and threading.get_ident() not in clients.requester.threads


async def test_writes_take_the_installations_lock_one_at_a_time():
    clients = FakeClients()
    lock = clients.write_lock("installation:7")
    async with lock:
        pending = asyncio.ensure_future(write_github(clients, "acme/app", _comment, 1, body="x"))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert not pending.done() and clients.requester.threads == []
    assert (await asyncio.wait_for(pending, 5))["body"] == {"body": "x"}
    assert threading.get_ident() not in clients.requester.threads


async def test_a_failed_write_key_lookup_is_mapped_without_a_request_name():
    clients = FakeClients()
    clients.key_fails = GithubException(502, {"message": "Bad Gateway"}, {}, None)
    with pytest.raises(ApplicationError) as info:
        await write_github(clients, "acme/app", _comment, 1, body="x")  # type: ignore[arg-type]
    assert info.value.type == "GitHubServerError" and not info.value.non_retryable
    assert info.value.message == "502 Bad Gateway" and clients.requester.threads == []
