"""Issues and labels as shopfloor uses them: filters, label events, closing keywords on merge,
and the control endpoints."""

from __future__ import annotations

import base64

import httpx
from simulator_runs import SimulatorHandle
from webhook_receiver import receiving

API = "/repos/alice/demo"


def test_issue_listing_filters_and_labels(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot, bob = simulator.api(), simulator.api("bob")
    with receiving() as receiver:
        simulator.api("alice").post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["issues"]})
        bot.post(f"{API}/issues", json={"title": "one", "labels": ["bug", "p1"]})
        stamp = bot.get(f"{API}/issues/1").json()["created_at"]
        bob.post(f"{API}/issues", json={"title": "two"})
        bot.patch(f"{API}/issues/2", json={"state": "closed", "state_reason": "not_planned"})
        set_to = bot.put(f"{API}/issues/2/labels", json={"labels": ["wontfix"]}).json()
        assert [lab["name"] for lab in set_to] == ["wontfix"]
        assert bot.delete(f"{API}/issues/2/labels/nope").status_code == 404
        simulator.wait_idle()
        assert receiver.events() == ["ping", "issues.opened", "issues.opened", "issues.closed", "issues.labeled"]

    def listed(**params: str) -> list[int]:
        return [i["number"] for i in bot.get(f"{API}/issues", params=params).json()]

    assert listed() == [1]
    assert listed(state="all") == [2, 1]
    assert listed(state="closed") == [2]
    assert listed(state="all", labels="bug,p1") == [1]
    assert listed(state="all", labels="bug,wontfix") == []
    assert listed(state="all", creator="bob") == [2]
    assert listed(state="all", since=stamp) == [2, 1]
    assert listed(state="all", since="2999-01-01T00:00:00Z") == []
    closed = bot.get(f"{API}/issues/2").json()
    assert (closed["state_reason"], closed["closed_by"]["login"]) == ("not_planned", "shopfloor[bot]")
    names = {lab["name"] for lab in bot.get(f"{API}/labels").json()}
    assert names == {"bug", "p1", "wontfix"}  # unknown labels were created on use
    bad = bot.post(f"{API}/issues", json={"body": "no title"})
    assert bad.status_code == 422 and bad.json()["message"]


def test_closing_keywords_close_issues_only_when_merging_into_the_default_branch(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    for title in ("a", "b", "c"):
        bot.post(f"{API}/issues", json={"title": title})
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    for branch in ("release", "fix-b", "fix-ac"):
        bot.post(f"{API}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main})
    content = base64.b64encode(b"x\n").decode()
    bot.put(f"{API}/contents/b.txt", json={"message": "b", "content": content, "branch": "fix-b"})
    bot.put(f"{API}/contents/ac.txt", json={"message": "ac", "content": content, "branch": "fix-ac"})

    into_release = bot.post(
        f"{API}/pulls", json={"title": "b", "head": "fix-b", "base": "release", "body": "Fixes #2"}
    ).json()
    assert bot.put(f"{API}/pulls/{into_release['number']}/merge").status_code == 200
    assert bot.get(f"{API}/issues/2").json()["state"] == "open"

    pr = bot.post(
        f"{API}/pulls",
        json={"title": "Resolves #1", "head": "fix-ac", "base": "main", "body": "also CLOSES #3, mentions #2"},
    ).json()
    assert bot.put(f"{API}/pulls/{pr['number']}/merge", json={"merge_method": "squash"}).status_code == 200
    states = {n: bot.get(f"{API}/issues/{n}").json()["state"] for n in (1, 2, 3)}
    assert states == {1: "closed", 2: "open", 3: "closed"}
    assert bot.get(f"{API}/issues/1").json()["state_reason"] == "completed"


def test_control_endpoints(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    with httpx.Client(base_url=simulator.base_url) as c:
        dup = c.post("/_sim/repos", json={"owner": "alice", "name": "demo"})
        assert dup.status_code == 422 and dup.json()["message"]
        assert c.post("/_sim/repos", json={"owner": "alice"}).status_code == 422
        assert c.post("/_sim/faults", json={"path_regex": "(", "status": 500}).status_code == 422
    simulator.api().get(API)
    assert {
        "method": "GET",
        "path": "/api/v3" + API,
        "status": 200,
        "login": "shopfloor[bot]",
    }.items() <= simulator.requests()[-1].items()
    assert all("token" not in str(r) for r in simulator.requests())
    simulator.reset()
    assert simulator.api().get(API).status_code == 404
    assert simulator.deliveries() == [] and not (simulator.data_dir / "repos" / "alice").exists()
    simulator.create_repo("alice", "demo")  # a reset simulator is fully usable again
    assert simulator.api().get(API).status_code == 200
