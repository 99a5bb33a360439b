"""Simulated CI: a `ci` check run per PR head, failures carry the test output, a newer push gets
its own run and an old result never lands on the new head."""

from __future__ import annotations

from pathlib import Path

from githubkit.webhooks import parse_obj
from simulator_runs import BOT_TOKEN, SimulatorHandle, computed_pull
from webhook_receiver import receiving, run_git

API = "/repos/alice/calc"


def package(root: Path) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_ops.py").write_text("from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


def commit_and_push(work: Path, home: Path, body: str, message: str) -> str:
    (work / "calc" / "ops.py").write_text(f"def add(a, b):\n    return {body}\n")
    run_git(work, "commit", "-qam", message, home=home)
    run_git(work, "push", "-q", "origin", "HEAD:topic", home=home)
    return run_git(work, "rev-parse", "HEAD", home=home).strip()


def ci_runs(client, sha: str) -> list[dict]:
    return client.get(f"{API}/commits/{sha}/check-runs").json()["check_runs"]


def test_failing_push_then_fix_supersedes(simulator: SimulatorHandle, tmp_path: Path):
    simulator.create_repo("alice", "calc", source_dir=package(tmp_path / "src"), ci_command="python -m pytest -q")
    bot = simulator.api()
    home, work = tmp_path / "home", tmp_path / "work"
    with receiving() as receiver:
        simulator.api("alice").post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["*"]})
        run_git(tmp_path, "clone", "-q", simulator.git_url("alice", "calc", token=BOT_TOKEN), str(work), home=home)
        broken = commit_and_push(work, home, "a - b", "break add")
        pr = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"}).json()
        fixed = commit_and_push(work, home, "b + a", "fix add")  # pushed while the first run may still go
        simulator.wait_idle()

        (old,) = ci_runs(bot, broken)
        assert (old["name"], old["status"], old["conclusion"]) == ("ci", "completed", "failure")
        assert "assert" in old["output"]["text"] and "failed" in old["output"]["text"]
        assert old["app"]["slug"] == "shopfloor-sim-ci"
        (new,) = ci_runs(bot, fixed)
        assert (new["status"], new["conclusion"]) == ("completed", "success")
        got = computed_pull(bot, f"{API}/pulls/{pr['number']}")
        assert got["head"]["sha"] == fixed and got["mergeable_state"] == "clean"

        sync = [r.payload() for r in receiver.received if r.event == "pull_request" and r.action == "synchronize"]
        assert [(p["before"], p["after"]) for p in sync] == [(broken, fixed)]
        parse_obj("pull_request", sync[0])
        completed = [
            r.payload()["check_run"]["head_sha"]
            for r in receiver.received
            if r.event == "check_run" and r.action == "completed"
        ]
        assert sorted(completed) == sorted([broken, fixed])
        suites = [r.payload()["action"] for r in receiver.received if r.event == "check_suite"]
        assert sorted(suites) == ["completed", "completed", "requested", "requested"]  # a suite per head
        for r in receiver.received:
            if r.event in ("check_run", "check_suite", "push"):
                parse_obj(r.event, r.payload())


def test_ci_timeout(tmp_path: Path):
    from simulator_runs import running_simulator

    with running_simulator(tmp_path / "slow", ci_timeout_s=1) as sim:
        sim.create_repo("alice", "calc", source_dir=package(tmp_path / "src"), ci_command="sleep 30")
        bot = sim.api()
        main = bot.get(f"{API}/branches/main").json()["commit"]["sha"]
        bot.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": main})
        head = bot.put(f"{API}/contents/x.txt", json={"message": "x", "content": "eA==", "branch": "topic"}).json()
        bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"})
        sim.wait_idle()
        (run,) = ci_runs(bot, head["commit"]["sha"])
        assert run["conclusion"] == "timed_out"


def test_ci_on_the_default_branch_runs_on_its_pushes_only_when_asked(simulator: SimulatorHandle, tmp_path: Path):
    # This CI fails exactly on a commit whose message closes an issue: a squash merge's.
    red_on_merge = "! git log -1 --format=%B | grep -q 'Fixes #'"
    simulator.create_repo(
        "alice", "mainci", source_dir=package(tmp_path / "a"), ci_command=red_on_merge, ci_on_default_branch=True
    )
    simulator.create_repo("alice", "prci", source_dir=package(tmp_path / "b"), ci_command=red_on_merge)
    bot = simulator.api()
    for repo in ("mainci", "prci"):
        api = f"/repos/alice/{repo}"
        main = bot.get(f"{api}/branches/main").json()["commit"]["sha"]
        bot.post(f"{api}/git/refs", json={"ref": "refs/heads/topic", "sha": main})
        head = bot.put(f"{api}/contents/x.txt", json={"message": "x", "content": "eA==", "branch": "topic"}).json()
        pr = bot.post(f"{api}/pulls", json={"title": "t", "head": "topic", "base": "main"}).json()
        simulator.wait_idle()
        (pr_run,) = bot.get(f"{api}/commits/{head['commit']['sha']}/check-runs").json()["check_runs"]
        assert pr_run["conclusion"] == "success", pr_run
        merged = bot.put(
            f"{api}/pulls/{pr['number']}/merge",
            json={"merge_method": "squash", "commit_title": "t (#1)", "commit_message": "Fixes #7"},
        )
        assert merged.status_code == 200, merged.text
        simulator.wait_idle()
        runs = bot.get(f"{api}/commits/{merged.json()['sha']}/check-runs").json()["check_runs"]
        if repo == "prci":
            assert runs == [], runs  # CI on pull request heads only, as before
            continue
        (run,) = runs
        assert (run["name"], run["status"], run["conclusion"]) == ("ci", "completed", "failure"), run
        assert run["head_sha"] == bot.get(f"{api}/branches/main").json()["commit"]["sha"]
