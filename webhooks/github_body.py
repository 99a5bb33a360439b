"""Decoding a GitHub delivery: the X-GitHub-* headers, and the JSON object it carries as JSON or in
a form's `payload` field (the body is read by webhooks/request_body.py, capped like every
webhook's, in one of `MEDIA_TYPES`).

Each failure is a `BodyError` carrying the HTTP status to answer (400); nothing else escapes for
any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from shopfloor.webhooks.request_body import BodyError

JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
MEDIA_TYPES = (JSON_TYPE, FORM_TYPE)
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DELIVERY_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def delivery_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """(event name, delivery id) from the X-GitHub-* headers, validated."""
    event = (headers.get("x-github-event") or "").strip()
    delivery = (headers.get("x-github-delivery") or "").strip()
    if not event:
        raise BodyError(400, "missing X-GitHub-Event header")
    if not _EVENT_NAME.match(event):
        raise BodyError(400, "X-GitHub-Event is not an event name")
    if not delivery:
        raise BodyError(400, "missing X-GitHub-Delivery header")
    if not _DELIVERY_ID.match(delivery):
        raise BodyError(400, "X-GitHub-Delivery is not a delivery id")
    return event, delivery


def decode_payload(body: bytes, kind: str) -> dict[str, Any]:
    """The JSON object a delivery carries, as JSON or in a form's `payload` field."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError(400, "body is not UTF-8") from None
    if kind == FORM_TYPE:
        try:
            fields = parse_qsl(text, keep_blank_values=True, max_num_fields=64, errors="strict")
        except (ValueError, UnicodeDecodeError):
            raise BodyError(400, "malformed form body") from None
        payloads = [value for name, value in fields if name == "payload"]
        if len(payloads) != 1:
            raise BodyError(400, "a form-encoded delivery needs exactly one `payload` field")
        text = payloads[0]
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        raise BodyError(400, "body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise BodyError(400, f"the payload must be a JSON object, not {type(payload).__name__}")
    return payload
