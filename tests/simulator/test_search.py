"""`GET /search/issues`: the qualifiers shopfloor uses, words matched as GitHub matches them, and
an index that catches up with a change a while after it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from simulator_runs import SimulatorHandle, running_simulator

API = "/repos/alice/demo"


@pytest.mark.simulator_config(search_index_delay_s=0)  # what is matched, not when it is indexed
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
    # Words, not substrings: a part of a word finds nothing; a plural finds its singular.
    assert numbers("repo:alice/demo log") == []
    assert numbers("repo:alice/demo logins") == [("demo", 1), ("demo", 2), ("demo", 3)]
    assert numbers('repo:alice/demo "login page"') == [("demo", 2)]
    assert numbers('repo:alice/demo "page login"') == []


def test_search_is_eventually_consistent(tmp_path: Path):
    # 5 s: time enough for a loaded CI machine to read "not indexed yet" before the index catches up.
    with running_simulator(tmp_path / "sim", search_index_delay_s=5.0) as sim:
        sim.create_repo("alice", "demo")
        bot = sim.api()

        def found(q: str) -> list[int]:
            return [
                i["number"] for i in bot.get("/search/issues", params={"q": f"repo:alice/demo {q}"}).json()["items"]
            ]

        def eventually(q: str, want: list[int]) -> float:
            start = time.monotonic()
            while found(q) != want:
                assert time.monotonic() - start < 30, f"{q!r} never found {want}"
                time.sleep(0.5)  # within search's 30 requests a minute
            return time.monotonic() - start

        bot.post(f"{API}/issues", json={"title": "Checkout crashes on empty cart"}).raise_for_status()
        assert found("checkout") == []  # just created: not indexed yet
        assert eventually("checkout", [1]) > 0.3
        bot.patch(f"{API}/issues/1", json={"title": "Payment page times out"}).raise_for_status()
        assert found("checkout") == [1]  # the index still has the old words ...
        assert found("payment") == []  # ... and not the new ones
        eventually("payment", [1])
        assert found("checkout") == []
