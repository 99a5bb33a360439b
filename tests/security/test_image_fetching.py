"""An issue's images are fetched for the models, and an issue's author chooses their addresses.
Each attack is replayed through the goal's activity (`factory_goal`, as the factory calls it)
against the GitHub simulator as the configured GitHub, with a server of the attacker's beside it
that logs whatever reaches it:

- an image at the attacker's server on the worker's own machine, at a private address, or at the
  cloud metadata address is never asked for (no connection, no credentials): a note says why;
- an upload on GitHub that redirects off GitHub is not followed;
- an image larger than the cap is refused, by its declared length and, from a server that
  declares none and never stops, while it streams;
- what is fetched is checked by its bytes: an SVG or a page served as `image/png` is refused;
- an image fetched for one repository is not handed from memory to another repository's run.

Nothing refused fails the goal: the model gets the goal with a note for each image it does not get.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import contextmanager
from pathlib import Path

from images import padded_png, png
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from temporalio.testing import ActivityEnvironment
from threaded_server import serving

from shopfloor.activities.factory import FactoryActivities
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.images import ImageFetcher
from shopfloor.agents.hidden_markdown import ImageLink
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.blobs import FileBlobStore, put_json
from shopfloor.models.factory_run import GoalInput, GoalOutput
from shopfloor.settings import Settings


class Attacker:
    """The attacker's server: serves a valid PNG anywhere, logs every request and its headers."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, str | None]] = []

    async def any(self, request: Request) -> Response:
        self.hits.append((request.url.path, request.headers.get("authorization")))
        return Response(png(), media_type="image/png")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.any)])


@contextmanager
def attacker():
    spy = Attacker()
    with serving(spy.app(), name="attacker") as url:
        yield spy, url


def clients_for(api_url: str) -> GitHubClients:
    return GitHubClients(Settings(github_api_url=api_url, github_token=SecretStr(BOT_TOKEN)))


async def goal_for(tmp_path: Path, clients: GitHubClients, body: str, **fetcher: int) -> GoalOutput:
    blobs = FileBlobStore(tmp_path / "blobs")
    digest = await put_json(blobs, snapshot_text("The app crashes", body))
    activities = FactoryActivities(blobs, clients, ImageFetcher(blobs, clients, **fetcher))
    inp = GoalInput(kind="triage", repo="acme/shop", number=7, issue_digest=digest, images=True)
    return await ActivityEnvironment().run(activities.goal, inp)


async def test_an_image_anywhere_but_github_is_never_asked_for(simulator: SimulatorHandle, tmp_path: Path):
    good = simulator.attach(png())
    with attacker() as (spy, evil):
        body = (
            f"![screenshot]({good})\n\n"
            f"![a]({evil}/steal.png)\n\n"  # the worker's own machine, another port
            "![b](http://169.254.169.254/latest/meta-data/iam/security-credentials/)\n\n"  # cloud metadata
            f'<img alt="c" src="http://10.0.0.5:8080/internal.png">\n\n'  # a private address
            f"![d]({evil.replace('127.0.0.1', 'localhost')}/user-attachments/assets/x)"  # GitHub's path, not its host
        )
        started = time.monotonic()
        out = await goal_for(tmp_path, clients_for(simulator.api_url), body)
        elapsed = time.monotonic() - started
    assert spy.hits == []
    assert [i.number for i in out.images] == [1]  # GitHub's own upload, and only it
    for n in (2, 3, 4, 5):
        assert f"[image {n} of the body was not fetched: not hosted by GitHub]" in out.goal, out.goal
    assert elapsed < 10  # refused before any connection: no timeout against unreachable addresses
    fetched = [r for r in simulator.requests() if r["path"].startswith("/user-attachments/")]
    assert len(fetched) == 1 and fetched[0]["authorized"]  # credentials go to GitHub's own origin


async def test_a_redirect_off_github_is_not_followed(simulator: SimulatorHandle, tmp_path: Path):
    with attacker() as (spy, evil):
        off = simulator.attach(b"", redirect=f"{evil}/user-attachments/assets/evil")
        metadata = simulator.attach(b"", redirect="http://169.254.169.254/latest/meta-data/")
        within = simulator.attach(b"", redirect=simulator.attach(png(3, 3)))  # GitHub to GitHub: followed
        out = await goal_for(tmp_path, clients_for(simulator.api_url), f"![x]({off}) ![y]({metadata}) ![z]({within})")
    assert spy.hits == []
    assert "[image 1 of the body was not fetched: redirected to an address not hosted by GitHub]" in out.goal
    assert "[image 2 of the body was not fetched: redirected to an address not hosted by GitHub]" in out.goal
    assert [i.number for i in out.images] == [3]


async def test_an_oversized_image_is_refused(simulator: SimulatorHandle, tmp_path: Path):
    big = simulator.attach(padded_png(5 * 1024 * 1024 + 1))
    small = simulator.attach(png())
    out = await goal_for(tmp_path, clients_for(simulator.api_url), f"![big]({big}) ![small]({small})")
    assert "[image 1 of the body was not fetched: larger than 5,242,880 bytes]" in out.goal, out.goal
    assert [i.number for i in out.images] == [2]


async def test_an_endless_image_is_cut_off_while_it_streams(tmp_path: Path):
    """A GitHub that declares no length and never stops (a hostile or broken server, or a proxy)."""
    sent = 0

    async def endless(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            nonlocal sent
            yield png()[:-12]
            while True:
                sent += 65536
                yield b"\0" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(chunks(), media_type="image/png")

    app = Starlette(routes=[Route("/user-attachments/assets/{asset}", endless)])
    with serving(app, name="endless-github") as github:
        out = await goal_for(
            tmp_path, clients_for(f"{github}/api/v3"), f"![x]({github}/user-attachments/assets/a)", max_bytes=1 << 20
        )
    assert "[image 1 of the body was not fetched: larger than 1,048,576 bytes]" in out.goal, out.goal
    assert out.images == [] and sent < 16 << 20  # the connection closed at the cap (plus what the buffers held)


async def test_only_image_bytes_are_images(simulator: SimulatorHandle, tmp_path: Path):
    svg = simulator.attach(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>", content_type="image/png")
    declared = simulator.attach(png(), content_type="image/svg+xml")
    out = await goal_for(tmp_path, clients_for(simulator.api_url), f"![a]({svg}) ![b]({declared})")
    assert out.images == []
    assert "[image 1 of the body was not fetched: not a png, jpeg, gif or webp image]" in out.goal
    assert "[image 2 of the body was not fetched: not a png, jpeg, gif or webp image (image/svg+xml)]" in out.goal


async def test_an_image_fetched_for_one_repository_is_asked_for_again_for_another(tmp_path: Path):
    """The worker remembers fetched images, per repository: an image one repository's credentials
    could read (a private repository's upload) is never handed to another repository's run from
    memory; that run's own credentials must fetch it."""
    hits: list[str] = []

    async def asset(request: Request) -> Response:
        hits.append(request.url.path)
        return Response(png(), media_type="image/png")

    app = Starlette(routes=[Route("/user-attachments/assets/{asset}", asset)])
    with serving(app, name="counting-github") as github:
        clients = clients_for(f"{github}/api/v3")
        fetcher = ImageFetcher(FileBlobStore(tmp_path / "blobs"), clients)
        link = ImageLink(src=f"{github}/user-attachments/assets/private-one")
        first = await fetcher.fetch("acme/private", link)
        again = await fetcher.fetch("acme/private", link)
        other = await fetcher.fetch("mallory/public", link)
    assert first == again == other and len(hits) == 2
