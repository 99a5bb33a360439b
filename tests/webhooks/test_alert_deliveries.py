"""Alert webhooks end to end against the session's real Temporal dev server: every real payload in
tests/fixtures/alerts is accepted when authorized (and reaches the `alert/<source>/<fingerprint>`
workflow with the right Alert), refused when not, and the edge's other answers (unrouted, duplicate,
malformed, too large, Temporal down) hold."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
import pytest
from fixture_files import ALERTS
from pydantic import SecretStr
from structlog.testing import capture_logs
from temporalio.client import Client

from shopfloor.errors import TemporalUnreachable
from shopfloor.models.inbox import ALERT_SIGNAL, ALERT_WORKFLOW, Alert
from shopfloor.settings import Settings
from shopfloor.webhooks.alert_sources import AlertRoutesError
from shopfloor.webhooks.app import create_app

FIXTURES = ALERTS
TOKEN = "alert-token-for-tests"
SENTRY_SECRET = "sentry-client-secret-for-tests"
ROUTES = {"service=checkout": "acme/shop", "project=front-end": "acme/web", "project=bar": "acme/metrics"}

# (fixture, Sentry-Hook-Resource or None, expected fingerprints, expected status, expected repo)
DELIVERIES = [
    ("alertmanager/webhook.v4.firing.json", None, ["1c5d859e845f39a3", "2f27ba89bcf30e12"], "firing", "acme/shop"),
    ("alertmanager/webhook.v4.resolved.json", None, ["1c5d859e845f39a3", "2f27ba89bcf30e12"], "resolved", "acme/shop"),
    ("sentry/event_alert.triggered.json", "event_alert", ["1117540176"], "firing", "acme/web"),
    ("sentry/issue.created.json", "issue", ["1170820242"], "firing", "acme/web"),
    ("sentry/metric_alert.resolved.json", "metric_alert", ["metric-7"], "resolved", "acme/metrics"),
]


@pytest.fixture
def alert_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "alert_token": SecretStr(TOKEN),
            "sentry_client_secret": SecretStr(SENTRY_SECRET),
            "alert_routes": ROUTES,
        }
    )


def _client_for(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge")


@pytest.fixture
async def edge(temporal_client: Client, alert_settings: Settings, blobs):
    async def get_client() -> Client:
        return temporal_client

    async with _client_for(create_app(get_client, alert_settings, blobs)) as http:
        yield http


def _sign(body: bytes, secret: str = SENTRY_SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _headers(source: str, body: bytes, resource: str | None = None) -> dict[str, str]:
    if source == "sentry":
        return {
            "Content-Type": "application/json",
            "Sentry-Hook-Resource": resource or "",
            "Sentry-Hook-Timestamp": "1566248777",
            "Sentry-Hook-Signature": _sign(body),
            "Request-ID": "r-1",
        }
    # The headers Alertmanager really sent (fixture), plus what its http_config.authorization adds.
    recorded = FIXTURES / "alertmanager" / "webhook.v4.firing.request.json"
    headers = {
        k: v for k, v in json.loads(recorded.read_text())["headers"].items() if k in ("User-Agent", "Content-Type")
    }
    return {**headers, "Authorization": f"Bearer {TOKEN}"}


async def _alert_signals(client: Client, workflow_id: str, delivery_id: str | None = None) -> list[Alert]:
    handle = client.get_workflow_handle(workflow_id)
    converter = client.data_converter.payload_converter
    found = []
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_signaled_event_attributes"):
            attrs = event.workflow_execution_signaled_event_attributes
            if attrs.signal_name == ALERT_SIGNAL:
                (alert,) = converter.from_payloads(list(attrs.input.payloads), [Alert])
                if delivery_id is None or alert.delivery_id == delivery_id:
                    found.append(alert)
    return found


@pytest.mark.parametrize("rel, resource, fingerprints, status, repo", DELIVERIES, ids=[d[0] for d in DELIVERIES])
async def test_every_real_payload_reaches_its_alert_workflow(
    edge, temporal_client, rel, resource, fingerprints, status, repo
):
    source = rel.split("/")[0]
    body = (FIXTURES / rel).read_bytes()
    resp = await edge.post(f"/webhooks/alerts/{source}", content=body, headers=_headers(source, body, resource))
    assert resp.status_code == 202, resp.text
    answered = resp.json()["alerts"]
    assert [a["fingerprint"] for a in answered] == fingerprints
    for item in answered:
        workflow_id = f"alert/{source}/{item['fingerprint']}"
        assert item["workflow_id"] == workflow_id
        assert item["outcome"] in ("started", "signalled", "duplicate")
        desc = await temporal_client.get_workflow_handle(workflow_id).describe()
        assert desc.workflow_type == ALERT_WORKFLOW
        assert await desc.static_summary() == f"{workflow_id} on {repo or 'no repository (unrouted)'}"
        signals = [a for a in await _alert_signals(temporal_client, workflow_id) if a.status == status]
        assert signals, f"no {status} alert signal on {workflow_id}"
        alert = signals[-1]
        assert alert.source == source and alert.fingerprint == item["fingerprint"] and alert.repo == repo
        assert alert.summary and alert.delivery_id


async def test_the_signalled_alert_carries_the_payload_fields(edge, temporal_client):
    body = (FIXTURES / "sentry/issue.created.json").read_bytes()
    resp = await edge.post("/webhooks/alerts/sentry", content=body, headers=_headers("sentry", body, "issue"))
    assert resp.status_code == 202, resp.text
    alert = (await _alert_signals(temporal_client, "alert/sentry/1170820242"))[-1]
    assert alert.summary == "ReferenceError: blooopy is not defined"
    assert alert.labels["project"] == "front-end" and alert.labels["level"] == "error"
    assert "Culprit: ?(runner)" in alert.description
    assert alert.first_seen is not None and alert.first_seen.year == 2019


async def test_sentry_installation_is_acknowledged_and_ignored(edge):
    body = (FIXTURES / "sentry/installation.created.json").read_bytes()
    resp = await edge.post("/webhooks/alerts/sentry", content=body, headers=_headers("sentry", body, "installation"))
    assert resp.status_code == 202
    assert resp.json()["alerts"] == [] and "installation" in resp.json()["ignored"]


@pytest.mark.parametrize(
    "rel, resource", [(d[0], d[1]) for d in DELIVERIES if d[1]] + [("sentry/installation.created.json", "installation")]
)
async def test_sentry_refuses_a_changed_byte_or_signature(edge, rel, resource):
    body = (FIXTURES / rel).read_bytes()
    headers = _headers("sentry", body, resource)
    tampered = body.replace(b'"action": "', b'"action": "x', 1)
    assert tampered != body
    assert (await edge.post("/webhooks/alerts/sentry", content=tampered, headers=headers)).status_code == 401
    sig = headers["Sentry-Hook-Signature"]
    bad_sig = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    resp = await edge.post(
        "/webhooks/alerts/sentry", content=body, headers={**headers, "Sentry-Hook-Signature": bad_sig}
    )
    assert resp.status_code == 401
    no_sig = {k: v for k, v in headers.items() if k != "Sentry-Hook-Signature"}
    assert (await edge.post("/webhooks/alerts/sentry", content=body, headers=no_sig)).status_code == 401
    wrong_key = {**headers, "Sentry-Hook-Signature": _sign(body, "another-secret")}
    assert (await edge.post("/webhooks/alerts/sentry", content=body, headers=wrong_key)).status_code == 401


async def test_sentry_signature_over_the_reserialized_body_is_accepted(edge):
    # Sentry's docs verify json.dumps(request.body): a sender signing that form is accepted too.
    body = (FIXTURES / "sentry/metric_alert.resolved.json").read_bytes()
    headers = {
        **_headers("sentry", body, "metric_alert"),
        "Sentry-Hook-Signature": _sign(json.dumps(json.loads(body)).encode()),
    }
    resp = await edge.post("/webhooks/alerts/sentry", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    assert resp.json()["alerts"][0]["workflow_id"] == "alert/sentry/metric-7"


@pytest.mark.parametrize("source", ["alertmanager", "generic"])
async def test_bearer_token_wrong_or_missing_is_401(edge, source):
    body = (FIXTURES / "alertmanager/webhook.v4.firing.json").read_bytes()
    for auth in (None, f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer "):
        headers = {"Content-Type": "application/json"} | ({"Authorization": auth} if auth is not None else {})
        resp = await edge.post(f"/webhooks/alerts/{source}", content=body, headers=headers)
        assert resp.status_code == 401, (auth, resp.text)
        assert TOKEN not in resp.text


async def test_no_token_or_secret_configured_is_503_never_accepted(temporal_client, settings, blobs):
    async def get_client() -> Client:
        return temporal_client

    app = create_app(get_client, settings.model_copy(update={"alert_routes": ROUTES}), blobs)
    async with _client_for(app) as http:
        body = (FIXTURES / "alertmanager/webhook.v4.firing.json").read_bytes()
        resp = await http.post("/webhooks/alerts/alertmanager", content=body, headers={"Authorization": "Bearer "})
        assert resp.status_code == 503 and "alert token not configured" in resp.text
        resp = await http.post("/webhooks/alerts/generic", content=body, headers={"Authorization": "Bearer anything"})
        assert resp.status_code == 503
        sentry = (FIXTURES / "sentry/issue.created.json").read_bytes()
        resp = await http.post("/webhooks/alerts/sentry", content=sentry, headers=_headers("sentry", sentry, "issue"))
        assert resp.status_code == 503 and "Sentry client secret not configured" in resp.text


async def test_unrouted_alert_is_acknowledged_logged_and_counted(edge, temporal_client):
    body = json.dumps(
        {"fingerprint": "unrouted-billing-1", "summary": "billing is slow", "labels": {"service": "billing"}}
    ).encode()
    with capture_logs() as logs:
        resp = await edge.post("/webhooks/alerts/generic", content=body, headers=_headers("generic", body))
    assert resp.status_code == 202
    assert resp.json() == {
        "alerts": [{"fingerprint": "unrouted-billing-1", "workflow_id": None, "outcome": "unrouted"}]
    }
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["source"] == "generic" and warning["fingerprint"] == "unrouted-billing-1"
    assert warning["labels"] == {"service": "billing"}
    (line,) = [e for e in logs if e["event"] == "alert delivery"]
    assert line["count"] == 1 and line["outcomes"] == {"unrouted": 1} and "latency_ms" in line
    assert TOKEN not in repr(logs) and "billing is slow" not in repr(logs)  # no secrets, no bodies
    metrics = (await edge.get("/metrics")).text
    assert 'source="generic"' in metrics and 'outcome="unrouted"' in metrics
    # No workflow was started for it.
    from temporalio.service import RPCError

    with pytest.raises(RPCError):
        await temporal_client.get_workflow_handle("alert/generic/unrouted-billing-1").describe()


async def test_the_same_notification_twice_gives_one_signal(edge, temporal_client):
    body = json.dumps(
        {"fingerprint": "dup-once-1", "summary": "checkout 5xx", "labels": {"service": "checkout"}}
    ).encode()
    first = await edge.post("/webhooks/alerts/generic", content=body, headers=_headers("generic", body))
    second = await edge.post("/webhooks/alerts/generic", content=body, headers=_headers("generic", body))
    assert first.status_code == second.status_code == 202
    assert first.json()["alerts"][0]["outcome"] in ("started", "signalled")
    assert second.json()["alerts"][0]["outcome"] == "duplicate"
    signals = await _alert_signals(temporal_client, "alert/generic/dup-once-1")
    assert len(signals) == 1
    # A new notification about the same fingerprint reaches the same workflow.
    resolved = json.dumps(
        {
            "fingerprint": "dup-once-1",
            "summary": "checkout 5xx",
            "status": "resolved",
            "labels": {"service": "checkout"},
        }
    ).encode()
    third = await edge.post("/webhooks/alerts/generic", content=resolved, headers=_headers("generic", resolved))
    assert third.json()["alerts"][0]["outcome"] == "signalled"
    assert [a.status for a in await _alert_signals(temporal_client, "alert/generic/dup-once-1")] == [
        "firing",
        "resolved",
    ]


@pytest.mark.parametrize(
    "source, body, resource",
    [
        ("alertmanager", b"{not json", None),
        ("alertmanager", b'{"version": "4", "alerts": "nope"}', None),
        ("alertmanager", b'{"version": "4", "alerts": [{"status": "on fire"}]}', None),
        ("generic", b'{"summary": "no fingerprint"}', None),
        ("generic", b"[]", None),
        ("generic", b"[" * 50_000 + b"]" * 50_000, None),
        ("sentry", b'{"action": "created", "data": {"issue": {}}}', "issue"),
        ("sentry", b'{"action": "created"}', "issue"),
        ("sentry", b'{"action": "triggered", "data": {}}', ""),
    ],
)
async def test_malformed_bodies_are_400_with_a_message(edge, source, body, resource):
    resp = await edge.post(f"/webhooks/alerts/{source}", content=body, headers=_headers(source, body, resource))
    assert resp.status_code == 400, resp.text
    assert resp.json()["detail"].startswith(f"malformed {source} payload")


async def test_unknown_source_is_404(edge):
    resp = await edge.post("/webhooks/alerts/datadog", content=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 404 and "unknown alert source" in resp.text


async def test_too_large_is_413(temporal_client, alert_settings, blobs):
    async def get_client() -> Client:
        return temporal_client

    app = create_app(get_client, alert_settings.model_copy(update={"webhook_max_body_bytes": 1024}), blobs)
    async with _client_for(app) as http:
        body = json.dumps({"fingerprint": "big", "summary": "x" * 2000}).encode()
        resp = await http.post("/webhooks/alerts/generic", content=body, headers=_headers("generic", body))
        assert resp.status_code == 413

        async def chunks():  # no Content-Length: the stream is counted
            yield body[:600]
            yield body[600:]

        resp = await http.post("/webhooks/alerts/generic", content=chunks(), headers=_headers("generic", body))
        assert resp.status_code == 413


async def test_temporal_unavailable_is_503_and_nothing_acknowledged(alert_settings, blobs):
    async def get_client() -> Client:
        raise TemporalUnreachable("no Temporal here")

    async with _client_for(create_app(get_client, alert_settings, blobs)) as http:
        body = (FIXTURES / "alertmanager/webhook.v4.firing.json").read_bytes()
        resp = await http.post("/webhooks/alerts/alertmanager", content=body, headers=_headers("alertmanager", body))
        assert resp.status_code == 503 and "alerts" not in resp.json()


def test_invalid_routes_fail_at_app_build(alert_settings, blobs):
    async def get_client() -> Client:  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(AlertRoutesError, match="not 'owner/repo'"):
        create_app(get_client, alert_settings.model_copy(update={"alert_routes": {"*": "just-a-name"}}), blobs)
