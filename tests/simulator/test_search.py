"""`GET /search/issues` with the qualifiers shopfloor uses to find its own issues and PRs."""

from __future__ import annotations

from simulator_runs import SimulatorHandle

API = "/repos/alice/demo"


def test_search_qualifiers(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    simulator.create_repo("alice", "other")
    bot, bob = simulator.api(), simulator.api("bob")
    bot.post(f"{API}/issues", json={"title": "Login fails", "body": "fingerprint abc123", "labels": ["alert fired"]})
    bob.post(f"{API}/issues", json={"title": "Docs typo", "body": "see login page"})
    bot.post(f"{API}/issues/2/comments", json={"body": "marker xyz"})
    bot.patch(f"{API}/issues/2", json={"state": "closed"})
    bot.post("/repos/alice/other/issues", json={"title": "Login elsewhere"})
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    bot.post(f"{API}/git/refs", json={"ref": "refs/heads/f", "sha": main})
    bot.put(f"{API}/contents/x.txt", json={"message": "x", "content": "eA==", "branch": "f"})
    bot.post(f"{API}/pulls", json={"title": "Fix login", "head": "f", "base": "main"})

    def numbers(q: str) -> list[tuple[str, int]]:
        resp = bot.get("/search/issues", params={"q": q})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["total_count"] == len(body["items"]) and body["incomplete_results"] is False
        return sorted((i["repository_url"].rsplit("/", 1)[-1], i["number"]) for i in body["items"])

    assert numbers("repo:alice/demo login") == [("demo", 1), ("demo", 2), ("demo", 3)]
    assert numbers("login") == [("demo", 1), ("demo", 2), ("demo", 3), ("other", 1)]
    assert numbers("repo:alice/demo is:issue login") == [("demo", 1), ("demo", 2)]
    assert numbers("repo:alice/demo is:pr") == [("demo", 3)]
    assert numbers("repo:alice/demo is:closed") == [("demo", 2)]
    assert numbers("repo:alice/demo state:open is:issue") == [("demo", 1)]
    assert numbers('repo:alice/demo label:"alert fired"') == [("demo", 1)]
    assert numbers("repo:alice/demo login in:title") == [("demo", 1), ("demo", 3)]
    assert numbers("repo:alice/demo abc123 in:body") == [("demo", 1)]
    assert numbers("repo:alice/demo xyz in:comments") == [("demo", 2)]
    assert numbers("repo:alice/demo xyz in:title") == []
    assert numbers("repo:alice/demo author:bob") == [("demo", 2)]
    pr = bot.get("/search/issues", params={"q": "repo:alice/demo is:pr"}).json()["items"][0]
    assert "pull_request" in pr
    assert bot.get("/search/issues").status_code == 422
