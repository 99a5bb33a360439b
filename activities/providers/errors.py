"""Map the provider SDKs' exceptions to ModelCallError.

Temporal owns retries, so every failure must say whether another attempt can help and how long
to wait (the provider's Retry-After). Messages name the model and what to fix, in one line.
A conversation too long for the model's context window is a ContextTooLong: final as a request,
but the agent loop compacts the transcript and tries again. A streamed reply can also fail after
it started: an error event inside the 200 stream is retried unless its type says the request
itself is wrong, and a dropped stream is a connection failure (retried).
"""

from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

import anthropic
import openai

try:  # the HTTP library the installed SDKs are built on
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

from shopfloor.activities.providers.base import ContextTooLong
from shopfloor.errors import ModelCallError

# Statuses where the same request may succeed later: request timeout, conflict, rate limit,
# and every server-side failure (Anthropic's 529 "overloaded" included).
_RETRYABLE_STATUSES = {408, 409, 429}

_STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Request Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}

_MAX_DETAIL_CHARS = 500

# Error types (OpenAI's and Anthropic's) of an error event inside a stream that say the request
# itself is wrong, so another attempt cannot help; any other (overloaded_error, api_error,
# server_error, rate limits) is the provider's trouble and retried.
_FINAL_STREAM_ERRORS = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "invalid_api_key",
    "billing_error",
}

# How providers say the conversation does not fit the model's context window, in a 400:
# OpenAI's error code, and the messages of Anthropic ("prompt is too long: N tokens > M maximum",
# "input length and `max_tokens` exceed context limit: ..."), OpenAI and vLLM ("This model's
# maximum context length is N tokens ..."), OpenAI's newer APIs ("Your input exceeds the context
# window of this model") and llama.cpp ("the request exceeds the available context size").
_CONTEXT_TOO_LONG_CODES = {"context_length_exceeded", "exceed_context_size_error"}
_CONTEXT_TOO_LONG_TEXT = re.compile(
    r"prompt is too long"
    r"|maximum context length"
    r"|context[ _]length[ _]exceeded"
    r"|exceeds? the context window"
    r"|exceed context limit"
    r"|exceeds the available context size",
    re.IGNORECASE,
)


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _body_message(exc: Exception) -> str:
    """The provider's own explanation, from the error body when there is one."""
    body = getattr(exc, "body", None)
    detail: Any = None
    if isinstance(body, dict):
        # Anthropic keeps the whole body ({"type":"error","error":{...}}); the OpenAI SDK keeps
        # only the inner "error" object.
        inner = body.get("error", body)
        if isinstance(inner, dict):
            detail = inner.get("message") or inner.get("detail")
        elif isinstance(inner, str):
            detail = inner
        if detail is None:
            detail = body.get("message") or body.get("detail")
    elif isinstance(body, str):
        detail = body
    if not detail:
        detail = getattr(exc, "message", None) or str(exc)
    text = " ".join(str(detail).split())
    return text if len(text) <= _MAX_DETAIL_CHARS else text[:_MAX_DETAIL_CHARS] + "..."


def is_context_too_long(exc: openai.APIStatusError | anthropic.APIStatusError) -> bool:
    """Whether a provider's error answer says the conversation is too long for the model."""
    if exc.status_code != 400:
        return False
    codes = {getattr(exc, "code", None), getattr(exc, "type", None)}  # the OpenAI SDK's fields
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            codes |= {inner.get("code"), inner.get("type")}
    if codes & _CONTEXT_TOO_LONG_CODES:
        return True
    return bool(_CONTEXT_TOO_LONG_TEXT.search(_body_message(exc)))


def _status_hint(status: int, *, model: str, base_url: str, key_env: str) -> str:
    """What the status most likely means for the user, when the status alone does not say."""
    return {
        401: f"invalid API key (check {key_env}): ",
        402: "the account has no credit left: ",
        403: f"the API key may not use model {model!r} (check {key_env} and the account's access): ",
        404: f"model {model!r} not found at {base_url}: ",
        413: "the request is too large for the model: ",
    }.get(status, "")


