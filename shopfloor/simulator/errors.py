"""GitHub-shaped error responses: `{"message", "documentation_url", "errors"?}`, never a bare 500."""

from __future__ import annotations

import traceback
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = structlog.get_logger(__name__)
DOCS = "https://docs.github.com/rest"


class GitHubError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        errors: list[dict[str, Any] | str] | None = None,  # objects, or plain sentences (reviews)
        headers: dict[str, str] | None = None,
        docs: str = DOCS,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.errors, self.headers, self.docs = status, message, errors, headers, docs

    def body(self) -> dict[str, Any]:
        data: dict[str, Any] = {"message": self.message, "documentation_url": self.docs}
        if self.errors is not None:
            data["errors"] = self.errors
        data["status"] = str(self.status)
        return data

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def not_found() -> GitHubError:
    return GitHubError(404, "Not Found")


def invalid(resource: str, field: str, code: str = "invalid", message: str | None = None) -> GitHubError:
    err: dict[str, Any] = {"resource": resource, "code": code, "field": field}
    if message:
        err["message"] = message
    return GitHubError(422, "Validation Failed", errors=[err])


def custom_invalid(resource: str, message: str) -> GitHubError:
    return GitHubError(422, "Validation Failed", errors=[{"resource": resource, "code": "custom", "message": message}])


def forbidden(message: str = "Resource not accessible by integration") -> GitHubError:
    return GitHubError(403, message)


def install(app: FastAPI) -> None:
    @app.exception_handler(GitHubError)
    async def _github(_: Request, exc: GitHubError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errs):
            return GitHubError(400, "Problems parsing JSON").response()
        details = [
            f"For '{'/'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}', {e.get('msg', 'invalid')}."
            for e in errs
        ]
        return GitHubError(422, "Invalid request.\n\n" + "\n".join(details)).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "Not Found" if exc.status_code == 404 else str(exc.detail)
        return GitHubError(exc.status_code, message).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("simulator_unexpected_error", path=request.url.path, error=traceback.format_exc())
        return GitHubError(500, "Server Error").response()
