"""Alert sources, normalized: Alertmanager, Sentry and generic JSON bodies become `Alert`s.

Pure functions (no I/O): the router verifies the sender, then calls `parse_alerts`. Every text a
sender controls passes through `sanitize` and is capped, because it ends up in workflow history
and, later, in a model's prompt (docs/design.md, Trust and safety). The per-source parsers live in
`alert_<source>.py`; this module holds what they share: the error type, text helpers, routing and
delivery ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shopfloor.agents.untrusted_text import sanitize
from shopfloor.models.inbox import REPO_PATTERN, Alert, safe_fingerprint

SOURCES = ("alertmanager", "sentry", "generic")

SUMMARY_MAX = 300
DESCRIPTION_MAX = 4000
LABELS_MAX = 64
LABEL_KEY_MAX = 128
LABEL_VALUE_MAX = 512
LINKS_MAX = 10
LINK_MAX = 2000
FINGERPRINT_MAX = 512


class AlertPayloadError(ValueError):
    """The body is not a valid notification of its source. The message is safe to return (400)."""


class AlertRoutesError(ValueError):
    """SHOPFLOOR_ALERT_ROUTES is invalid: raised when the app is built, not on a delivery."""


@dataclass
class ParsedDelivery:
    """What one HTTP delivery carried: its alerts, or why it was ignored (e.g. Sentry installs)."""

    alerts: list[Alert] = field(default_factory=list)
    ignored: str | None = None


# --- text -------------------------------------------------------------------------------------


def clean_text(value: Any, limit: int) -> str:
    """Sanitized text capped at `limit` characters ("…" marks a cut)."""
    if value is None:
        return ""
    text = sanitize(value if isinstance(value, str) else str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(value: Any, limit: int = SUMMARY_MAX) -> str:
    """A summary: sanitized, whitespace (newlines included) collapsed to single spaces, capped."""
    if value is None:
        return ""
    text = " ".join(sanitize(value if isinstance(value, str) else str(value)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clean_labels(raw: Mapping[str, Any] | None) -> dict[str, str]:
    """Sender labels as str → str, sanitized and bounded; None values are dropped."""
    labels: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if value is None or value == "" or len(labels) >= LABELS_MAX:
            continue  # an empty label is an absent one (as in Prometheus)
        k = one_line(key, LABEL_KEY_MAX)
        if k:
            labels[k] = one_line(value, LABEL_VALUE_MAX)
    return labels


def clean_links(*candidates: Any) -> list[str]:
    """http(s) URLs only (a `javascript:` link has no business in an issue), de-duplicated."""
    links: list[str] = []
    for candidate in candidates:
        if not isinstance(candidate, str):
            continue
        url = clean_text(candidate, LINK_MAX)
        if re.match(r"^https?://\S+$", url, re.IGNORECASE) and url not in links:
            links.append(url)
    return links[:LINKS_MAX]


def clean_fingerprint(raw: Any) -> str:
    """The sender's fingerprint; hashed (stably) when it carries hidden or control characters."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise AlertPayloadError("fingerprint must be a string")
    text = str(raw).strip()
    if not text:
        raise AlertPayloadError("fingerprint must not be empty")
    if len(text) > FINGERPRINT_MAX:
        raise AlertPayloadError(f"fingerprint is longer than {FINGERPRINT_MAX} characters")
    # Kept readable when plain; anything a sanitizer would change is replaced by its hash, so no
    # hidden text reaches workflow ids or history.
    if sanitize(text) != text or not text.isprintable():
        return safe_fingerprint(text)
    return text


def labels_fingerprint(labels: Mapping[str, str]) -> str:
    """A stable fingerprint from sorted labels, for senders that give none."""
    canonical = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return "labels-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def parse_time(value: Any, what: str) -> datetime | None:
    """An RFC 3339 time (or epoch seconds); None when absent or Alertmanager's zero time."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise AlertPayloadError(f"{what} is not an RFC 3339 time")
    try:
        if isinstance(value, (int, float)):
            when = datetime.fromtimestamp(value, tz=UTC)
        elif isinstance(value, str):
            text = value.strip()
            if text.endswith(("Z", "z")):
                text = text[:-1] + "+00:00"
            when = datetime.fromisoformat(text)
        else:
            raise TypeError
    except (TypeError, ValueError, OverflowError, OSError):
        # The value is not echoed: error messages are logged, and bodies never are.
        raise AlertPayloadError(f"{what} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    # Alertmanager's Go zero time (0001-01-01T00:00:00Z) means "unset".
    return None if when.year <= 1 else when


# --- JSON -------------------------------------------------------------------------------------


def load_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise AlertPayloadError(f"body is not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    except RecursionError:  # a body of nested brackets: json would otherwise surface a 500
        raise AlertPayloadError("body is nested too deeply") from None


def require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AlertPayloadError(f"{what} must be a JSON object")
    return value


def optional_object(value: Any, what: str) -> dict[str, Any]:
    return {} if value is None else require_object(value, what)


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def delivery_id(source: str, alert: Alert, digest: str, *extra: str) -> str:
    """A stable id of one notification about one alert: the same bytes re-sent give the same id,
    so the workflow (and the starter) drop the copy; a new notification gives a new one."""
    parts = [source, alert.fingerprint, alert.status, _iso(alert.first_seen), digest, *extra]
    return f"{source}-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


def _iso(when: datetime | None) -> str:
    return when.isoformat() if when else ""


# --- routing ----------------------------------------------------------------------------------

_REPO_RE = re.compile(REPO_PATTERN)


def validate_routes(routes: Mapping[str, object]) -> dict[str, str]:
    """Check SHOPFLOOR_ALERT_ROUTES once, at app build time, with a message naming the bad entry."""
    checked: dict[str, str] = {}
    for key, repo in routes.items():
        if key != "*" and ("=" not in key or not key.split("=", 1)[0].strip()):
            raise AlertRoutesError(f"SHOPFLOOR_ALERT_ROUTES: key {key!r} must be '<label>=<value>' or '*'")
        if not isinstance(repo, str) or not _REPO_RE.match(repo):
            raise AlertRoutesError(f"SHOPFLOOR_ALERT_ROUTES: {key!r} routes to {repo!r}, which is not 'owner/repo'")
        checked[key] = repo
    return checked


def route_repo(alert_labels: Mapping[str, str], routes: Mapping[str, str]) -> str | None:
    """The first route whose `<label>=<value>` matches the alert's labels (in the routes' order);
    "*" matches anything. None: no route, the alert is unrouted."""
    for key, repo in routes.items():
        if key == "*":
            return repo
        label, _, value = key.partition("=")
        if alert_labels.get(label.strip()) == value.strip():
            return repo
    return None


# --- dispatch ---------------------------------------------------------------------------------


def parse_alerts(source: str, body: bytes, *, now: datetime, sentry_resource: str | None = None) -> ParsedDelivery:
    """Parse one delivery of `source`. Raises AlertPayloadError (a ValueError) on bad input."""
    # Imported here: the source modules import the helpers above.
    from shopfloor.webhooks import alert_alertmanager, alert_generic, alert_sentry

    if source == "alertmanager":
        return ParsedDelivery(alerts=alert_alertmanager.parse_alertmanager(body, now=now))
    if source == "generic":
        return ParsedDelivery(alerts=alert_generic.parse_generic(body, now=now))
    if source == "sentry":
        return alert_sentry.parse_sentry(body, resource=sentry_resource, now=now)
    raise AlertPayloadError(f"unknown alert source {source!r}; expected one of {', '.join(SOURCES)}")
