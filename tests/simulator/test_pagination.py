"""Pagination with RFC 5988 Link headers on the simulator's own base URL, followed by PyGithub."""

from __future__ import annotations

import re

from github import Auth, Github
from simulator_runs import BOT_TOKEN, SimulatorHandle


def links(header: str) -> dict[str, str]:
    return {rel: url for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', header)}


def test_65_comments_page_by_30(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    bot.post("/repos/alice/demo/issues", json={"title": "chatty"})
    for i in range(65):
        assert bot.post("/repos/alice/demo/issues/1/comments", json={"body": f"c{i}"}).status_code == 201

    first = bot.get("/repos/alice/demo/issues/1/comments", params={"per_page": 30})
    assert len(first.json()) == 30
    rels = links(first.headers["link"])
    assert set(rels) == {"next", "last"}
    assert all(url.startswith(simulator.api_url + "/repos/alice/demo/issues/1/comments?") for url in rels.values())
    assert "page=2" in rels["next"] and "page=3" in rels["last"]

    second = bot.get(rels["next"].removeprefix(simulator.api_url))
    assert set(links(second.headers["link"])) == {"next", "last", "first", "prev"}
    third = bot.get(rels["last"].removeprefix(simulator.api_url))
    assert [c["body"] for c in third.json()] == [f"c{i}" for i in range(60, 65)]
    assert set(links(third.headers["link"])) == {"first", "prev"}

    gh = Github(
        base_url=simulator.api_url,
        auth=Auth.Token(BOT_TOKEN),
        retry=None,
        per_page=30,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )
    bodies = [c.body for c in gh.get_repo("alice/demo").get_issue(1).get_comments()]
    assert bodies == [f"c{i}" for i in range(65)]