def to_model_call_error(exc: BaseException, *, label: str, model: str, base_url: str, key_env: str) -> ModelCallError:
    """Translate one SDK (or unexpected) exception into a ModelCallError.

    `label` prefixes every message ("openai:gpt-4o"); `base_url` and `key_env` make 401/404
    messages say where the call went and which variable holds the key.
    """
    if isinstance(exc, ModelCallError):
        return exc
    # Timeouts first: they subclass the connection errors.
    if isinstance(exc, (openai.APITimeoutError, anthropic.APITimeoutError)):
        return ModelCallError(f"{label}: request to {base_url} timed out", retryable=True)
    if isinstance(exc, (openai.APIConnectionError, anthropic.APIConnectionError)):
        cause = exc.__cause__ or exc.__context__
        why = f": {type(cause).__name__}: {cause}" if cause else ""
        return ModelCallError(f"{label}: connection to {base_url} failed{why}", retryable=True)
    # A stream the SDK reads on without wrapping its transport's failures (a dropped connection).
    if isinstance(exc, httpx.TimeoutException):
        return ModelCallError(f"{label}: the reply from {base_url} timed out mid-stream", retryable=True)
    if isinstance(exc, httpx.TransportError):
        return ModelCallError(
            f"{label}: connection to {base_url} failed mid-reply: {type(exc).__name__}: {exc}", retryable=True
        )
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code < 400:
        return _stream_error(exc, label=label)  # an error event inside a 200 stream
    if isinstance(exc, (openai.APIStatusError, anthropic.APIStatusError)):
        status = exc.status_code
        if is_context_too_long(exc):
            return ContextTooLong(
                f"{label}: {status} {_STATUS_TEXT[400]}: the conversation is too long for model {model!r}: "
                f"{_body_message(exc)}",
                status=status,
            )
        retryable = status in _RETRYABLE_STATUSES or status >= 500
        reason = _STATUS_TEXT.get(status, "Error")
        hint = _status_hint(status, model=model, base_url=base_url, key_env=key_env)
        return ModelCallError(
            f"{label}: {status} {reason}: {hint}{_body_message(exc)}",
            retryable=retryable,
            status=status,
            retry_after=parse_retry_after(exc.response.headers) if retryable else None,
        )
    if isinstance(exc, (openai.APIResponseValidationError, anthropic.APIResponseValidationError)):
        # A garbled answer (a proxy cutting a body short, say) may well be fine next time.
        return ModelCallError(
            f"{label}: the server at {base_url} sent a reply that is not a valid response: {exc}",
            retryable=True,
            status=exc.status_code,
        )
    if isinstance(exc, openai.APIError):
        return _stream_error(exc, label=label)  # an error event inside the stream (the SDK's APIError)
    if isinstance(exc, (openai.OpenAIError, anthropic.AnthropicError)):
        return ModelCallError(f"{label}: {type(exc).__name__}: {exc}", retryable=False)
    # Anything else is a bug on our side (or a reply we cannot read): the same input would fail
    # the same way, so retrying only burns time.
    return ModelCallError(f"{label}: unexpected {type(exc).__name__} while calling the model: {exc}", retryable=False)


def _stream_error(exc: openai.APIError | anthropic.APIStatusError, *, label: str) -> ModelCallError:
    """An error event that arrived inside a streamed reply (its HTTP status was 200)."""
    body = getattr(exc, "body", None)
    kind: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        kind = (inner.get("type") or inner.get("code")) if isinstance(inner, dict) else None
    retryable = kind not in _FINAL_STREAM_ERRORS
    what = f" ({kind})" if isinstance(kind, str) and kind else ""
    return ModelCallError(f"{label}: the streamed reply failed{what}: {_body_message(exc)}", retryable=retryable)
