"""GitHub webhook signatures: `X-Hub-Signature-256 = "sha256=" + hex(HMAC-SHA256(secret, raw body))`.

Shared by the simulator (which signs deliveries) and shopfloor's webhook receiver (which verifies
them), so both sides use one implementation. Verification is constant-time
(docs/design.md, Trust and safety).
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` header value for `body`."""
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def sign_sha1(secret: bytes, body: bytes) -> str:
    """The legacy `X-Hub-Signature` header value (GitHub still sends it alongside sha256)."""
    return "sha1=" + hmac.new(secret, body, hashlib.sha1).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """True when `header` is the sha256 signature of `body` under `secret`."""
    if not header or not secret:
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())
