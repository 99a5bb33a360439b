"""Every webhook route reads its body with one reader: a missing Content-Length is fine (the stream
is counted), a bad one is refused with the same clear sentence on the GitHub and the alert routes,
and an oversized one is refused before the body is read. No Temporal is reached (its getter fails)."""

from __future__ import annotations

import json

import httpx
import pytest
from edge_app import SECRET, delivery_headers, fixture_payload
from pydantic import SecretStr
from temporalio.client import Client

from shopfloor.blobs import FileBlobStore
from shopfloor.errors import TemporalUnreachable
from shopfloor.settings import Settings
from shopfloor.webhooks.app import create_app

pytestmark = pytest.mark.fast

LIMIT = 16 * 1024  # a real issues.opened delivery (13.5 kB) fits
TOKEN = "alert-token-for-body-tests"
ROUTES = ["/webhooks/github", "/webhooks/alerts/generic", "/webhooks/alerts/alertmanager", "/webhooks/alerts/sentry"]


@pytest.fixture
async def http(tmp_path):
    async def no_temporal() -> Client:
        raise TemporalUnreachable("no Temporal in this test")

    settings = Settings(
        temporal_address="127.0.0.1:9",  # never dialled: no_temporal answers instead
        data_dir=tmp_path,
        webhook_secret=SecretStr(SECRET),
        alert_token=SecretStr(TOKEN),
        sentry_client_secret=SecretStr("sentry-secret"),
        alert_routes={"*": "acme/shop"},
        webhook_max_body_bytes=LIMIT,
    )
    app = create_app(no_temporal, settings, FileBlobStore(tmp_path / "blobs"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge") as client:
        yield client


def _headers(path: str, body: bytes) -> dict[str, str]:
    if path == "/webhooks/github":
        return delivery_headers("issues", body)
    return {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


BODY = json.dumps({"fingerprint": "f-1", "summary": "disk full"}).encode()


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(
    ("content_length", "status", "detail"),
    [
        ("twelve", 400, "Content-Length is not a number"),
        ("-1", 400, "Content-Length is negative"),
        (str(LIMIT + 1), 413, f"body of {LIMIT + 1} bytes is over the {LIMIT}-byte limit"),
    ],
)
async def test_a_bad_content_length_gets_one_answer_on_every_route(
    http: httpx.AsyncClient, path: str, content_length: str, status: int, detail: str
) -> None:
    headers = {**_headers(path, BODY), "Content-Length": content_length}
    r = await http.post(path, content=BODY, headers=headers)
    assert (r.status_code, r.json()["detail"]) == (status, detail)


@pytest.mark.parametrize("path", ROUTES)
async def test_a_stream_past_the_limit_is_refused_on_every_route(http: httpx.AsyncClient, path: str) -> None:
    big = json.dumps({"fingerprint": "f-2", "summary": "x" * (2 * LIMIT)}).encode()

    async def chunks():  # no Content-Length: the stream is counted
        yield big[:600]
        yield big[600:]

    r = await http.post(path, content=chunks(), headers=_headers(path, big))
    assert (r.status_code, r.json()["detail"]) == (413, f"body is over the {LIMIT}-byte limit")


@pytest.mark.parametrize("path", ["/webhooks/github", "/webhooks/alerts/generic"])
async def test_a_stream_within_the_limit_is_read_whole(http: httpx.AsyncClient, path: str) -> None:
    """No Content-Length and a body under the limit: read, verified, parsed, and handed to Temporal
    (which is down here, so 503: nothing was refused on the way)."""
    body = json.dumps(fixture_payload("issues.opened.json")).encode() if path.endswith("github") else BODY
    assert len(body) <= LIMIT

    async def chunks():
        for start in range(0, len(body), 500):
            yield body[start : start + 500]

    r = await http.post(path, content=chunks(), headers=_headers(path, body))
    assert r.status_code == 503, r.text
