"""PyGithub clients for one worker, built once from Settings.

- Temporal owns retries (docs/design.md, Layout and import rules): PyGithub's urllib3 retries are
  off (`retry=None` means requests' default of 0) and so is its built-in throttle
  (`seconds_between_requests` / `seconds_between_writes` = None), which would otherwise sleep inside
  activities.
- Auth is a token, or a GitHub App: a JWT signed with the App's key finds the repository's
  installation (`GET /repos/{o}/{r}/installation`) and mints an installation token that
  PyGithub's AppInstallationAuth caches until it nears expiry (one cache per installation,
  shared by every thread). PyGithub's Requester is not thread-safe, so each worker thread
  gets its own Github client per installation.
- Writes go one at a time per installation (or per token), as GitHub's best practices ask, with
  an asyncio lock each.
Tokens and keys stay inside these objects: never in results, messages or logs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

import structlog
from github import Auth, Github, GithubException, GithubIntegration
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.conditional import ConditionalCache
from shopfloor.activities.github.errors import github_failure
from shopfloor.errors import UsageError
from shopfloor.models import failure_types
from shopfloor.settings import Settings

log = structlog.get_logger(__name__)

USER_AGENT = "shopfloor"
TIMEOUT_S = 30
PER_PAGE = 100
# In place of a repository: calls made as the GitHub App itself (its JWT), e.g. its own webhook's
# deliveries, which belong to no one installation.
APP_SCOPE = "(app)"


def _no_retries_no_throttle() -> dict[str, Any]:
    return {
        "retry": None,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "timeout": TIMEOUT_S,
        "user_agent": USER_AGENT,
        "per_page": PER_PAGE,
        "lazy": True,  # objects never fetch themselves behind our back
    }


# PyGithub logs whole responses at DEBUG (when someone turns the `github` logger up), and the
# response that mints an installation token holds the token. Scrub tokens from its records.
_TOKENS = re.compile(r'("token"\s*:\s*")[^"]+"|\bgh[opusr]_[A-Za-z0-9_]{16,}')


class _ScrubTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = _TOKENS.sub(lambda m: f'{m.group(1)}[redacted]"' if m.group(1) else "[redacted]", message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def _scrub_pygithub_logs() -> None:
    logger = logging.getLogger("github.Requester")
    if not any(isinstance(f, _ScrubTokens) for f in logger.filters):
        logger.addFilter(_ScrubTokens())


class _SerialTokenAuth(Auth.AppInstallationAuth):
    """AppInstallationAuth whose token refresh is single-flight: concurrent requests from worker
    threads would otherwise each mint a token when the cached one is missing or expiring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._refresh_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def token(self) -> str:
        with self._refresh_lock:
            return super().token


@dataclass
class Session:
    """A client for one repository's requests, and the key its writes serialize on."""

    github: Github
    key: str  # "token", "anonymous" or "installation:<id>"
    auth_hint: str
    remembered: ConditionalCache  # the worker's answers to repeated reads (conditional requests)


