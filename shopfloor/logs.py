"""Logging: structlog for our code, the stdlib `logging` tree routed through the same renderer.

One line per event on stderr — a console layout on a terminal, JSON lines otherwise. Temporal's
workflow/activity ids become plain keys, and secrets are redacted from every event on the way
out (secrets never enter logs: docs/design.md, Trust and safety).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from shopfloor.errors import UsageError

REDACTED = "[redacted]"

# The ids the Temporal SDK's LoggerAdapters put in `extra` (temporalio.activity.LoggerAdapter:
# "temporal_activity"; temporalio.workflow.LoggerAdapter: "temporal_workflow").
_TEMPORAL_EXTRAS = ("temporal_workflow", "temporal_activity")
_TEMPORAL_KEYS = {
    "workflow_id": "workflow_id",
    "run_id": "run_id",
    "workflow_run_id": "run_id",  # the activity adapter's name for the workflow's run id
    "workflow_type": "workflow_type",
    "activity_id": "activity_id",
    "activity_type": "activity_type",
    "attempt": "attempt",
    "task_queue": "task_queue",
    "namespace": "namespace",
    "update_id": "update_id",
    "update_name": "update_name",
}
# Record attributes that only repeat the event: uvicorn's colored copy of the message, and the
# `message`/`asctime` another handler's formatter may have set on the shared record first.
_DROPPED_EXTRAS = ("color_message", "message", "asctime", *_TEMPORAL_EXTRAS)

# A key is secret when its last word is one of these ("github_token", "apiKey", "Set-Cookie"),
# or "key"/"keys" after one of _KEY_QUALIFIERS ("api_key", "private-key"). Judging by the last
# word keeps counters such as "input_tokens" or "token_count" visible.
_SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "dsn",
        "passphrase",
        "passwd",
        "password",
        "pwd",
        "secret",
        "secrets",
        "token",
    }
)
_KEY_QUALIFIERS = frozenset({"access", "api", "client", "encryption", "private", "secret", "session", "signing"})
_WORD_RE = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def is_secret_key(key: str) -> bool:
    words = [w.lower() for w in _WORD_RE.findall(key)]
    if not words:
        return False
    if words[-1] in _SECRET_WORDS:
        return True
    return words[-1] in ("key", "keys") and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


class Redactor:
    """Processor: secret-named keys -> "[redacted]"; known secret values cut out of all text."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        values = sorted({s for s in secrets if s}, key=len, reverse=True)  # longest first
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return {k: self._value(k, v) for k, v in event_dict.items()}

    def _value(self, key: Any, value: Any) -> Any:
        if isinstance(key, str) and is_secret_key(key) and value is not None:
            return REDACTED
        return self._scrub(value)

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._pattern.sub(REDACTED, value) if self._pattern else value
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, Mapping):
            return {k: self._value(k, v) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self._scrub(v) for v in value]
        # Anything else is rendered by repr; replace it only when that text holds a secret.
        if self._pattern is not None and self._pattern.search(text := repr(value)):
            return self._pattern.sub(REDACTED, text)
        return value


def add_temporal_ids(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Flatten the Temporal SDK's `temporal_workflow`/`temporal_activity` dicts into keys."""
    record = event_dict.get("_record")
    for attr in _TEMPORAL_EXTRAS:
        event_dict.pop(attr, None)
        details = getattr(record, attr, None)
        if not isinstance(details, Mapping):
            continue
        for name, value in details.items():
            key = _TEMPORAL_KEYS.get(name)
            if key is not None and value is not None:
                event_dict.setdefault(key, value)  # the caller's own keys win
        # The adapters also append the same dict to the message; the keys carry it now.
        event = event_dict.get("event")
        suffix = f" ({dict(details)})"
        if isinstance(event, str) and event.endswith(suffix):
            event_dict["event"] = event[: -len(suffix)]
    return event_dict


def _drop_noise(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    for key in _DROPPED_EXTRAS:
        event_dict.pop(key, None)
    return event_dict


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is at emit time (redirections, pytest's capture)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always sys.stderr


def _stderr_is_tty() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # no stderr at all, or a closed one
        return False


def _level_number(level: str) -> int:
    number = logging.getLevelNamesMapping().get(str(level).strip().upper())
    if number is None:
        raise UsageError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    return number


def configure_logging(*, level: str = "INFO", json: bool | None = None, secrets: Sequence[str] = ()) -> None:
    """Configure structlog and the stdlib root logger. Safe to call again: it replaces, never adds."""
    level_no = _level_number(level)
    tty = _stderr_is_tty()
    if json is None:
        json = not tty

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: a later configure_logging (new level, new secrets) reaches every logger.
        cache_logger_on_first_use=False,
    )

    renderer: Processor = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=tty)
    formatter = structlog.stdlib.ProcessorFormatter(
        # Records from `logging` (temporalio, uvicorn, botocore ...) get the same keys as ours.
        foreign_pre_chain=[
            *shared,
            structlog.stdlib.ExtraAdder(),
            add_temporal_ids,
            _drop_noise,
            structlog.processors.StackInfoRenderer(),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # Tracebacks become text before redaction, so secrets in them are scrubbed too.
            structlog.processors.format_exc_info,
            Redactor(secrets),
            renderer,
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    handler.set_name("shopfloor")

    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "shopfloor"]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level_no)
