"""PyGithub's exceptions map onto Temporal's retry semantics: rate limits wait what GitHub asks,
5xx and dropped connections retry, the rest fail at once with one clear line."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from github import (
    BadCredentialsException,
    GithubException,
    RateLimitExceededException,
    UnknownObjectException,
)

from shopfloor.activities.github.errors import (
    MAX_RATE_LIMIT_WAIT_S,
    github_failure,
    rate_limit_delay,
)

pytestmark = pytest.mark.fast

NOW = 1_700_000_000.0
TOKEN = "ghs_0123456789abcdefghijklmnopqrstuvwxyzAB"


def exc(status: int, message: str | None = None, headers: dict | None = None, **data) -> GithubException:
    body = {"message": message, **data} if message is not None else (data or None)
    return GithubException(status, body, headers or {}, None)


def failure(e: BaseException, what: str = "POST /repos/acme/app/issues/7/comments", **kw):
    return github_failure(e, what, now=NOW, **kw)


def test_secondary_rate_limit_waits_retry_after():
    f = failure(exc(403, "You have exceeded a secondary rate limit", {"retry-after": "42"}))
    assert f.type == "GitHubRateLimited" and not f.non_retryable
    assert f.next_retry_delay == timedelta(seconds=42)
    assert f.message.startswith("POST /repos/acme/app/issues/7/comments: 403 rate limited by GitHub")


def test_429_with_retry_after_waits_it():
    f = failure(exc(429, "too many", {"Retry-After": "3"}))  # header names in any case
    assert not f.non_retryable and f.next_retry_delay == timedelta(seconds=3)


def test_retry_after_wins_over_the_primary_reset():
    headers = {"retry-after": "5", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 600)}
    assert failure(exc(403, "x", headers)).next_retry_delay == timedelta(seconds=5)


def test_primary_rate_limit_waits_until_the_reset():
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 120)}
    f = failure(RateLimitExceededException(403, {"message": "API rate limit exceeded for 1.2.3.4."}, headers))
    assert f.type == "GitHubRateLimited" and not f.non_retryable
    assert f.next_retry_delay == timedelta(seconds=120)


def test_primary_rate_limit_delay_is_at_least_a_second_and_capped():
    past = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 30)}
    assert failure(exc(403, "API rate limit exceeded", past)).next_retry_delay == timedelta(seconds=1)
    far = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 7200)}
    assert failure(exc(429, "API rate limit exceeded", far)).next_retry_delay == timedelta(
        seconds=MAX_RATE_LIMIT_WAIT_S
    )
    assert MAX_RATE_LIMIT_WAIT_S == 900


def test_secondary_limit_message_without_headers_waits_a_minute():
    f = failure(exc(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."))
    assert not f.non_retryable and f.next_retry_delay == timedelta(seconds=60)


def test_rate_limit_delay_ignores_other_statuses():
    assert rate_limit_delay(500, {"retry-after": "9"}) is None
    assert rate_limit_delay(403, {}, "Resource not accessible by integration") is None


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_retry_with_the_policy_backoff(status):
    f = failure(exc(status, "Server Error"))
    assert f.type == "GitHubServerError" and not f.non_retryable and f.next_retry_delay is None
    assert f"{status}" in f.message


def test_429_without_any_hint_retries_with_the_policy_backoff():
    f = failure(exc(429, "slow down"))
    assert not f.non_retryable and f.next_retry_delay is None


@pytest.mark.parametrize(
    "error",
    [
        requests.exceptions.ConnectionError("Connection refused"),
        requests.exceptions.ReadTimeout("read timed out"),
        requests.exceptions.ChunkedEncodingError("cut short"),
        ConnectionResetError(104, "reset by peer"),
    ],
)
def test_connection_errors_retry(error):
    f = failure(error, "GET /repos/acme/app/pulls")
    assert f.type == "GitHubUnavailable" and not f.non_retryable and f.next_retry_delay is None
    assert f.message.startswith("GET /repos/acme/app/pulls: GitHub unreachable")


def test_not_found_names_the_request_and_the_likely_causes():
    f = failure(UnknownObjectException(404, {"message": "Not Found"}, {}), "GET /repos/acme/app/issues/99")
    assert f.type == "GitHubNotFound" and f.non_retryable
    assert f.message == (
        "GET /repos/acme/app/issues/99: 404 Not Found: "
        "the repository or number is wrong, or the credentials cannot see it"
    )
    assert "\n" not in f.message


def test_validation_errors_are_summarized():
    e = exc(
        422,
        "Validation Failed",
        errors=[
            {"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:x."},
            {"resource": "Label", "field": "name", "code": "invalid"},
            "plain text error",
        ],
    )
    f = failure(e, "POST /repos/acme/app/pulls")
    assert f.type == "GitHubValidation" and f.non_retryable
    assert f.message == (
        "POST /repos/acme/app/pulls: 422 Validation Failed: "
        "A pull request already exists for acme:x.; Label.name invalid; plain text error"
    )


def test_bad_credentials_say_where_credentials_come_from():
    f = failure(
        BadCredentialsException(401, {"message": "Bad credentials"}, {}), auth_hint="check SHOPFLOOR_GITHUB_TOKEN"
    )
    assert f.type == "GitHubBadCredentials" and f.non_retryable
    assert f.message.endswith("401 Bad credentials: check SHOPFLOOR_GITHUB_TOKEN")


def test_other_forbidden_is_final():
    f = failure(exc(403, "Resource not accessible by integration"))
    assert f.type == "GitHubForbidden" and f.non_retryable and f.next_retry_delay is None
    assert "Resource not accessible by integration" in f.message


def test_merge_conflict_statuses():
    moved = failure(
        exc(409, "Head branch was modified. Review and try the merge again."), "PUT /repos/a/b/pulls/3/merge"
    )
    assert moved.type == "GitHubHeadChanged" and moved.non_retryable
    blocked = failure(exc(405, "Pull Request is not mergeable"), "PUT /repos/a/b/pulls/3/merge")
    assert blocked.type == "GitHubNotMergeable" and blocked.non_retryable
    assert "not mergeable" in blocked.message
    # The same statuses elsewhere are ordinary failures.
    assert failure(exc(409, "Conflict"), "PUT /repos/a/b/contents/x").type == "GitHubRequestFailed"


def test_unexpected_exceptions_are_final_and_one_line():
    f = failure(KeyError("sha"), "PUT /repos/a/b/pulls/3/merge")
    assert f.type == "GitHubUnexpected" and f.non_retryable and "KeyError" in f.message


def test_no_token_or_header_reaches_the_message():
    # GitHub's responses do not echo tokens, but headers travel on the exception: none are used.
    e = exc(500, "boom", {"authorization": f"token {TOKEN}", "x-github-request-id": "AB:CD"})
    f = failure(e)
    assert TOKEN not in f.message and TOKEN not in str(f.details) and f.__cause__ is None


def test_a_long_body_is_cut():
    f = failure(GithubException(502, "<html>" + "x" * 5000 + "</html>", {}))
    assert len(f.message) < 700 and not f.non_retryable
