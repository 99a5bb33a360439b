"""Files attached to issues, as GitHub hosts them: an upload is served at
`/user-attachments/assets/<id>` on the simulator's own origin, with its type; an unknown asset is
a 404; an upload told to redirect answers 302 to where it was told; every request is logged."""

from __future__ import annotations

import httpx
from images import png
from simulator_runs import SimulatorHandle


def test_an_attachment_is_served_at_a_github_like_address(simulator: SimulatorHandle):
    image = png()
    url = simulator.attach(image)
    assert url.startswith(f"{simulator.base_url}/user-attachments/assets/")

    got = httpx.get(url)
    assert got.status_code == 200 and got.content == image
    assert got.headers["content-type"] == "image/png"
    assert httpx.get(f"{simulator.base_url}/user-attachments/assets/no-such-asset").status_code == 404

    moved = simulator.attach(b"", redirect="http://elsewhere.invalid/x.png")
    answer = httpx.get(moved, follow_redirects=False)
    assert answer.status_code == 302 and answer.headers["location"] == "http://elsewhere.invalid/x.png"

    logged = [r for r in simulator.requests() if r["path"].startswith("/user-attachments/")]
    assert [r["status"] for r in logged] == [200, 404, 302]
    assert not any(r["authorized"] for r in logged)


def test_a_reset_forgets_attachments(simulator: SimulatorHandle):
    url = simulator.attach(png())
    httpx.post(f"{simulator.base_url}/_sim/reset").raise_for_status()
    assert httpx.get(url).status_code == 404
