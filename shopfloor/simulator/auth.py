"""Who is calling, from the `Authorization` header, and what they may do on a repository.

- `token user:<login>` (or `Bearer user:<login>`) acts as that human user, created on first use;
  tests act as named people through GitHub's normal API this way (no special endpoint needed).
- `ghs_…` must be an installation token this simulator minted and that has not expired; it acts
  as the installed app's bot, `shopfloor[bot]`.
- a token in the configuration's `bot_tokens` (the bot's personal token) acts as that bot too.
- anything else is a 401 "Bad credentials", as GitHub answers a token it does not know.
- App endpoints (`GET /app`, installation look-ups, minting tokens) need a `Bearer <JWT>` signed
  RS256 by the app: verified with the configured public key for its `iss`, otherwise any
  well-formed JWT whose `exp` lies in the future is accepted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import jwt

from shopfloor.simulator.config import SimulatorConfig
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.git.pre_receive import PushRules
from shopfloor.simulator.store import BOT_LOGIN, PERMISSIONS, Repo, Store, User, now

DOCS_AUTH = "https://docs.github.com/rest/overview/authenticating-to-the-rest-api"
BAD_CREDENTIALS = "Bad credentials"
RANK = {p: i for i, p in enumerate(PERMISSIONS)}


@dataclass(frozen=True)
class Actor:
    user: User
    kind: str  # "user" | "bot"
    token_key: str  # a digest of the token: the rate-limit bucket key, never the token itself

    @property
    def login(self) -> str:
        return self.user.login


def token_of(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in ("token", "bearer") or not value.strip():
        return None
    return value.strip()


def _key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def authenticate(store: Store, config: SimulatorConfig, header: str | None) -> Actor:
    """The actor for an API request; raises 401 GitHubError when missing or bad."""
    token = token_of(header)
    if token is None:
        raise GitHubError(401, "Requires authentication", docs=DOCS_AUTH)
    if token.startswith("user:"):
        login = token.removeprefix("user:").strip()
        if not login or login.lower() == BOT_LOGIN:
            raise GitHubError(401, BAD_CREDENTIALS, docs=DOCS_AUTH)
        return Actor(store.user(login), "user", _key(token))
    if token.startswith("ghs_"):
        with store.lock:
            minted = store.tokens.get(token)
            if minted is None or minted.expires_at <= now():
                raise GitHubError(401, BAD_CREDENTIALS, docs=DOCS_AUTH)
    elif not config.is_bot_token(token):
        raise GitHubError(401, BAD_CREDENTIALS, docs=DOCS_AUTH)
    return Actor(store.user(BOT_LOGIN, type="Bot"), "bot", _key(token))


def login_for_git(store: Store, config: SimulatorConfig, header: str | None) -> str | None:
    """The login behind git's Basic-auth password (handed to us as `token <password>`)."""
    try:
        return authenticate(store, config, header).login
    except GitHubError:
        return None


def app_jwt(config: SimulatorConfig, header: str | None) -> int:
    """The app id of a valid app JWT in `header`; 401 otherwise."""
    token = token_of(header)
    if token is None:
        raise GitHubError(401, "Requires authentication", docs=DOCS_AUTH)
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
        issuer = int(str(claims["iss"]))
        key = config.app_public_keys.get(issuer)
        if key is not None:
            claims = jwt.decode(token, key, algorithms=["RS256"], options={"require": ["exp", "iat", "iss"]})
        else:
            header_alg = jwt.get_unverified_header(token).get("alg")
            if header_alg != "RS256" or "exp" not in claims:
                raise jwt.InvalidTokenError("expected an RS256 JWT with exp")
            if float(claims["exp"]) <= now().timestamp():
                raise jwt.ExpiredSignatureError("expired")
    except jwt.ExpiredSignatureError:
        raise GitHubError(
            401,
            "'Expiration time' claim ('exp') must be a numeric value representing the "
            "future time at which the assertion expires",
            docs=DOCS_AUTH,
        ) from None
    except (jwt.InvalidTokenError, KeyError, ValueError, TypeError):
        raise GitHubError(401, "A JSON web token could not be decoded", docs=DOCS_AUTH) from None
    return issuer


def permission(repo: Repo, user: User) -> str | None:
    """GitHub's effective permission: owner admin, the installed bot write, collaborators as set,
    anyone else read on a public repository and nothing on a private one."""
    if user.id == repo.owner.id:
        return "admin"
    explicit = repo.collaborators.get(user.login.lower())
    if user.login == BOT_LOGIN and repo.parent is None:  # the app is not installed on people's forks
        return explicit if explicit and RANK[explicit] > RANK["write"] else "write"
    if explicit:
        return explicit
    return None if repo.private else "read"


def can(repo: Repo, user: User, needed: str) -> bool:
    have = permission(repo, user)
    return have is not None and RANK[have] >= RANK[needed]


def require(repo: Repo, actor: Actor, needed: str) -> None:
    """403 in GitHub's words when `actor` lacks `needed` on `repo`."""
    if can(repo, actor.user, needed):
        return
    if actor.kind == "bot":
        raise GitHubError(403, "Resource not accessible by integration")
    if needed == "admin":
        raise GitHubError(403, "Must have admin rights to Repository.")
    raise GitHubError(
        403,
        "Resource not accessible by personal access token"
        if needed in ("write", "maintain")
        else "Must have triage rights to Repository.",
    )


def push_rules(config: SimulatorConfig, repo: Repo, user: User) -> PushRules:
    """What GitHub refuses of `user`'s pushes to `repo` even with write access: the App's bot
    may not change workflow files without the App's `workflows` permission, and protected
    branches take what their rules allow (protection.py)."""
    admin = permission(repo, user) == "admin"
    return PushRules(
        may_change_workflows=user.login != BOT_LOGIN or config.app_may("workflows"),
        protected={branch: rule.push_refusals(user, admin) for branch, rule in repo.protections.items()},
    )