class GitHubClients:
    def __init__(self, settings: Settings) -> None:
        self.api_url = settings.github_api_url.rstrip("/")
        self.fallback_login = settings.github_bot_login
        self._token = settings.github_token.get_secret_value() if settings.github_token else None
        self._app_id = settings.github_app_id
        self._app_key = self._private_key(settings)
        # PyGithub's Requester is not thread-safe (its connection object holds the request being
        # sent), so each worker thread gets its own Github per key; the auth objects, and with
        # them the cached installation tokens, are shared.
        self._local = threading.local()
        self._guard = threading.Lock()
        self._integration_lock = threading.Lock()  # serializes use of the one GithubIntegration
        self._auths: dict[str, Auth.Auth | None] = {}
        self._installations: dict[str, int] = {}  # "owner/repo" -> installation id
        self._integration: GithubIntegration | None = None
        self._logins: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.remembered = ConditionalCache()
        self._opened: list[Github] = []
        _scrub_pygithub_logs()

    @staticmethod
    def _private_key(settings: Settings) -> str | None:
        if settings.github_app_private_key is not None:
            return settings.github_app_private_key.get_secret_value()
        path = settings.github_app_private_key_file
        if path is not None:
            try:
                return path.read_text()
            except OSError as exc:
                raise UsageError(f"SHOPFLOOR_GITHUB_APP_PRIVATE_KEY_FILE: cannot read {path}: {exc.strerror}") from None
        if settings.github_app_id is not None:
            raise UsageError(
                "SHOPFLOOR_GITHUB_APP_ID is set without the App's private key: set "
                "SHOPFLOOR_GITHUB_APP_PRIVATE_KEY or SHOPFLOOR_GITHUB_APP_PRIVATE_KEY_FILE"
            )
        return None

    @property
    def mode(self) -> str:
        if self._app_id is not None and self._app_key:
            return "app"
        return "token" if self._token else "anonymous"

    @property
    def auth_hint(self) -> str:
        return {
            "app": f"check SHOPFLOOR_GITHUB_APP_ID ({self._app_id}) and the App's private key",
            "token": "check SHOPFLOOR_GITHUB_TOKEN (expired, revoked, or for another server?)",
            "anonymous": "no GitHub credentials are configured: set SHOPFLOOR_GITHUB_TOKEN, or "
            "SHOPFLOOR_GITHUB_APP_ID with SHOPFLOOR_GITHUB_APP_PRIVATE_KEY(_FILE)",
        }[self.mode]

    def write_lock(self, key: str) -> asyncio.Lock:
        """The lock every write under one installation (or token) takes: one write at a time."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    # --- blocking: call from a worker thread -------------------------------------------------

    def write_key(self, repo: str) -> str:
        """What writes to `repo` serialize on; may look up the App installation (one request)."""
        if repo == APP_SCOPE:
            if self.mode != "app":
                raise ApplicationError(
                    "calls as the GitHub App (its webhook's deliveries) need SHOPFLOOR_GITHUB_APP_ID and the "
                    f"App's private key; this worker has {self.mode} credentials",
                    {"status": 401},
                    type=failure_types.GITHUB_BAD_CREDENTIALS,
                    non_retryable=True,
                )
            return "app"
        if self.mode != "app":
            return self.mode
        return f"installation:{self.installation_id(repo)}"

    def session(self, repo: str) -> Session:
        """This thread's client for `repo` ("owner/name")."""
        key = self.write_key(repo)
        clients: dict[str, Github] = getattr(self._local, "clients", None) or {}
        self._local.clients = clients
        gh = clients.get(key)
        if gh is None:
            gh = clients[key] = Github(base_url=self.api_url, auth=self._auth(key), **_no_retries_no_throttle())
            with self._guard:
                self._opened.append(gh)
        return Session(gh, key, self.auth_hint, self.remembered)

    def git_token(self, repo: str) -> str | None:
        """The token `git push`/`fetch` present for `repo` (None: no credentials), blocking: an
        App's installation token is looked up (and minted) as for API calls, from the same cache.
        For the caller to hand to git through its environment only; never log or return it."""
        if self.mode != "app":
            return self._token
        key = self.session(repo).key  # the auth mints through a client's requester: build it first
        auth = self._auth(key)
        assert isinstance(auth, Auth.AppInstallationAuth)
        return auth.token

    def _auth(self, key: str) -> Auth.Auth | None:
        with self._guard:
            if key not in self._auths:
                if key.startswith("installation:"):
                    installation_id = int(key.split(":", 1)[1])
                    self._auths[key] = _SerialTokenAuth(self._app_auth(), installation_id)
                elif key == "app":  # a fresh JWT per request, signed with the App's key
                    self._auths[key] = self._app_auth()
                else:
                    self._auths[key] = Auth.Token(self._token) if self._token else None
            return self._auths[key]

    def _app_auth(self) -> Auth.AppAuth:
        assert self._app_id is not None and self._app_key
        return Auth.AppAuth(self._app_id, self._app_key)

    def _app_call(self, fn: Any) -> Any:
        with self._integration_lock:
            if self._integration is None:
                self._integration = GithubIntegration(
                    base_url=self.api_url, auth=self._app_auth(), **_no_retries_no_throttle()
                )
            return fn(self._integration)

    def installation_id(self, repo: str) -> int:
        cached = self._installations.get(repo)
        if cached is not None:
            return cached
        owner, name = repo.split("/", 1)
        what = f"GET /repos/{repo}/installation"
        try:
            installation_id = int(self._app_call(lambda gi: gi.get_repo_installation(owner, name).id))
        except GithubException as exc:
            if exc.status == 404:
                raise ApplicationError(
                    f"{what}: 404 the GitHub App {self._app_id} is not installed on {repo}, or it does not exist",
                    {"status": 404},
                    type=failure_types.GITHUB_NOT_FOUND,
                    non_retryable=True,
                ) from None
            raise github_failure(exc, what, auth_hint=self.auth_hint) from None
        except Exception as exc:  # noqa: BLE001 - a bad key, a dropped connection: mapped, never raw
            raise github_failure(exc, what, auth_hint=self.auth_hint) from None
        self._installations[repo] = installation_id
        log.info("github app installation found", repo=repo, installation_id=installation_id)
        return installation_id

    def own_login(self, session: Session) -> str:
        """Who our writes are authored by: the App's bot, or the token's user.

        Comments and reviews are matched by marker *and* author, so a marker copied into
        someone else's comment never redirects our edits to it.
        """
        cached = self._logins.get(session.key)
        if cached is not None:
            return cached
        what = "GET /app" if self.mode == "app" else "GET /user"
        try:
            if self.mode == "app":
                login = f"{self._app_call(lambda gi: gi.get_app().slug)}[bot]"
            else:
                _, data = session.github.requester.requestJsonAndCheck("GET", "/user")
                login = str(data["login"])
        except GithubException as exc:
            if exc.status not in (403, 404):
                raise github_failure(exc, what, auth_hint=self.auth_hint) from None
            # A server without the endpoint, or a token without the scope.
            log.warning("cannot ask GitHub who we are; using the configured bot login", login=self.fallback_login)
            login = self.fallback_login
        except Exception as exc:  # noqa: BLE001 - a bad key, a dropped connection: mapped, never raw
            raise github_failure(exc, what, auth_hint=self.auth_hint) from None
        self._logins[session.key] = login
        return login

    def close(self) -> None:
        with self._guard:
            for gh in self._opened:
                gh.close()
            self._opened.clear()
        with self._integration_lock:
            if self._integration is not None:
                self._integration.close()
                self._integration = None
