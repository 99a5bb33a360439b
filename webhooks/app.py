"""The HTTP edge: GitHub and alert webhooks, health, readiness and metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from temporalio.client import Client

from shopfloor.blobs import BlobStore
from shopfloor.settings import Settings
from shopfloor.webhooks.alerts import alerts_router
from shopfloor.webhooks.delivered_bodies import BodyMemory
from shopfloor.webhooks.deps import EdgeDeps
from shopfloor.webhooks.github import github_router
from shopfloor.webhooks.metrics import EdgeMetrics
from shopfloor.webhooks.starting import Starter

ClientGetter = Callable[[], Awaitable[Client]]
log = structlog.get_logger(__name__)


def create_app(
    get_client: ClientGetter, settings: Settings, blobs: BlobStore, *, temporal_timeout_s: float = 10.0
) -> FastAPI:
    """The edge app; `temporal_timeout_s` bounds how long a delivery waits on Temporal before 503."""
    app = FastAPI(title="shopfloor webhooks", version="0.1.0")
    deps = EdgeDeps(
        settings=settings,
        starter=Starter(get_client, settings.task_queue, rpc_timeout_s=temporal_timeout_s),
        metrics=EdgeMetrics(),
        blobs=blobs,
        bodies=BodyMemory(blobs),
    )
    app.state.deps = deps

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Bad input has its own 4xx answers; reaching here is a bug in shopfloor, so log it.
        log.exception("webhook handler failed", path=request.url.path, error=type(exc).__name__)
        return JSONResponse({"detail": "internal error"}, status_code=500)

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
        except Exception as exc:  # noqa: BLE001 - any failure to reach Temporal means not ready
            response.status_code = 503
            return {
                "status": "unavailable",
                "temporal": str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
            }
        return {"status": "ok", "temporal": "reachable"}

    @app.get("/metrics")
    async def metrics() -> Response:
        """Prometheus metrics of this process's edge."""
        body, content_type = deps.metrics.render()
        return Response(content=body, media_type=content_type)

    app.include_router(github_router(deps))
    app.include_router(alerts_router(deps))
    return app
