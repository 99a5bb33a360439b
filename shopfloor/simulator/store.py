"""The simulator's in-memory state: plain records guarded by one lock.

Routes and workers take `store.lock` around every read-modify-write, so concurrent requests see
GitHub-like atomic updates. Git content itself lives in bare repositories on disk (git.repos);
only metadata is kept here.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shopfloor.simulator.git.repos import BareRepo

if TYPE_CHECKING:  # protection.py reads these records
    from shopfloor.simulator.protection import Protection

BOT_LOGIN = "shopfloor[bot]"
APP_SLUG = "shopfloor"
CI_APP_SLUG = "shopfloor-sim-ci"
PERMISSIONS = ("read", "triage", "write", "maintain", "admin")


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class User:
    id: int
    login: str
    type: str  # "User" | "Bot" | "Organization"
    created_at: datetime


@dataclass
class Label:
    id: int
    name: str
    color: str = "ededed"
    description: str | None = None
    default: bool = False


@dataclass
class Comment:
    id: int
    issue_number: int
    user: User
    body: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Review:
    id: int
    user: User
    body: str
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED
    commit_id: str
    submitted_at: datetime
    comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PullRequest:
    id: int
    head_ref: str
    head_sha: str
    base_ref: str
    head_repo: Repo | None = None  # a fork the head branch lives in; None: the base repository
    draft: bool = False
    maintainer_can_modify: bool = True
    merged: bool = False
    merged_at: datetime | None = None
    merged_by: User | None = None
    merge_commit_sha: str | None = None
    # The base tip when the PR was merged or closed: its diff stays what it was, as on GitHub.
    frozen_base_sha: str | None = None
    reviews: list[Review] = field(default_factory=list)
    # (head, base tip) GitHub's background job last computed `mergeable` for: a read of the pull
    # request after either moves answers null and starts the job, as on GitHub.
    mergeability_for: tuple[str, str] | None = None


@dataclass
class Issue:
    """An issue or, with `pr` set, a pull request: they share one number sequence per repo."""

    id: int
    number: int
    title: str
    body: str | None
    user: User
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    closed_by: User | None = None
    labels: list[Label] = field(default_factory=list)
    assignees: list[User] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    pr: PullRequest | None = None
    search_index: Any = None  # what search sees of it (search_index.Indexed), once indexed


@dataclass
class CommitStatus:
    id: int
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: User
    created_at: datetime
    updated_at: datetime


@dataclass
class CheckSuite:
    id: int
    head_sha: str
    head_branch: str | None
    app_slug: str
    before: str | None
    after: str | None
    created_at: datetime
    updated_at: datetime


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    suite: CheckSuite
    status: str
    conclusion: str | None
    started_at: datetime
    completed_at: datetime | None
    output: dict[str, Any]
    external_id: str | None = None
    details_url: str | None = None


@dataclass
class Hook:
    id: int
    repo_id: int
    url: str
    secret: str | None
    content_type: str = "json"
    insecure_ssl: str = "0"
    events: list[str] = field(default_factory=lambda: ["push"])
    active: bool = True
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    last_response: dict[str, Any] = field(default_factory=lambda: {"code": None, "status": "unused", "message": None})
    # Set on the GitHub App's own webhook (`Store.app_hook`, repo_id 0): it hears every repository
    # the App is installed on, and its deliveries name the App ("integration") as their target.
    app_id: int | None = None


@dataclass
class Delivery:
    id: int
    guid: str
    hook_id: int
    event: str
    action: str | None
    repository_id: int | None
    installation_id: int | None
    url: str
    request_headers: dict[str, str]
    body: bytes  # the exact bytes sent (and signed)
    payload: dict[str, Any]
    redelivery: bool = False
    delivered_at: datetime | None = None
    status: str = "pending"
    status_code: int = 0
    duration: float = 0.0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None


@dataclass
class Repo:
    id: int
    owner: User
    name: str
    git: BareRepo
    default_branch: str
    private: bool
    ci_command: str | None
    created_at: datetime
    updated_at: datetime
    pushed_at: datetime
    description: str | None = None
    # Run `ci_command` on every push to the default branch too (as a workflow `on: push` to main
    # does), not only on pull request heads.
    ci_on_default_branch: bool = False
    parent: Repo | None = None  # set on a fork: the repository it was forked from
    labels: dict[str, Label] = field(default_factory=dict)  # by lower-cased name
    issues: dict[int, Issue] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> permission
    statuses: list[CommitStatus] = field(default_factory=list)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    check_suites: dict[int, CheckSuite] = field(default_factory=dict)
    hooks: dict[int, Hook] = field(default_factory=dict)
    protections: dict[str, Protection] = field(default_factory=dict)  # by branch name

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1


@dataclass
class InstallationToken:
    token: str
    installation_id: int
    expires_at: datetime


@dataclass
class Attachment:
    """A file uploaded the way people attach screenshots to an issue (GitHub's "user-attachments")."""

    data: bytes
    content_type: str
    redirect: str | None = None  # answer 302 to this instead (GitHub sends uploads on to its image hosts)


class Store:
    """All records. Ids come from one counter, so every id is unique across kinds."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)
        self.users: dict[str, User] = {}  # by lower-cased login
        self.repos: dict[str, Repo] = {}  # by lower-cased "owner/name"
        self.installations: dict[str, int] = {}  # owner login (lower) -> installation id
        self.tokens: dict[str, InstallationToken] = {}
        self.deliveries: list[Delivery] = []
        self.app_hook: Hook | None = None  # the App's own webhook, set by PATCH /app/hook/config
        self.requests: list[dict[str, Any]] = []
        self.attachments: dict[str, Attachment] = {}  # by asset id

    def new_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def user(self, login: str, *, type: str = "User") -> User:
        """The user named `login`, created on first use (GitHub logins are case-insensitive)."""
        with self.lock:
            found = self.users.get(login.lower())
            if found is None:
                found = User(id=self.new_id(), login=login, type=type, created_at=now())
                self.users[login.lower()] = found
            return found

    def find_user(self, login: str) -> User | None:
        with self.lock:
            return self.users.get(login.lower())

    def repo(self, owner: str, name: str) -> Repo | None:
        with self.lock:
            return self.repos.get(f"{owner}/{name}".lower())

    def installation_id(self, owner_login: str) -> int:
        """One installation of the app per repository owner, with a stable id."""
        with self.lock:
            key = owner_login.lower()
            if key not in self.installations:
                self.installations[key] = self.new_id()
            return self.installations[key]

    def hook(self, hook_id: int) -> Hook | None:
        """A repository's hook or the App's own one, by id (ids are unique across kinds)."""
        with self.lock:
            if self.app_hook is not None and self.app_hook.id == hook_id:
                return self.app_hook
            for repo in self.repos.values():
                if hook_id in repo.hooks:
                    return repo.hooks[hook_id]
            return None

    def clear(self) -> None:
        with self.lock:
            self.users.clear()
            self.repos.clear()
            self.installations.clear()
            self.tokens.clear()
            self.deliveries.clear()
            self.app_hook = None
            self.requests.clear()
            self.attachments.clear()
