"""The writes whose failure modes make shopfloor idempotent and safe: duplicate PRs and refs,
the merge head-SHA guard, conflicts, double merges and self-approval."""

from __future__ import annotations

import base64

from simulator_runs import SimulatorHandle, computed_pull

API = "/repos/alice/demo"


def put_file(client, path: str, text: str, branch: str) -> str:
    sha = None
    got = client.get(f"{API}/contents/{path}", params={"ref": branch})
    if got.status_code == 200:
        sha = got.json()["sha"]
    resp = client.put(
        f"{API}/contents/{path}",
        json={
            "message": f"edit {path}",
            "content": base64.b64encode(text.encode()).decode(),
            "branch": branch,
            "sha": sha,
        },
    )
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["commit"]["sha"]


def branch_from_main(client, name: str) -> None:
    main = client.get(f"{API}/git/ref/heads/main").json()["object"]["sha"]
    assert client.post(f"{API}/git/refs", json={"ref": f"refs/heads/{name}", "sha": main}).status_code == 201


def test_duplicate_pr_and_ref_and_empty_pr_are_422(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    branch_from_main(bot, "topic")
    again = bot.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": "0" * 40})
    assert again.status_code == 422 and again.json()["message"] == "Reference already exists"

    empty = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"})
    assert empty.status_code == 422 and "No commits between main and topic" in str(empty.json()["errors"])
    missing = bot.post(f"{API}/pulls", json={"title": "t", "head": "nope", "base": "main"})
    assert missing.status_code == 422 and missing.json()["message"] == "Validation Failed"

    put_file(bot, "a.txt", "a\n", "topic")
    first = bot.post(f"{API}/pulls", json={"title": "t", "head": "alice:topic", "base": "main"})
    assert first.status_code == 201
    dup = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"})
    assert dup.status_code == 422
    assert dup.json()["errors"][0]["message"] == "A pull request already exists for alice:topic."
    listed = bot.get(f"{API}/pulls", params={"head": "alice:topic", "state": "open"}).json()
    assert [p["number"] for p in listed] == [first.json()["number"]]


def test_merge_guards(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot, alice = simulator.api(), simulator.api("alice")
    branch_from_main(bot, "one")
    head = put_file(bot, "shared.txt", "from one\n", "one")
    pr = bot.post(f"{API}/pulls", json={"title": "one", "head": "one", "base": "main"}).json()
    n = pr["number"]

    own = bot.post(f"{API}/pulls/{n}/reviews", json={"event": "APPROVE"})
    assert own.status_code == 422 and "Can not approve your own pull request" in own.json()["errors"]
    assert alice.post(f"{API}/pulls/{n}/reviews", json={"event": "APPROVE"}).status_code == 200

    stale = bot.put(f"{API}/pulls/{n}/merge", json={"sha": "f" * 40, "merge_method": "squash"})
    assert stale.status_code == 409
    assert stale.json()["message"] == "Head branch was modified. Review and try the merge again."

    # A conflicting change lands on main first: the PR can no longer merge.
    put_file(bot, "shared.txt", "from main\n", "main")
    first = bot.get(f"{API}/pulls/{n}").json()  # GitHub computes mergeability in the background
    assert (first["mergeable"], first["mergeable_state"]) == (None, "unknown")
    got = computed_pull(bot, f"{API}/pulls/{n}")
    assert got["mergeable"] is False and got["mergeable_state"] == "dirty"
    conflict = bot.put(f"{API}/pulls/{n}/merge", json={"sha": head})
    assert conflict.status_code == 405 and conflict.json()["message"] == "Pull Request is not mergeable"

    branch_from_main(bot, "two")
    head2 = put_file(bot, "other.txt", "two\n", "two")
    pr2 = bot.post(f"{API}/pulls", json={"title": "two", "head": "two", "base": "main"}).json()
    assert pr2["mergeable"] is None  # not computed yet when the pull request is created
    assert computed_pull(bot, f"{API}/pulls/{pr2['number']}")["mergeable"] is True
    ok = bot.put(f"{API}/pulls/{pr2['number']}/merge", json={"sha": head2, "merge_method": "rebase"})
    assert ok.status_code == 200 and ok.json()["merged"] is True
    twice = bot.put(f"{API}/pulls/{pr2['number']}/merge", json={"sha": head2})
    assert twice.status_code == 405
    assert bot.get(f"{API}/contents/other.txt", params={"ref": "main"}).status_code == 200


def test_update_branch_merges_base_into_head(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    branch_from_main(bot, "topic")
    put_file(bot, "topic.txt", "t\n", "topic")
    n = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"}).json()["number"]
    main_tip = put_file(bot, "main.txt", "m\n", "main")
    resp = bot.put(f"{API}/pulls/{n}/update-branch")
    assert resp.status_code == 202
    head = bot.get(f"{API}/pulls/{n}").json()["head"]["sha"]
    parents = [p["sha"] for p in bot.get(f"{API}/commits/{head}").json()["parents"]]
    assert main_tip in parents
    assert bot.get(f"{API}/contents/main.txt", params={"ref": "topic"}).status_code == 200
