"""The simulator's HTML pages, opened in a real browser (Debian's chromium, headless): the pull
request page shows its diff, its review with a line comment and its checks; the issue page its
conversation and labels; hostile text stays text.

The screenshot is checked for the diff's colours (an added line's green, a removed line's red)
where the browser drew them, and the DOM the browser built for the review's words."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from PIL import Image
from simulator_runs import SimulatorHandle, computed_pull

API = "/repos/alice/shop"
ADDED, REMOVED = (0xDA, 0xFB, 0xE1), (0xFF, 0xEB, 0xE9)  # pages.py's .add and .del backgrounds
OPEN, HEADER = (0x1F, 0x88, 0x3D), (0x24, 0x29, 0x2F)  # the open state badge, the page header
HOSTILE = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed: .ci/run installs Debian's chromium package"
    return found


def browse(url: str, tmp_path: Path, *, screenshot: Path | None = None) -> str:
    """The DOM chromium built for `url` (and its screenshot, when asked)."""
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2600"]
    args.append(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    args.append(f"--screenshot={screenshot}" if screenshot else "--dump-dom")
    done = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def pull_request_with_a_review(sim: SimulatorHandle) -> tuple[int, int]:
    """alice/shop: an issue with a label and comments, and a pull request with a review, a line
    comment, a check and a status."""
    sim.create_repo("alice", "shop")
    sim.set_permission("alice", "shop", "maria", "write")
    alice, bot, maria = sim.api("alice"), sim.api(), sim.api("maria")
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    cart = "def total(items):\n    return sum(i.price for i in items)\n"
    body = {"message": "cart", "content": base64.b64encode(cart.encode()).decode(), "branch": "main"}
    alice.put(f"{API}/contents/cart.py", json=body).raise_for_status()
    issue = alice.post(
        f"{API}/issues", json={"title": "Totals ignore quantity", "body": f"See cart.py {HOSTILE}"}
    ).json()
    alice.post(f"{API}/issues/{issue['number']}/labels", json={"labels": ["bug"]}).raise_for_status()
    bot.post(
        f"{API}/issues/{issue['number']}/comments", json={"body": "| stage | state |\n|---|---|\n| triage | done |"}
    )
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    bot.post(f"{API}/git/refs", json={"ref": "refs/heads/shopfloor/issue-1", "sha": main}).raise_for_status()
    fixed = cart.replace("i.price for", "i.price * i.quantity for")
    blob = bot.get(f"{API}/contents/cart.py", params={"ref": "shopfloor/issue-1"}).json()["sha"]
    body = {
        "message": "Count quantities",
        "content": base64.b64encode(fixed.encode()).decode(),
        "branch": "shopfloor/issue-1",
        "sha": blob,
    }
    head = bot.put(f"{API}/contents/cart.py", json=body).json()["commit"]["sha"]
    pr = bot.post(
        f"{API}/pulls",
        json={"title": "Count quantities in totals", "head": "shopfloor/issue-1", "base": "main", "body": "Fixes #1"},
    ).json()
    bot.post(f"{API}/statuses/{head}", json={"state": "success", "context": "ci"}).raise_for_status()
    review = {
        "event": "REQUEST_CHANGES",
        "commit_id": head,
        "body": "Quantities can be zero.",
        "comments": [{"path": "cart.py", "line": 2, "side": "RIGHT", "body": "Guard against a missing quantity here."}],
    }
    got = maria.post(f"{API}/pulls/{pr['number']}/reviews", json=review)
    assert got.status_code == 200, got.text
    computed_pull(bot, f"{API}/pulls/{pr['number']}")
    return issue["number"], pr["number"]


def test_the_pull_request_page_shows_the_diff_and_the_review_in_a_browser(simulator: SimulatorHandle, tmp_path: Path):
    issue, pr = pull_request_with_a_review(simulator)
    url = f"{simulator.base_url}/alice/shop/pull/{pr}"
    dom = browse(url, tmp_path)
    assert "Count quantities in totals" in dom and "Guard against a missing quantity here." in dom
    assert "Quantities can be zero." in dom and "requested changes" in dom
    assert "+    return sum(i.price * i.quantity for i in items)" in dom
    assert "-    return sum(i.price for i in items)" in dom
    assert "<td>ci</td>" in dom and "success" in dom

    shot = tmp_path / "pull.png"
    browse(url, tmp_path, screenshot=shot)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2600)
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20) or []}
    assert ADDED in colours and REMOVED in colours, "the screenshot shows no added and removed lines"


def test_the_issue_page_shows_the_conversation_and_keeps_hostile_text_as_text(
    simulator: SimulatorHandle, tmp_path: Path
):
    issue, _ = pull_request_with_a_review(simulator)
    dom = browse(f"{simulator.base_url}/alice/shop/issues/{issue}", tmp_path)
    assert "Totals ignore quantity" in dom and '<span class="label">bug</span>' in dom
    assert "<th>stage</th>" in dom and "<td>triage</td>" in dom  # the bot's table, rendered
    assert "<script>document.title" not in dom and "<img src" not in dom  # escaped, never markup
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;" in dom
    title = browse(f"{simulator.base_url}/alice/shop/issues/{issue}", tmp_path)
    assert "<title>Totals ignore quantity" in title and "owned" not in title.split("</title>")[0]

    shot = tmp_path / "issue.png"
    browse(f"{simulator.base_url}/alice/shop/issues/{issue}", tmp_path, screenshot=shot)
    colours = {colour for _, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20) or []}
    assert OPEN in colours and HEADER in colours, "the screenshot shows no open state badge or page header"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/", 200),
        ("/alice/shop", 200),
        ("/alice/shop.git", 301),  # the clone URL, opened in a browser
        ("/alice/shop/tree/main", 200),
        ("/alice/shop/tree/shopfloor/issue-1", 200),
        ("/alice/shop/issues/1", 200),
        ("/alice/shop/issues/2", 301),  # a pull request's number: GitHub redirects to its page
        ("/alice/shop/pull/2", 200),
        ("/alice/shop/pull/1", 404),  # an issue, not a pull request
        ("/alice/shop/issues/99", 404),
        ("/nobody/nothing", 404),
    ],
)
def test_pages_answer_at_githubs_paths(simulator: SimulatorHandle, path: str, status: int):
    pull_request_with_a_review(simulator)
    got = httpx.get(simulator.base_url + path, follow_redirects=False)
    assert got.status_code == status, got.text[-500:]
    if status == 301:
        assert got.headers["location"].removeprefix(simulator.base_url) in ("/alice/shop/pull/2", "/alice/shop")
    else:
        assert got.headers["content-type"].startswith("text/html")
