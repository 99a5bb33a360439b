"""Prometheus Alertmanager's webhook payload (`"version": "4"`): one `Alert` per `alerts[]` entry.

Loki, Mimir, Cortex and vmalert rulers send through an Alertmanager, so this shape covers them too.
Grafana's contact point sends the same envelope with `"version": "1"`; it is accepted as well.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shopfloor.models.inbox import Alert
from shopfloor.webhooks.alert_sources import (
    DESCRIPTION_MAX,
    AlertPayloadError,
    body_digest,
    clean_fingerprint,
    clean_labels,
    clean_links,
    clean_text,
    delivery_id,
    labels_fingerprint,
    load_json,
    one_line,
    optional_object,
    parse_time,
    require_object,
)

# Annotations commonly holding a link worth following from the bug.
_LINK_ANNOTATIONS = ("runbook_url", "runbook", "dashboard_url", "dashboard", "grafana_url", "playbook")
_MAX_ALERTS = 1000  # Alertmanager's own `max_alerts` default is 0 (no cap); keep one per request


def parse_alertmanager(body: bytes, *, now: datetime) -> list[Alert]:
    payload = require_object(load_json(body), "Alertmanager payload")
    version = payload.get("version")
    if version is not None and str(version) not in ("4", "1"):
        raise AlertPayloadError(f'unsupported Alertmanager payload version {str(version)[:16]!r} (expected "4")')
    entries = payload.get("alerts")
    if not isinstance(entries, list):
        raise AlertPayloadError("Alertmanager payload has no 'alerts' list")
    if len(entries) > _MAX_ALERTS:
        raise AlertPayloadError(f"Alertmanager payload has more than {_MAX_ALERTS} alerts")
    group_status = payload.get("status")
    digest = body_digest(body)
    return [_one(entry, i, group_status, digest, now) for i, entry in enumerate(entries)]


def _one(entry: Any, index: int, group_status: Any, digest: str, now: datetime) -> Alert:
    what = f"alerts[{index}]"
    entry = require_object(entry, what)
    raw_labels = optional_object(entry.get("labels"), f"{what}.labels")
    annotations = optional_object(entry.get("annotations"), f"{what}.annotations")
    for name, mapping in (("labels", raw_labels), ("annotations", annotations)):
        if any(not isinstance(v, (str, int, float, bool)) and v is not None for v in mapping.values()):
            raise AlertPayloadError(f"{what}.{name} values must be strings")
    labels = clean_labels(raw_labels)

    status = entry.get("status", group_status)
    if status not in ("firing", "resolved"):
        raise AlertPayloadError(f"{what}.status must be 'firing' or 'resolved'")

    raw_fp = entry.get("fingerprint")
    fingerprint = clean_fingerprint(raw_fp) if raw_fp not in (None, "") else labels_fingerprint(labels)

    starts = parse_time(entry.get("startsAt"), f"{what}.startsAt")
    ends = parse_time(entry.get("endsAt"), f"{what}.endsAt")
    # A firing alert is seen now; a resolved one was last seen when it ended.
    last_seen = (ends or now) if status == "resolved" else now

    summary = one_line(annotations.get("summary") or annotations.get("title") or labels.get("alertname") or "")
    if not summary:
        summary = one_line(f"Alert {fingerprint}")
    description = clean_text(annotations.get("description") or annotations.get("message") or "", DESCRIPTION_MAX)
    links = clean_links(entry.get("generatorURL"), *(annotations.get(k) for k in _LINK_ANNOTATIONS))

    alert = Alert(
        source="alertmanager",
        fingerprint=fingerprint,
        status=status,
        labels=labels,
        summary=summary,
        description=description,
        links=links,
        first_seen=starts,
        last_seen=last_seen,
        occurrences=1,
    )
    # Not last_seen (it is "now" while firing): an identical re-send must give the same id.
    return alert.model_copy(update={"delivery_id": delivery_id("alertmanager", alert, digest, _iso(ends))})


def _iso(when: datetime | None) -> str:
    return when.isoformat() if when else ""
