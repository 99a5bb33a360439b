"""Injected faults (before and after applying the request) and GitHub's rate-limit accounting."""

from __future__ import annotations

from simulator_runs import SimulatorHandle, running_simulator

API = "/repos/alice/demo"


def test_secondary_rate_limit_429_and_5xx(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    simulator.inject_fault("POST", r"/issues$", 403, retry_after=7)
    resp = bot.post(f"{API}/issues", json={"title": "x"})
    assert resp.status_code == 403 and resp.headers["retry-after"] == "7"
    assert "secondary rate limit" in resp.json()["message"]
    assert bot.get(f"{API}/issues", params={"state": "all"}).json() == []  # "before": nothing applied

    simulator.inject_fault("GET", r"/repos/alice/demo$", 429, retry_after=3)
    resp = bot.get(API)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "3"

    simulator.inject_fault("*", r"^/api/v3/repos/alice/demo$", 502, times=2)
    assert [bot.get(API).status_code for _ in range(3)] == [502, 502, 200]
    simulator.inject_fault("GET", "/rate_limit", 503)
    failed = bot.get("/rate_limit")
    assert failed.status_code == 503 and failed.json()["message"] == "Server Error"


def test_fault_after_applies_then_loses_the_response(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    bot.post(f"{API}/issues", json={"title": "x"})
    simulator.inject_fault("POST", r"/issues/1/comments$", 502, when="after")
    lost = bot.post(f"{API}/issues/1/comments", json={"body": "<!-- shopfloor:wf:progress --> hi"})
    assert lost.status_code == 502
    comments = bot.get(f"{API}/issues/1/comments").json()
    assert [c["body"] for c in comments] == ["<!-- shopfloor:wf:progress --> hi"]
    assert [r["status"] for r in simulator.requests() if r["path"].endswith("/issues/1/comments")] == [502, 200]


def test_rate_limit_headers_and_exhaustion(tmp_path):
    with running_simulator(tmp_path / "sim", rate_limit=5, search_rate_limit=2) as sim:
        sim.create_repo("alice", "demo")
        bot = sim.api()
        seen = [bot.get(API) for _ in range(5)]
        assert [int(r.headers["x-ratelimit-remaining"]) for r in seen] == [4, 3, 2, 1, 0]
        assert {r.headers["x-ratelimit-limit"] for r in seen} == {"5"}
        assert seen[-1].headers["x-ratelimit-used"] == "5" and seen[-1].headers["x-ratelimit-resource"] == "core"
        out = bot.get(API)
        assert out.status_code == 403 and out.json()["message"].startswith("API rate limit exceeded for")
        assert out.headers["x-ratelimit-remaining"] == "0" and int(out.headers["x-ratelimit-reset"]) > 0
        # Buckets are per token, and search has its own.
        assert sim.api("carol").get(API).status_code == 200
        carol = sim.api("carol")
        searches = [carol.get("/search/issues", params={"q": "x"}) for _ in range(3)]
        assert [r.status_code for r in searches] == [200, 200, 403]
        assert searches[0].headers["x-ratelimit-resource"] == "search"


def test_conditional_requests_answer_304_and_cost_nothing(tmp_path):
    with running_simulator(tmp_path / "sim", rate_limit=100) as sim:
        sim.create_repo("alice", "demo")
        bot = sim.api()
        first = bot.get(API)
        etag = first.headers["etag"]
        assert etag.startswith('W/"') and first.headers["x-ratelimit-remaining"] == "99"
        same = bot.get(API, headers={"If-None-Match": etag})
        assert (same.status_code, same.content, same.headers["etag"]) == (304, b"", etag)
        assert same.headers["x-ratelimit-remaining"] == "99"  # not counted
        assert bot.get(API, headers={"If-None-Match": '"something-else"'}).status_code == 200
        # A change gives a new ETag: the old one no longer matches.
        sim.api("alice").post(f"{API}/issues", json={"title": "new"}).raise_for_status()
        issues = bot.get(f"{API}/issues")
        bot.post(f"{API}/issues/1/comments", json={"body": "hi"}).raise_for_status()
        moved = bot.get(f"{API}/issues", headers={"If-None-Match": issues.headers["etag"]})
        assert moved.status_code == 200 and moved.headers["etag"] != issues.headers["etag"]
        # Reading the rate limit does not count against it either.
        before = bot.get("/rate_limit").json()["resources"]["core"]["used"]
        assert bot.get("/rate_limit").json()["resources"]["core"]["used"] == before


def test_a_burst_of_writes_meets_the_secondary_rate_limit(tmp_path):
    with running_simulator(tmp_path / "sim", secondary_writes_per_minute=5, secondary_retry_after_s=7) as sim:
        sim.create_repo("alice", "demo")
        bot = sim.api()
        issue = bot.post(f"{API}/issues", json={"title": "busy"}).json()["number"]
        answers = [bot.post(f"{API}/issues/{issue}/comments", json={"body": f"c{i}"}) for i in range(5)]
        assert [a.status_code for a in answers] == [201, 201, 201, 201, 403]
        refused = answers[-1]
        assert refused.headers["retry-after"] == "7"
        assert refused.json()["message"].startswith("You have exceeded a secondary rate limit")
        assert len(bot.get(f"{API}/issues/{issue}/comments").json()) == 4  # the refused write did nothing
        assert bot.get(API).status_code == 200  # reads are not content-creating
        assert sim.api("carol").post(f"{API}/issues", json={"title": "other token"}).status_code == 201
