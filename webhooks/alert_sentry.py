"""Sentry integration-platform webhooks: `Sentry-Hook-Resource` says what the body is.

- `event_alert`: an issue-alert rule fired for an event (data.event, data.triggered_rule).
- `issue`: created / resolved / assigned / archived / ignored / unresolved (data.issue).
- `metric_alert`: critical / warning / resolved (data.metric_alert).
Other resources (installation, error, comment, ...) carry no alert: acknowledged and ignored.
The fingerprint is Sentry's issue id, so every notification about one issue reaches one workflow;
metric alerts have no issue and use `metric-<alert rule id>`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from shopfloor.models.inbox import Alert
from shopfloor.webhooks.alert_sources import (
    DESCRIPTION_MAX,
    AlertPayloadError,
    ParsedDelivery,
    body_digest,
    clean_fingerprint,
    clean_labels,
    clean_links,
    clean_text,
    delivery_id,
    load_json,
    one_line,
    optional_object,
    parse_time,
    require_object,
)

RESOURCES = ("event_alert", "issue", "metric_alert")
# The project slug of an event_alert is only in its API url: /api/0/projects/<org>/<project>/events/...
_PROJECT_IN_URL = re.compile(r"/projects/[^/]+/([^/]+)/")


def parse_sentry(body: bytes, *, resource: str | None, now: datetime) -> ParsedDelivery:
    if not resource:
        raise AlertPayloadError("missing Sentry-Hook-Resource header")
    payload = require_object(load_json(body), "Sentry payload")
    if resource not in RESOURCES:
        return ParsedDelivery(ignored=f"Sentry resource {resource[:64]!r} carries no alert")
    action = payload.get("action")
    if not isinstance(action, str):
        raise AlertPayloadError("Sentry payload has no 'action'")
    data = require_object(payload.get("data"), "Sentry payload 'data'")
    digest = body_digest(body)
    if resource == "event_alert":
        alert = _event_alert(data, now)
    elif resource == "issue":
        alert = _issue(action, data, now)
    else:
        alert = _metric_alert(action, data, now)
    return ParsedDelivery(
        alerts=[alert.model_copy(update={"delivery_id": delivery_id("sentry", alert, digest, resource, action)})]
    )


def _event_alert(data: dict[str, Any], now: datetime) -> Alert:
    event = require_object(data.get("event"), "Sentry event_alert 'data.event'")
    issue_id = event.get("issue_id")
    if issue_id in (None, ""):
        raise AlertPayloadError("Sentry event_alert has no data.event.issue_id")
    metadata = optional_object(event.get("metadata"), "data.event.metadata")
    rule = data.get("triggered_rule")
    tags = _tags(event.get("tags"))
    project = _project_from_url(event.get("url")) or _project_from_url(event.get("issue_url"))
    seen = parse_time(event.get("datetime"), "data.event.datetime")
    lines = [
        f"Sentry alert rule {one_line(rule)!r} fired." if isinstance(rule, str) and rule else "",
        _field("Error", _error_line(metadata)),
        _field("Culprit", event.get("culprit")),
        _field("Location", event.get("location")),
        _field("Message", event.get("message")),
        _field("Release", event.get("release")),
    ]
    return Alert(
        source="sentry",
        fingerprint=clean_fingerprint(issue_id),
        status="firing",
        labels=clean_labels(
            {
                "project": project,
                "level": _str(event.get("level")) or tags.get("level"),
                "environment": _str(event.get("environment")) or tags.get("environment"),
                "platform": _str(event.get("platform")),
                "rule": _str(rule),
            }
        ),
        summary=one_line(event.get("title") or _error_line(metadata) or f"Sentry issue {issue_id}"),
        description=clean_text("\n".join(line for line in lines if line), DESCRIPTION_MAX),
        links=clean_links(event.get("web_url"), _issue_page(event.get("web_url"))),
        first_seen=seen,
        last_seen=seen or now,
        occurrences=1,
    )


def _issue(action: str, data: dict[str, Any], now: datetime) -> Alert:
    issue = require_object(data.get("issue"), "Sentry issue 'data.issue'")
    issue_id = issue.get("id")
    if issue_id in (None, ""):
        raise AlertPayloadError("Sentry issue has no data.issue.id")
    project = optional_object(issue.get("project"), "data.issue.project")
    metadata = optional_object(issue.get("metadata"), "data.issue.metadata")
    lines = [
        f"Sentry issue {one_line(issue.get('shortId') or issue_id)} was {one_line(action, 40)}.",
        _field("Error", _error_line(metadata)),
        _field("Culprit", issue.get("culprit")),
        _field("Events", issue.get("count")),
        _field("Users", issue.get("userCount")),
    ]
    return Alert(
        source="sentry",
        fingerprint=clean_fingerprint(issue_id),
        # Resolved closes the alert; anything else (created, assigned, archived...) keeps it open.
        status="resolved" if action == "resolved" else "firing",
        labels=clean_labels(
            {
                "project": _str(project.get("slug")),
                "level": _str(issue.get("level")),
                "environment": _str(issue.get("environment")),
                "platform": _str(issue.get("platform")),
                "short_id": _str(issue.get("shortId")),
            }
        ),
        summary=one_line(issue.get("title") or f"Sentry issue {issue_id}"),
        description=clean_text("\n".join(line for line in lines if line), DESCRIPTION_MAX),
        links=clean_links(issue.get("permalink"), issue.get("web_url")),
        first_seen=parse_time(issue.get("firstSeen"), "data.issue.firstSeen"),
        last_seen=parse_time(issue.get("lastSeen"), "data.issue.lastSeen") or now,
        occurrences=_count(issue.get("count")),
    )


def _metric_alert(action: str, data: dict[str, Any], now: datetime) -> Alert:
    metric = require_object(data.get("metric_alert"), "Sentry metric_alert 'data.metric_alert'")
    rule = optional_object(metric.get("alert_rule"), "data.metric_alert.alert_rule")
    rule_id = rule.get("id", metric.get("id"))
    if rule_id in (None, "") or isinstance(rule_id, (dict, list, bool)):
        raise AlertPayloadError("Sentry metric_alert has no data.metric_alert.alert_rule.id")
    projects = rule.get("projects") or metric.get("projects") or []
    project = projects[0] if isinstance(projects, list) and len(projects) == 1 else None
    resolved = action == "resolved"
    closed = parse_time(metric.get("date_closed"), "data.metric_alert.date_closed")
    return Alert(
        source="sentry",
        fingerprint=clean_fingerprint(f"metric-{rule_id}"),
        status="resolved" if resolved else "firing",
        labels=clean_labels(
            {
                "project": _str(project),
                "environment": _str(rule.get("environment")),
                "severity": action if action in ("critical", "warning") else None,
                "rule": _str(rule.get("name")),
            }
        ),
        summary=one_line(
            data.get("description_title") or rule.get("name") or metric.get("title") or f"Sentry metric alert {rule_id}"
        ),
        # Sentry's documented example holds a literal backslash-n; shown as the line break it means.
        description=clean_text(_str(data.get("description_text")).replace("\\n", "\n"), DESCRIPTION_MAX),
        links=clean_links(data.get("web_url")),
        first_seen=parse_time(
            metric.get("date_started") or metric.get("date_detected"), "data.metric_alert.date_started"
        ),
        last_seen=(closed or now) if resolved else now,
        occurrences=1,
    )


def _str(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else (str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "")
    )


def _field(name: str, value: Any) -> str:
    text = _str(value)
    return f"{name}: {text}" if text else ""


def _error_line(metadata: dict[str, Any]) -> str:
    kind, value = _str(metadata.get("type")), _str(metadata.get("value"))
    return f"{kind}: {value}" if kind and value else kind or value


def _tags(raw: Any) -> dict[str, str]:
    """Sentry tags come as [[key, value], ...]."""
    tags: dict[str, str] = {}
    if isinstance(raw, list):
        for pair in raw:
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
                tags.setdefault(pair[0], pair[1])
    return tags


def _project_from_url(url: Any) -> str | None:
    match = _PROJECT_IN_URL.search(url) if isinstance(url, str) else None
    return match.group(1) if match else None


def _issue_page(web_url: Any) -> str | None:
    """The issue's page from an event's page (…/issues/<id>/events/<event>/ → …/issues/<id>/)."""
    if isinstance(web_url, str) and "/events/" in web_url:
        return web_url.split("/events/", 1)[0] + "/"
    return None


def _count(raw: Any) -> int:
    """Sentry sends the issue's event count as a string ("1")."""
    try:
        count = int(str(raw)) if raw is not None and not isinstance(raw, bool) else 1
    except ValueError:
        return 1
    return max(count, 1)
