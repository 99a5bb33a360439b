"""The simulator's HTML pages show what strangers wrote (issue bodies, comments, review comments,
labels, branch names) to whoever opens a link: every such text is shown as text. Replays a stored
XSS through each place, and checks the page holds no markup or script URL that came from it."""

from __future__ import annotations

import base64
import re

import httpx
from simulator_runs import SimulatorHandle

API = "/repos/alice/shop"
SCRIPT = "<script>steal()</script>"
IMG = '<img src=x onerror="steal()">'
LINK = "[click me](javascript:steal())"


def _attacked(sim: SimulatorHandle) -> tuple[int, int]:
    sim.create_repo("alice", "shop")
    mallory, bot = sim.api("mallory"), sim.api()
    hostile = f"{SCRIPT} {IMG} {LINK} <!-- hidden from view -->"
    issue = mallory.post(f"{API}/issues", json={"title": f"Title {SCRIPT}", "body": hostile}).json()["number"]
    mallory.post(f"{API}/issues/{issue}/comments", json={"body": hostile}).raise_for_status()
    sim.api("alice").post(f"{API}/labels", json={"name": f"x{IMG}", "color": "ffffff"}).raise_for_status()
    sim.api("alice").post(f"{API}/issues/{issue}/labels", json={"labels": [f"x{IMG}"]}).raise_for_status()
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    branch = "shopfloor/<b>x"
    created = bot.post(f"{API}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main})
    branch = branch if created.status_code == 201 else "shopfloor/x"
    if created.status_code != 201:
        bot.post(f"{API}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main}).raise_for_status()
    body = {"message": SCRIPT, "content": base64.b64encode(f"{SCRIPT}\n".encode()).decode(), "branch": branch}
    head = bot.put(f"{API}/contents/page.html", json=body).json()["commit"]["sha"]
    pr = bot.post(f"{API}/pulls", json={"title": f"PR {SCRIPT}", "head": branch, "base": "main", "body": hostile})
    number = pr.json()["number"]
    review = {
        "event": "COMMENT",
        "commit_id": head,
        "body": hostile,
        "comments": [{"path": "page.html", "line": 1, "body": hostile}],
    }
    assert mallory.post(f"{API}/pulls/{number}/reviews", json=review).status_code == 200
    return issue, number


def _no_markup_from_the_attacker(page: str) -> None:
    body = page.split("</style>", 1)[1]  # the page's own stylesheet aside
    assert "<script" not in body and "<img" not in body and "onerror=" not in body.replace("onerror=&quot;", "")
    assert not re.search(r"href=[\"']?\s*javascript:", body, re.IGNORECASE)
    assert "hidden from view" not in body  # an HTML comment is hidden, as GitHub hides it
    assert "&lt;script&gt;steal()&lt;/script&gt;" in body  # shown, as text


def test_every_page_shows_a_strangers_markup_as_text(simulator: SimulatorHandle):
    issue, pr = _attacked(simulator)
    pages = [f"/alice/shop/issues/{issue}", f"/alice/shop/pull/{pr}", "/alice/shop", "/"]
    for path in pages:
        got = httpx.get(simulator.base_url + path)
        assert got.status_code == 200, path
        if path in ("/alice/shop", "/"):
            assert "<script" not in got.text.split("</style>", 1)[1], path
            continue
        _no_markup_from_the_attacker(got.text)
