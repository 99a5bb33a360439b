"""Fetching the images people's text shows, for the models that accept them: from GitHub's own
hosts only (agents/images.py decides which), with the worker's GitHub credentials sent only to the
configured GitHub's origin, redirects followed one hop at a time and only within those hosts, the
bytes capped while they stream and their type read from their magic. A fetched image is stored in
the blob store by digest; what comes back is an `ImageRef` (digest, type, size, alt text). An image
that is refused, too large, not an image or unreachable becomes a short note for the goal, never
a failure of the run.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from urllib.parse import urljoin

import httpx
import structlog

from shopfloor.activities.github.clients import USER_AGENT, GitHubClients
from shopfloor.agents.hidden_markdown import ImageLink
from shopfloor.agents.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    MAX_REDIRECTS,
    ImageHosts,
    declared_type_refusal,
    refused_note,
    sniff,
)
from shopfloor.blobs import BlobStore
from shopfloor.models.transcript import ImageRef, ImageType

log = structlog.get_logger(__name__)

FETCH_TIMEOUT_S = 30.0  # one image, every hop and byte of it
# Fetched images a worker remembers, by repository and address (GitHub's upload addresses never
# change). Per repository: an image one installation could read is never handed to another's run.
REMEMBERED = 64


class ImageRefused(Exception):
    """Why one image was not fetched, in words for the goal's note."""


class ImageFetcher:
    def __init__(
        self,
        blobs: BlobStore,
        clients: GitHubClients,
        *,
        max_bytes: int = MAX_IMAGE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._blobs = blobs
        self._clients = clients
        self._hosts = ImageHosts.for_api(clients.api_url)
        self._max_bytes = max_bytes
        self._transport = transport
        self._fetched: OrderedDict[tuple[str, str], ImageRef] = OrderedDict()

    async def fetch_all(
        self, repo: str, links: list[ImageLink], *, source: str = "the body", limit: int = MAX_IMAGES
    ) -> tuple[list[ImageRef], list[str]]:
        """The images of `links` (in `source`) that could be fetched, at most `limit`, and a note
        for each of the others."""
        images: list[ImageRef] = []
        notes: list[str] = []
        for number, link in enumerate(links, start=1):
            if len(images) >= limit:
                notes.append(refused_note(number, f"only {MAX_IMAGES} images are fetched", source))
                continue
            try:
                image = await self.fetch(repo, link)
                images.append(image.model_copy(update={"number": number, "source": source}))
            except ImageRefused as exc:
                log.info("image not fetched", repo=repo, reason=str(exc))
                notes.append(refused_note(number, str(exc), source))
        return images, notes

    async def fetch(self, repo: str, link: ImageLink) -> ImageRef:
        """One image, stored; raises ImageRefused with the reason when it is not fetched."""
        key = (repo, link.src)
        known = self._fetched.get(key)
        if known is not None:
            self._fetched.move_to_end(key)
            return known
        refusal, _ = self._hosts.check(link.src)
        if refusal is not None:  # before any credential or connection
            raise ImageRefused(refusal)
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_S):
                data, media_type = await self._download(repo, link.src)
        except TimeoutError:
            raise ImageRefused(f"not read within {FETCH_TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise ImageRefused(f"could not be read ({type(exc).__name__})") from None
        digest = await self._blobs.put(data)
        image = ImageRef(digest=digest, media_type=media_type, size=len(data))
        self._fetched[key] = image
        while len(self._fetched) > REMEMBERED:
            self._fetched.popitem(last=False)
        return image

    async def _token(self, repo: str) -> str | None:
        try:
            return await asyncio.to_thread(self._clients.git_token, repo)
        except Exception:  # noqa: BLE001 - no usable credentials: the image is asked for without them
            return None

    async def _download(self, repo: str, url: str) -> tuple[bytes, ImageType]:
        token: str | None = None
        asked_token = False
        timeout = httpx.Timeout(FETCH_TIMEOUT_S)
        async with httpx.AsyncClient(follow_redirects=False, timeout=timeout, transport=self._transport) as client:
            for hop in range(MAX_REDIRECTS + 1):
                refusal, credentials = self._hosts.check(url)
                if refusal is not None:
                    raise ImageRefused(f"redirected to an address {refusal}" if hop else refusal)
                headers = {"User-Agent": USER_AGENT, "Accept": "image/png,image/jpeg,image/gif,image/webp"}
                if credentials:
                    if not asked_token:
                        token, asked_token = await self._token(repo), True
                    if token:
                        headers["Authorization"] = f"token {token}"
                async with client.stream("GET", url, headers=headers) as response:
                    if response.is_redirect:
                        url = urljoin(url, response.headers.get("location", ""))
                        continue
                    if response.status_code != 200:
                        raise ImageRefused(f"GitHub answered {response.status_code}")
                    if (why := declared_type_refusal(response.headers.get("content-type"))) is not None:
                        raise ImageRefused(why)
                    declared = response.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > self._max_bytes:
                        raise ImageRefused(f"larger than {self._max_bytes:,} bytes")
                    data = bytearray()
                    async for chunk in response.aiter_bytes():
                        data += chunk
                        if len(data) > self._max_bytes:
                            raise ImageRefused(f"larger than {self._max_bytes:,} bytes")
                    media_type = sniff(bytes(data[:16]))
                    if media_type is None:
                        raise ImageRefused("not a png, jpeg, gif or webp image")
                    return bytes(data), media_type
        raise ImageRefused(f"more than {MAX_REDIRECTS} redirects")
