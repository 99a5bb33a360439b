"""What GitHub computes in the background: `mergeable` (null on the first read after the head or
base moved, then true or false), and a pull request's head after a push to its branch (moved,
with `synchronize` and CI, a moment after the push was answered)."""

from __future__ import annotations

import base64
from pathlib import Path

from simulator_runs import computed_pull, running_simulator
from webhook_receiver import receiving

API = "/repos/alice/demo"


def test_mergeable_is_null_until_computed_and_a_pushed_head_moves_later(tmp_path: Path):
    with receiving() as receiver, running_simulator(tmp_path / "sim", pr_sync_delay_s=5.0) as sim:
        sim.create_repo("alice", "demo")
        bot = sim.api()
        bot.post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["pull_request"]}).raise_for_status()
        main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
        bot.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": main}).raise_for_status()

        def commit(name: str) -> str:
            body = {"message": name, "content": base64.b64encode(b"x\n").decode(), "branch": "topic"}
            return bot.put(f"{API}/contents/{name}", json=body).json()["commit"]["sha"]

        first = commit("a.txt")
        created = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"}).json()
        assert (created["mergeable"], created["mergeable_state"]) == (None, "unknown")
        url = f"{API}/pulls/{created['number']}"
        assert bot.get(url).json()["mergeable"] is None  # this read starts the job ...
        assert bot.get(url).json()["mergeable"] is True  # ... and the next one sees its result

        second = commit(
            "b.txt"
        )  # its pull request moves 5 s later: time enough to read it first, even on a loaded machine
        stale = bot.get(url).json()
        assert stale["head"]["sha"] == first  # the push was answered; the pull request has not moved yet
        sim.wait_idle()
        moved = computed_pull(bot, url)
        assert moved["head"]["sha"] == second and moved["mergeable"] is True
        sync = [r.payload() for r in receiver.received if r.event == "pull_request" and r.action == "synchronize"]
        assert [(p["before"], p["after"]) for p in sync] == [(first, second)]
        assert sync[0]["pull_request"]["mergeable"] is None  # webhooks carry no fresh computation


def test_githubs_test_merge_ref_follows_the_pull_request(simulator, tmp_path: Path):
    """`refs/pull/<n>/merge`: the merge of the head into the base, made by the mergeability job,
    fetched as CI systems fetch it; gone when the two conflict."""
    from webhook_receiver import run_git

    simulator.create_repo("alice", "demo")
    bot = simulator.api()
    main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
    bot.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": main}).raise_for_status()

    def put(name: str, text: str, branch: str) -> str:
        sha = bot.get(f"{API}/contents/{name}", params={"ref": branch})
        body = {"message": name, "content": base64.b64encode(text.encode()).decode(), "branch": branch}
        if sha.status_code == 200:
            body["sha"] = sha.json()["sha"]
        return bot.put(f"{API}/contents/{name}", json=body).json()["commit"]["sha"]

    head = put("shared.txt", "from topic\n", "topic")
    pr = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"}).json()
    url = f"{API}/pulls/{pr['number']}"
    assert computed_pull(bot, url)["mergeable"] is True
    home, work = tmp_path / "home", tmp_path / "work"
    run_git(tmp_path, "init", "-q", str(work), home=home)
    run_git(work, "fetch", "-q", simulator.git_url("alice", "demo"), f"refs/pull/{pr['number']}/merge", home=home)
    parents = run_git(work, "log", "-1", "--format=%P", "FETCH_HEAD", home=home).split()
    assert parents == [main, head]  # a merge commit of base and head
    assert run_git(work, "show", "FETCH_HEAD:shared.txt", home=home) == "from topic\n"

    put("shared.txt", "from main\n", "main")  # now they conflict
    assert computed_pull(bot, url)["mergeable"] is False
    gone = bot.get(f"{API}/git/matching-refs/pull/{pr['number']}/merge").json()
    assert gone == []
