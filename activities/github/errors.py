"""Map PyGithub's exceptions (and dropped connections) onto Temporal's retry semantics.

Temporal owns retries (docs/design.md, Layout and import rules): PyGithub's own are off, and each
failure says here whether another attempt can help and when. GitHub's rules
(docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api):
- `retry-after` present: wait that many seconds (secondary rate limits);
- else `x-ratelimit-remaining: 0`: wait until `x-ratelimit-reset` (primary rate limit);
- else a secondary-limit message without headers: wait at least a minute.
Messages are one line naming the request; they never hold a token (none is ever passed in).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import requests
from github import GithubException
from github.Requester import Requester
from temporalio.exceptions import ApplicationError

from shopfloor.models import failure_types

# A primary rate limit resets hourly. Waiting longer than this in one go risks outliving the
# caller's schedule-to-close budget for nothing; a retry that comes too early costs one request
# and gets a fresh (shorter) delay.
MAX_RATE_LIMIT_WAIT_S = 15 * 60
SECONDARY_LIMIT_DEFAULT_WAIT_S = 60.0  # GitHub: "wait for at least one minute"
_MAX_DETAIL_CHARS = 300

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if key.lower() == name:
            return str(value)
    return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def rate_limit_delay(status: int, headers: Any, message: str = "", *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying a rate-limited request; None when it is not rate limited."""
    if status not in (403, 429):
        return None
    retry_after = _float(_header(headers, "retry-after"))
    if retry_after is not None:
        return max(1.0, retry_after)
    if _header(headers, "x-ratelimit-remaining") == "0":
        reset = _float(_header(headers, "x-ratelimit-reset"))
        if reset is not None:
            wait = reset - (time.time() if now is None else now)
            return min(max(1.0, wait), MAX_RATE_LIMIT_WAIT_S)
        return SECONDARY_LIMIT_DEFAULT_WAIT_S
    if Requester.isRateLimitError(message.lower()):
        return SECONDARY_LIMIT_DEFAULT_WAIT_S
    return None


def _message(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"]
    if isinstance(data, (str, bytes)):
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return " ".join(text.split())[:_MAX_DETAIL_CHARS]
    return ""


def validation_summary(data: Any) -> str:
    """GitHub's 422 `errors` list in one line: "Validation Failed: PullRequest.head invalid; ..."."""
    parts: list[str] = []
    errors = data.get("errors") if isinstance(data, dict) else None
    for err in errors or []:
        if isinstance(err, str):
            parts.append(err)
        elif isinstance(err, dict):
            if err.get("message"):
                parts.append(str(err["message"]))
            else:
                where = ".".join(str(err[k]) for k in ("resource", "field") if err.get(k))
                parts.append(" ".join(p for p in (where, str(err.get("code", ""))) if p))
    head = _message(data) or "Validation Failed"
    return f"{head}: {'; '.join(parts)}" if parts else head


def _failure(what: str, status: int | None, text: str, type_: str, *, retryable: bool, delay: float | None = None):
    message = f"{what}: {text}" if what else text
    if len(message) > 2 * _MAX_DETAIL_CHARS:
        message = message[: 2 * _MAX_DETAIL_CHARS] + "…"
    return ApplicationError(
        message,
        {"status": status} if status is not None else None,
        type=type_,
        non_retryable=not retryable,
        next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
    )


def github_failure(
    exc: BaseException, what: str = "", *, auth_hint: str = "", now: float | None = None
) -> ApplicationError:
    """One exception from a GitHub call -> the ApplicationError Temporal retries (or not).

    `what` names the request ("PUT /repos/o/r/pulls/7/merge"); `auth_hint` says where the
    credentials come from, for 401s.
    """
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, GithubException):
        return _status_failure(exc.status, exc.headers, exc.data, what, auth_hint=auth_hint, now=now)
    if isinstance(exc, (requests.exceptions.RequestException, ConnectionError, TimeoutError)):
        # Timeouts, refused and dropped connections, cut-off bodies: the next attempt may well work.
        return _failure(
            what, None, f"GitHub unreachable: {type(exc).__name__}", failure_types.GITHUB_UNAVAILABLE, retryable=True
        )
    return _failure(
        what, None, f"unexpected {type(exc).__name__}: {exc}", failure_types.GITHUB_UNEXPECTED, retryable=False
    )


def _status_failure(
    status: int, headers: Any, data: Any, what: str, *, auth_hint: str, now: float | None
) -> ApplicationError:
    message = _message(data)
    reason = _REASONS.get(status, "Error")
    detail = f" ({message})" if message and message.lower() != reason.lower() else ""
    delay = rate_limit_delay(status, headers, message, now=now)
    if delay is not None:
        return _failure(
            what,
            status,
            f"{status} rate limited by GitHub{detail}; retrying in {delay:.0f} s",
            failure_types.GITHUB_RATE_LIMITED,
            retryable=True,
            delay=delay,
        )
    if status == 429 or status == 408 or status >= 500:
        return _failure(what, status, f"{status} {reason}{detail}", failure_types.GITHUB_SERVER_ERROR, retryable=True)
    is_merge = what.startswith("PUT ") and what.endswith("/merge")
    if status == 401:
        hint = f": {auth_hint}" if auth_hint else ": check the configured GitHub token or App credentials"
        return _failure(
            what, status, f"401 Bad credentials{hint}", failure_types.GITHUB_BAD_CREDENTIALS, retryable=False
        )
    if status == 404:
        return _failure(
            what,
            status,
            f"404 Not Found{detail}: the repository or number is wrong, or the credentials cannot see it",
            failure_types.GITHUB_NOT_FOUND,
            retryable=False,
        )
    if status == 422:
        return _failure(
            what, status, f"422 {validation_summary(data)}", failure_types.GITHUB_VALIDATION, retryable=False
        )
    if status == 409 and is_merge:
        return _failure(
            what,
            status,
            f"409 the pull request's head moved since it was reviewed{detail}",
            failure_types.GITHUB_HEAD_CHANGED,
            retryable=False,
        )
    if status == 405 and is_merge:
        text = f"405 the pull request is not mergeable{detail}"
        return _failure(what, status, text, failure_types.GITHUB_NOT_MERGEABLE, retryable=False)
    if status == 403:
        text = f"403 Forbidden{detail}: the credentials lack permission for this"
        return _failure(what, status, text, failure_types.GITHUB_FORBIDDEN, retryable=False)
    return _failure(what, status, f"{status} {reason}{detail}", failure_types.GITHUB_REQUEST_FAILED, retryable=False)
