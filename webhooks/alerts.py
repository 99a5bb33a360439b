"""`POST /webhooks/alerts/{source}`: verify the sender, normalize, route, hand to Temporal.

Alertmanager and generic senders authenticate with `Authorization: Bearer <alert_token>`; Sentry
signs the body (`Sentry-Hook-Signature`, HMAC-SHA256 with the integration's client secret). A
202 means Temporal accepted every routed alert (docs/design.md, Trust and safety); if it did not,
503 and the sender retries — the delivery ids make the retry harmless. Unrouted alerts are
acknowledged, logged and counted: an on-call engineer must be able to see that an alert reached
nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from shopfloor.temporal import alert_workflow_start
from shopfloor.webhooks.alert_sentry import RESOURCES as SENTRY_RESOURCES
from shopfloor.webhooks.alert_sources import (
    SOURCES,
    AlertPayloadError,
    parse_alerts,
    route_repo,
    validate_routes,
)
from shopfloor.webhooks.deps import EdgeDeps
from shopfloor.webhooks.request_body import BodyError, read_body
from shopfloor.webhooks.starting import TemporalUnavailable, WorkflowClosed

log = structlog.get_logger(__name__)
_SENTRY_EVENTS = frozenset({*SENTRY_RESOURCES, "installation", "comment", "error"})  # metric label values


class _Reject(Exception):
    def __init__(self, status: int, message: str, outcome: str) -> None:
        super().__init__(message)
        self.status, self.message, self.outcome = status, message, outcome


def alerts_router(deps: EdgeDeps) -> APIRouter:
    """The alert routes. Raises AlertRoutesError now if SHOPFLOOR_ALERT_ROUTES is invalid."""
    settings = deps.settings
    routes = validate_routes(settings.alert_routes)
    router = APIRouter()

    @router.post("/webhooks/alerts/{source}", status_code=202)
    async def receive_alert(source: str, request: Request) -> JSONResponse:
        started = time.monotonic()
        resource = request.headers.get("sentry-hook-resource", "").strip() if source == "sentry" else ""
        # Metric labels stay bounded whatever an (unauthenticated) sender puts in the header.
        event = (resource if resource in _SENTRY_EVENTS else "other") if source == "sentry" else "alert"
        try:
            if source not in SOURCES:
                raise _Reject(
                    404, f"unknown alert source {source[:40]!r}; expected one of {', '.join(SOURCES)}", "unknown_source"
                )
            body = (await read_body(request, settings.webhook_max_body_bytes)).data
            _authenticate(source, request, body, deps)
            parsed = parse_alerts(source, body, now=datetime.now(UTC), sentry_resource=resource or None)
        except _Reject as exc:
            return _refuse(deps, source, event, exc.status, exc.message, exc.outcome, started)
        except BodyError as exc:
            outcome = "too_large" if exc.status == 413 else "bad_request"
            return _refuse(deps, source, event, exc.status, exc.message, outcome, started)
        except AlertPayloadError as exc:
            return _refuse(deps, source, event, 400, f"malformed {source} payload: {exc}", "malformed", started)

        if parsed.ignored:
            elapsed = time.monotonic() - started
            deps.metrics.observe(source=source, event=event, outcome="ignored", seconds=elapsed)
            log.info(
                "alert delivery", source=source, count=0, ignored=parsed.ignored, latency_ms=round(elapsed * 1000, 1)
            )
            return JSONResponse({"alerts": [], "ignored": parsed.ignored}, status_code=202)

        results: list[dict[str, Any]] = []
        for alert in parsed.alerts:
            repo = route_repo(alert.labels, routes)
            if repo is None:
                log.warning(
                    "alert unrouted: no SHOPFLOOR_ALERT_ROUTES entry matches its labels",
                    source=source,
                    fingerprint=alert.fingerprint,
                    labels=alert.labels,
                )
                results.append(
                    {
                        "fingerprint": alert.fingerprint,
                        "workflow_id": None,
                        "outcome": "unrouted",
                        "status": alert.status,
                    }
                )
                continue
            alert = alert.model_copy(update={"repo": repo})
            start = alert_workflow_start(source, alert)
            workflow_id = start.workflow_id
            try:
                delivered = await deps.starter.signal_with_start(start, dedupe_key=alert.delivery_id)
                outcome = delivered.outcome
            except WorkflowClosed:
                outcome = "closed"
            except TemporalUnavailable as exc:
                # Nothing is acknowledged: the sender retries the whole notification, and the
                # alerts Temporal already took are dropped as duplicates (delivery ids).
                elapsed = time.monotonic() - started
                deps.metrics.observe(source=source, event=event, outcome="unavailable", seconds=elapsed)
                log.warning(
                    "alert delivery not accepted: Temporal unavailable",
                    source=source,
                    count=len(parsed.alerts),
                    error=str(exc)[:200],
                    latency_ms=round(elapsed * 1000, 1),
                )
                return JSONResponse({"detail": "Temporal is unavailable; retry later"}, status_code=503)
            results.append(
                {
                    "fingerprint": alert.fingerprint,
                    "workflow_id": workflow_id,
                    "outcome": outcome,
                    "status": alert.status,
                }
            )

        elapsed = time.monotonic() - started
        for result in results:
            deps.metrics.observe(source=source, event=result["status"], outcome=result["outcome"], seconds=elapsed)
        log.info(
            "alert delivery",
            source=source,
            count=len(results),
            outcomes=_tally(r["outcome"] for r in results),
            latency_ms=round(elapsed * 1000, 1),
        )
        return JSONResponse(
            {"alerts": [{k: r[k] for k in ("fingerprint", "workflow_id", "outcome")} for r in results]},
            status_code=202,
        )

    return router


def _authenticate(source: str, request: Request, body: bytes, deps: EdgeDeps) -> None:
    settings = deps.settings
    if source == "sentry":
        secret = settings.sentry_client_secret.get_secret_value() if settings.sentry_client_secret else ""
        if not secret:
            raise _Reject(503, "Sentry client secret not configured (SHOPFLOOR_SENTRY_CLIENT_SECRET)", "not_configured")
        if not _sentry_signature_ok(secret.encode(), body, request.headers.get("sentry-hook-signature")):
            raise _Reject(401, "bad or missing Sentry-Hook-Signature", "unauthorized")
        return
    token = settings.alert_token.get_secret_value() if settings.alert_token else ""
    if not token:
        # Never accept alerts unauthenticated: refuse until a token is configured.
        raise _Reject(503, "alert token not configured (SHOPFLOOR_ALERT_TOKEN)", "not_configured")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise _Reject(401, "bad or missing bearer token", "unauthorized")


def _sentry_signature_ok(secret: bytes, body: bytes, header: str | None) -> bool:
    """HMAC-SHA256 hex of the raw body; else of `json.dumps(body)`, which is what Sentry's docs'
    sample verifier hashes (the same content, so no weaker)."""
    if not header:
        return False
    given = header.strip().lower().encode()
    if hmac.compare_digest(hmac.new(secret, body, hashlib.sha256).hexdigest().encode(), given):
        return True
    try:
        reserialized = json.dumps(json.loads(body)).encode()
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return hmac.compare_digest(hmac.new(secret, reserialized, hashlib.sha256).hexdigest().encode(), given)


def _refuse(
    deps: EdgeDeps, source: str, event: str, status: int, message: str, outcome: str, started: float
) -> JSONResponse:
    elapsed = time.monotonic() - started
    known = source if source in SOURCES else "unknown"
    deps.metrics.observe(source=known, event=event or "unknown", outcome=outcome, seconds=elapsed)
    log.info(
        "alert delivery refused",
        source=known,
        status=status,
        outcome=outcome,
        reason=message[:200],
        latency_ms=round(elapsed * 1000, 1),
    )
    return JSONResponse({"detail": message}, status_code=status)


def _tally(outcomes: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts
