"""`POST /webhooks/github`: verify, de-duplicate, route to signal-with-start. Never does work inline.

De-duplication is by the signed body (webhooks/delivered_bodies.py): a redelivery and a replay
under a new `X-GitHub-Delivery` are the same bytes, answered `duplicate` however long after.

Answers: 202 after Temporal accepted (`started` / `signalled` / `duplicate`) or when there is
nothing to do (`ignored` + reason); 401 bad signature; 400 malformed; 413 too large; 415 content
type; 503 no secret configured or Temporal unavailable (the sender retries; nothing is remembered).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from shopfloor.github_signature import verify
from shopfloor.models.github_events import (
    EventBase,
    MalformedEvent,
    PingEvent,
    is_bot_sender,
    is_ci_event,
    parse_event,
)
from shopfloor.models.inbox import ISSUE_WORKFLOW, RepoEvent
from shopfloor.temporal import SignalWithStart, issue_workflow_start, pull_request_workflow_start
from shopfloor.webhooks.delivered_bodies import body_digest
from shopfloor.webhooks.deps import EdgeDeps
from shopfloor.webhooks.github_body import MEDIA_TYPES, decode_payload, delivery_headers
from shopfloor.webhooks.github_event_kinds import route, to_repo_event
from shopfloor.webhooks.github_routing import Target
from shopfloor.webhooks.request_body import BodyError, read_body
from shopfloor.webhooks.starting import Delivered, TemporalUnavailable, WorkflowClosed

log = structlog.get_logger(__name__)

_OPENAPI: dict[str, Any] = {
    "parameters": [
        {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
        for name in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256")
    ],
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/x-www-form-urlencoded": {
                "schema": {"type": "object", "properties": {"payload": {"type": "string"}}}
            },
        },
    },
    "responses": {
        "202": {"description": "accepted by Temporal, or ignored with a reason"},
        "400": {"description": "malformed delivery"},
        "401": {"description": "bad or missing signature"},
        "413": {"description": "body too large"},
        "415": {"description": "unsupported content type"},
        "503": {"description": "no webhook secret configured, or Temporal unavailable: retry"},
    },
}


def _ignored_sender(event: EventBase, bot_login: str) -> bool:
    """Whether the sender makes a delivery ignorable: shopfloor itself, or a bot unless the event
    is a CI result (those come from apps: facts about a commit that the issue workflow waits for,
    so only our own login makes them ignorable)."""
    ci_fact = is_ci_event(event.event) and event.sender_login != bot_login
    ours = (event.sender_login or "") == bot_login
    return not ci_fact and (ours or is_bot_sender(event.sender_login, event.sender.type if event.sender else None))


def start_for(target: Target, event: RepoEvent) -> SignalWithStart:
    """The signal-with-start that hands `event` to `target` (the one RPC a delivery makes)."""
    build = issue_workflow_start if target.workflow == ISSUE_WORKFLOW else pull_request_workflow_start
    started_by = f"{event.event}.{event.action or ''} from @{event.sender}"
    return build(event, target.number, restart_closed=target.restart_closed, started_by=started_by)


def github_router(deps: EdgeDeps) -> APIRouter:
    router = APIRouter()

    @router.post("/webhooks/github", status_code=202, openapi_extra=_OPENAPI)
    async def github_webhook(request: Request) -> JSONResponse:
        started_at = time.monotonic()
        info: dict[str, Any] = {"event": None, "delivery": None, "action": None, "repo": None}

        def answer(status: int, outcome: str, *, background: BackgroundTask | None = None, **body: Any) -> JSONResponse:
            seconds = time.monotonic() - started_at
            deps.metrics.observe(source="github", event=info["event"] or "unknown", outcome=outcome, seconds=seconds)
            log.info(
                "github delivery",
                github_event=info["event"],
                delivery=info["delivery"],
                action=info["action"],
                repo=info["repo"],
                outcome=outcome,
                status=status,
                workflow_id=body.get("workflow_id"),
                reason=body.get("reason") or body.get("detail"),
                latency_ms=round(seconds * 1000, 1),
            )
            return JSONResponse({"outcome": outcome, **body}, status_code=status, background=background)

        try:
            settings = deps.settings
            secret = settings.webhook_secret.get_secret_value().encode() if settings.webhook_secret else b""
            if not secret:
                return answer(503, "not_configured", detail="webhook secret not configured")
            delivered = await read_body(request, settings.webhook_max_body_bytes, media_types=MEDIA_TYPES)
            body = delivered.data
            if not verify(secret, body, request.headers.get("x-hub-signature-256")):
                return answer(401, "unauthorized", detail="bad or missing X-Hub-Signature-256")
            info["event"], info["delivery"] = delivery_headers(request.headers)
            raw = decode_payload(body, delivered.media_type)
            try:
                event = parse_event(info["event"], raw)
            except MalformedEvent as exc:
                raise BodyError(400, str(exc)[:1000]) from None
        except BodyError as exc:
            outcome = {400: "bad_request", 413: "too_large", 415: "unsupported_media_type"}[exc.status]
            return answer(exc.status, outcome, detail=exc.message)

        info["action"] = event.action
        info["repo"] = event.repo_full_name
        if isinstance(event, PingEvent):
            return answer(202, "ignored", reason="pong")
        if _ignored_sender(event, settings.github_bot_login):
            return answer(202, "ignored", reason=f"sender {event.sender_login!r} is a bot or shopfloor itself")
        plan = route(event, bot_login=settings.github_bot_login, trigger_label=settings.trigger_label)
        if not plan.targets:
            return answer(202, "ignored", reason=plan.ignored)

        # A replay is the same signed bytes under a new delivery id: known bodies are duplicates.
        # The check and the signal's snapshot each wait on the blob store: side by side, not in turn
        # (a duplicate's snapshot is content-addressed, already stored, so nothing new is written).
        digest = body_digest(body)
        accepted, signal_arg = await asyncio.gather(
            deps.bodies.was_accepted(digest), to_repo_event(event, info["delivery"], deps.blobs)
        )
        if accepted:
            extra: dict[str, Any] = (
                {"workflow_ids": [t.workflow_id for t in plan.targets]} if len(plan.targets) > 1 else {}
            )
            return answer(202, "duplicate", workflow_id=plan.targets[0].workflow_id, **extra)
        signal_arg = signal_arg.model_copy(update={"body_digest": digest})
        results: list[Delivered] = []
        closed: list[str] = []
        try:
            for target in plan.targets:
                try:
                    results.append(
                        await deps.starter.signal_with_start(
                            start_for(target, signal_arg),
                            # The body, not the delivery id: a redelivery and a replay are both this body.
                            dedupe_key=f"github:{digest}:{target.workflow_id}",
                        )
                    )
                except WorkflowClosed as exc:
                    closed.append(exc.workflow_id)
        except TemporalUnavailable as exc:
            return answer(503, "unavailable", detail=f"{exc}; deliver again later"[:500])
        # Temporal has the delivery: the sender's answer need not wait for the edge's memory of the
        # body, written after the answer (webhooks/delivered_bodies.py) unless writes lag far behind.
        remember: BackgroundTask | None = BackgroundTask(deps.bodies.remember, digest)
        if deps.bodies.backlogged:
            await deps.bodies.remember(digest)
            remember = None
        if not results:
            reason = f"workflow already finished: {', '.join(closed)}"
            return answer(202, "ignored", background=remember, reason=reason, workflow_id=closed[0])
        first = results[0]
        ids: dict[str, Any] = {"workflow_ids": [r.workflow_id for r in results]} if len(plan.targets) > 1 else {}
        return answer(202, first.outcome, background=remember, workflow_id=first.workflow_id, **ids)

    return router
