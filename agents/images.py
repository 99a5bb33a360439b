"""Images in people's text as models get them: which addresses may be fetched (GitHub's own
hosts, never any other), what the fetched bytes are (by their magic, not by what the server
says), which models accept images, and the note a text-only model reads in place of each image.
Pure: no I/O (the fetching is activities/images.py).

An issue's author may be hostile: an image address is a URL they chose. Only images GitHub itself
hosts are fetched — uploads at `https://github.com/user-attachments/assets/…` and
`https://github.com/<owner>/<repo>/assets/…`, GitHub's image hosts
(`user-images.githubusercontent.com`, `private-user-images.githubusercontent.com`), or the same
paths on the configured GitHub's own origin (GitHub Enterprise, the simulator) — so a body cannot
make the worker reach a private address, a cloud metadata service or anyone's server. Credentials
go only to the configured GitHub's origin, never to the image hosts it redirects to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from shopfloor.models.transcript import ImageRef, ImageType, Message

MAX_IMAGES = 4  # images fetched from one body; the rest get a note
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # an image's bytes, counted while they arrive
MAX_REDIRECTS = 3

GITHUB_API_HOST = "api.github.com"
GITHUB_WEB_HOST = "github.com"
# Where github.com keeps uploaded images (and redirects its attachment links to): https only,
# reached without credentials.
GITHUB_IMAGE_HOSTS = frozenset({"user-images.githubusercontent.com", "private-user-images.githubusercontent.com"})
# Upload paths on GitHub's own origin: new uploads, and the older per-repository ones.
_UPLOAD_PATH = re.compile(r"^/(user-attachments/assets/[A-Za-z0-9._-]+|[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/assets/.+)$")

# Models known to accept images (`provider:model` globs); SHOPFLOOR_IMAGE_MODELS replaces the list.
DEFAULT_IMAGE_MODELS: tuple[str, ...] = (
    "openai:gpt-4o*",
    "openai:chatgpt-4o*",
    "openai:gpt-4.1*",
    "openai:gpt-4.5*",
    "openai:gpt-5*",
    "openai:o1",
    "openai:o1-20*",
    "openai:o3",
    "openai:o3-20*",
    "openai:o3-pro*",
    "openai:o4-mini*",
    "anthropic:claude-3*",
    "anthropic:claude-sonnet-4*",
    "anthropic:claude-opus-4*",
    "anthropic:claude-haiku-4*",
)


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int


def _origin(url: str) -> Origin | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if scheme not in ("http", "https") or not host or "@" in parts.netloc:
        return None
    return Origin(scheme, host, port or (443 if scheme == "https" else 80))


@dataclass(frozen=True)
class ImageHosts:
    """Where images may be fetched from, for one configured GitHub."""

    origin: Origin  # the configured GitHub's web origin: its upload paths, with credentials
    image_hosts: frozenset[str]  # github.com's image hosts: https, without credentials

    @classmethod
    def for_api(cls, api_url: str) -> ImageHosts:
        """The hosts of the GitHub whose REST API is `api_url` (github.com's, or an Enterprise
        server's or the simulator's `…/api/v3`, whose web origin is the API's)."""
        api = _origin(api_url)
        if api is None:
            raise ValueError(f"not an http(s) URL: {api_url!r}")
        if api.host == GITHUB_API_HOST:
            return cls(Origin("https", GITHUB_WEB_HOST, 443), GITHUB_IMAGE_HOSTS)
        return cls(api, frozenset())

    def check(self, url: str) -> tuple[str | None, bool]:
        """(why `url` is refused, or None) and whether the worker's GitHub credentials may go with it."""
        where = _origin(url)
        if where is None:
            return "not an http(s) address", False
        if where == self.origin:
            path = urlsplit(url).path
            if _UPLOAD_PATH.match(path) and ".." not in path.split("/"):
                return None, True
            return "not an upload on GitHub", False
        if where.host in self.image_hosts and where.scheme == "https" and where.port == 443:
            return None, False
        return "not hosted by GitHub", False


def sniff(head: bytes) -> ImageType | None:
    """The image type the first bytes say (png, jpeg, gif, webp), or None: never the server's word."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def declared_type_refusal(content_type: str | None) -> str | None:
    """Why a response's Content-Type rules it out (an SVG, a page), or None."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in ("image/png", "image/jpeg", "image/gif", "image/webp", "application/octet-stream", ""):
        return None
    return f"not a png, jpeg, gif or webp image ({kind[:60]})"


def accepts_images(model: str, patterns: Sequence[str] | None = None) -> bool:
    """Whether `model` (`provider:model`) takes images: `patterns` (SHOPFLOOR_IMAGE_MODELS) when
    set, else the known list."""
    chosen = DEFAULT_IMAGE_MODELS if patterns is None else patterns
    spec = model.strip().lower()
    return any(fnmatchcase(spec, p.strip().lower()) for p in chosen)


# Notes name an image by its place (the body's `[image]` marks, in order), never by its alt text
# or address: those are hidden content, which a model reads only under the hidden label.


def omitted_note(image: ImageRef) -> str:
    """What a text-only model reads in place of `image`."""
    kb = max(1, round(image.size / 1024))
    return (
        f"[an image was omitted: image {image.number} of {image.source} ({image.media_type}, {kb} KB); this model "
        "reads text only (its alt text, if any, is among the hidden parts)]"
    )


def refused_note(number: int, reason: str, source: str = "the body") -> str:
    """What the goal says of image `number` of `source` when it was not fetched."""
    return f"[image {number} of {source} was not fetched: {reason}]"


def without_images(m: Message) -> Message:
    """`m` as a model without images reads it: a note in place of each image."""
    if not m.images:
        return m
    notes = "\n".join(omitted_note(i) for i in m.images)
    return m.model_copy(update={"content": f"{m.content}\n\n{notes}".strip(), "images": []})


def text_only(messages: list[Message]) -> list[Message]:
    """The conversation for a model without images: each image replaced by a note in its message."""
    if not any(m.images for m in messages):
        return messages
    return [without_images(m) for m in messages]
