"""shopfloor's own alert shape, for any tool that can POST JSON (docs/alerts.md documents it).

One object or a list of them:
    {"fingerprint": str, "status": "firing"|"resolved" (default firing), "summary": str,
     "description"?: str, "labels"?: {str: str}, "links"?: [str], "first_seen"?: RFC 3339,
     "last_seen"?: RFC 3339, "occurrences"?: int >= 1}
Unknown keys are ignored (senders add their own); the core keys are required and typed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopfloor.models.inbox import Alert
from shopfloor.webhooks.alert_sources import (
    DESCRIPTION_MAX,
    FINGERPRINT_MAX,
    LABELS_MAX,
    LINKS_MAX,
    AlertPayloadError,
    body_digest,
    clean_fingerprint,
    clean_labels,
    clean_links,
    clean_text,
    delivery_id,
    load_json,
    one_line,
)

_MAX_ALERTS = 1000


class GenericAlert(BaseModel):
    """One alert in the generic shape."""

    model_config = ConfigDict(extra="ignore", strict=False)

    fingerprint: str = Field(min_length=1, max_length=FINGERPRINT_MAX)
    status: Literal["firing", "resolved"] = "firing"
    summary: str = Field(min_length=1, max_length=10_000)
    description: str = Field(default="", max_length=100_000)
    labels: dict[str, str] = Field(default_factory=dict, max_length=LABELS_MAX)
    links: list[str] = Field(default_factory=list, max_length=LINKS_MAX * 5)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    occurrences: int = Field(default=1, ge=1, le=2**31)


def parse_generic(body: bytes, *, now: datetime) -> list[Alert]:
    payload = load_json(body)
    items = payload if isinstance(payload, list) else [payload]
    if not items:
        raise AlertPayloadError("generic payload is an empty list")
    if len(items) > _MAX_ALERTS:
        raise AlertPayloadError(f"generic payload has more than {_MAX_ALERTS} alerts")
    digest = body_digest(body)
    return [_one(item, i if isinstance(payload, list) else None, digest, now) for i, item in enumerate(items)]


def _one(item: object, index: int | None, digest: str, now: datetime) -> Alert:
    where = "alert" if index is None else f"alerts[{index}]"
    if not isinstance(item, dict):
        raise AlertPayloadError(f"{where} must be a JSON object")
    try:
        raw = GenericAlert.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "body"
        raise AlertPayloadError(f"{where}.{loc}: {first['msg']} ({exc.error_count()} error(s))") from None
    fingerprint = clean_fingerprint(raw.fingerprint)
    summary = one_line(raw.summary)
    if not summary:
        raise AlertPayloadError(f"{where}.summary is empty once hidden characters are removed")
    alert = Alert(
        source="generic",
        fingerprint=fingerprint,
        status=raw.status,
        labels=clean_labels(raw.labels),
        summary=summary,
        description=clean_text(raw.description, DESCRIPTION_MAX),
        links=clean_links(*raw.links),
        first_seen=_utc(raw.first_seen),
        last_seen=_utc(raw.last_seen) or now,
        occurrences=raw.occurrences,
    )
    last_seen = _utc(raw.last_seen)
    extra = [last_seen.isoformat() if last_seen else "", str(index)]
    return alert.model_copy(update={"delivery_id": delivery_id("generic", alert, digest, *extra)})


def _utc(when: datetime | None) -> datetime | None:
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when
