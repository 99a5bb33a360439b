"""The HTTP edge. For now: health and readiness; webhook routes arrive with their issue."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Response
from temporalio.client import Client

ClientGetter = Callable[[], Awaitable[Client]]


def create_app(get_client: ClientGetter) -> FastAPI:
    app = FastAPI(title="shopfloor webhooks", version="0.1.0")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(response: Response) -> dict[str, str]:
        """Ready when Temporal answers: deliveries can only be acknowledged once it accepts them."""
        try:
            client = await get_client()
            await client.service_client.check_health()
        except Exception as exc:  # any failure to reach Temporal means not ready
            response.status_code = 503
            return {"status": "unavailable", "temporal": str(exc).splitlines()[0][:200]}
        return {"status": "ok", "temporal": "reachable"}

    return app
