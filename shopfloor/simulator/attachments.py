"""Files attached to issues and comments, as GitHub hosts them: `GET /user-attachments/assets/{id}`
on the server's own origin (where a screenshot dropped into an issue lands on github.com), and the
test hook that uploads one, `POST /_sim/attachments`, since GitHub's upload is a browser form, not
an API.

An upload may be told to answer with a redirect instead (`redirect`), as github.com sends its
attachment links on to its image hosts; tests use it to point one elsewhere. Every request for an
attachment is logged in `/_sim/requests` (`path`, `status`, and whether it carried credentials).
"""

from __future__ import annotations

import base64
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from shopfloor.simulator.deps import sim_of
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.store import Attachment

router = APIRouter()
ASSETS = "/user-attachments/assets"
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024  # GitHub's cap on an attached file (images: 10 MB)


class NewAttachment(BaseModel):
    content_base64: str = ""
    content_type: str = "image/png"
    redirect: str | None = Field(default=None, max_length=2048)


@router.post("/_sim/attachments", status_code=201)
def upload(body: NewAttachment, request: Request) -> JSONResponse:
    sim = sim_of(request)
    data = base64.b64decode(body.content_base64, validate=True)
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise GitHubError(422, "Attachment too large")
    asset = str(uuid.uuid4())
    with sim.store.lock:
        sim.store.attachments[asset] = Attachment(data, body.content_type, body.redirect)
    url = f"{sim.config.base_url}{ASSETS}/{asset}"
    return JSONResponse({"id": asset, "url": url, "markdown": f"![image]({url})"}, status_code=201)


@router.get(ASSETS + "/{asset}")
def download(asset: str, request: Request) -> Response:
    sim = sim_of(request)
    with sim.store.lock:
        found = sim.store.attachments.get(asset)
    response: Response
    if found is None:
        response = Response(status_code=404, content=b"Not Found", media_type="text/plain")
    elif found.redirect is not None:
        response = RedirectResponse(found.redirect, status_code=302)
    else:
        response = Response(content=found.data, media_type=found.content_type)
    with sim.store.lock:
        sim.store.requests.append(
            {
                "method": "GET",
                "path": request.url.path,
                "query": request.url.query,
                "status": response.status_code,
                "login": None,
                "authorized": bool(request.headers.get("authorization")),
            }
        )
    return response
