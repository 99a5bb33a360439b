"""Forks: a stranger forks, pushes to the fork and opens a pull request on the parent, the way
most outside contributions reach a repository. The parent keeps the head under
`refs/pull/<n>/head`, runs CI on it, hears of every push to the fork's branch and merges it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from github import Auth, Github, GithubException
from simulator_runs import BOT_TOKEN, SimulatorHandle, app_keys, user_token
from webhook_receiver import git_env, receiving, run_git

SECRET = "fork-secret"


def gh(handle: SimulatorHandle, token: str) -> Github:
    return Github(
        base_url=handle.api_url,
        auth=Auth.Token(token),
        retry=None,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )


def buggy_package(root: Path) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_ops.py").write_text(
        "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


def ls_remote(url: str, home: Path) -> dict[str, str]:
    out = subprocess.run(
        ["git", "ls-remote", url], capture_output=True, text=True, check=True, env=git_env(home), timeout=60
    ).stdout
    return {ref: sha for sha, ref in (line.split("\t") for line in out.splitlines())}


def test_a_strangers_fork_pull_request_is_built_synchronized_and_merged(simulator: SimulatorHandle, tmp_path: Path):
    simulator.create_repo("alice", "calc", source_dir=buggy_package(tmp_path / "src"), ci_command="python -m pytest -q")
    alice, carol, bot = gh(simulator, user_token("alice")), gh(simulator, user_token("carol")), gh(simulator, BOT_TOKEN)
    home = tmp_path / "home"
    with receiving() as receiver:
        alice.get_repo("alice/calc").create_hook(
            "web", {"url": receiver.url, "content_type": "json", "secret": SECRET}, events=["*"]
        )

        fork = carol.get_repo("alice/calc").create_fork()
        assert (fork.full_name, fork.fork, fork.parent.full_name) == ("carol/calc", True, "alice/calc")
        assert carol.get_repo("alice/calc").create_fork().id == fork.id  # asking again: the same fork
        as_app = {"Authorization": f"Bearer {Auth.AppAuth(4242, app_keys()[0]).token}"}
        with simulator.api() as c:  # the App is installed on alice's repositories, not on carol's fork
            assert c.get("/repos/alice/calc/installation", headers=as_app).status_code == 200
            assert c.get("/repos/carol/calc/installation", headers=as_app).status_code == 404
        assert "refs/heads/main" in ls_remote(simulator.git_url("carol", "calc"), home)

        # carol fixes add() on a branch of her fork; the app, not installed there, may not push to it.
        work = tmp_path / "work"
        run_git(tmp_path, "clone", simulator.git_url("carol", "calc", token=user_token("carol")), str(work), home=home)
        run_git(work, "checkout", "-b", "fix-add", home=home)
        (work / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
        run_git(work, "commit", "-qam", "Fix add()", home=home)
        run_git(work, "push", "-q", "origin", "fix-add", home=home)
        first = run_git(work, "rev-parse", "HEAD", home=home).strip()
        with pytest.raises(AssertionError, match="403|denied|not accessible"):
            run_git(
                work,
                "push",
                "-q",
                simulator.git_url("carol", "calc", token=BOT_TOKEN),
                "HEAD:refs/heads/bot",
                home=home,
            )
        assert "refs/heads/fix-add" not in ls_remote(simulator.git_url("alice", "calc"), home)

        pr = carol.get_repo("alice/calc").create_pull(
            title="Fix add()", body="Fixes #1?", head="carol:fix-add", base="main"
        )
        assert (pr.head.label, pr.head.ref, pr.head.sha, pr.head.repo.full_name) == (
            "carol:fix-add",
            "fix-add",
            first,
            "carol/calc",
        )
        assert (pr.base.repo.full_name, pr.user.login) == ("alice/calc", "carol")
        assert ls_remote(simulator.git_url("alice", "calc"), home)[f"refs/pull/{pr.number}/head"] == first
        simulator.wait_idle()
        runs = list(bot.get_repo("alice/calc").get_commit(first).get_check_runs())
        assert [(r.name, r.conclusion) for r in runs] == [("ci", "success")]  # the fork's code, built by the parent

        # A second push to the fork's branch moves the PR, its ref and its CI, and the parent hears of it.
        (work / "NOTES.md").write_text("add() adds now\n")
        run_git(work, "add", "NOTES.md", home=home)
        run_git(work, "commit", "-qm", "Notes", home=home)
        run_git(work, "push", "-q", "origin", "fix-add", home=home)
        second = run_git(work, "rev-parse", "HEAD", home=home).strip()
        assert alice.get_repo("alice/calc").get_pull(pr.number).head.sha == second
        assert ls_remote(simulator.git_url("alice", "calc"), home)[f"refs/pull/{pr.number}/head"] == second
        simulator.wait_idle()
        synced = [
            r.payload()
            for r in receiver.received
            if r.event == "pull_request" and r.payload()["action"] == "synchronize"
        ]
        assert [(p["before"], p["after"], p["pull_request"]["head"]["repo"]["full_name"]) for p in synced] == [
            (first, second, "carol/calc")
        ]
        opened = [
            r.payload() for r in receiver.received if r.event == "pull_request" and r.payload()["action"] == "opened"
        ]
        assert opened[0]["pull_request"]["head"]["repo"]["fork"] is True
        # An event of alice/calc, but to its repository hook: `installation` is for the App's webhook.
        assert "installation" not in opened[0]

        # A branch of the same name in the parent is another head: the fork's PR stays where it is.
        base_work = tmp_path / "base-work"
        run_git(
            tmp_path, "clone", simulator.git_url("alice", "calc", token=user_token("alice")), str(base_work), home=home
        )
        run_git(base_work, "checkout", "-b", "fix-add", home=home)
        (base_work / "OTHER.md").write_text("unrelated\n")
        run_git(base_work, "add", "OTHER.md", home=home)
        run_git(base_work, "commit", "-qm", "Other", home=home)
        run_git(base_work, "push", "-q", "origin", "fix-add", home=home)
        assert alice.get_repo("alice/calc").get_pull(pr.number).head.sha == second
        listed = alice.get_repo("alice/calc").get_pulls(head="carol:fix-add")
        assert [p.number for p in listed] == [pr.number]
        assert list(alice.get_repo("alice/calc").get_pulls(head="alice:fix-add")) == []
        assert list(alice.get_repo("alice/calc").get_pulls(head="nobody:fix-add")) == []  # no such fork

        merged = bot.get_repo("alice/calc").get_pull(pr.number).merge(merge_method="squash", sha=second)
        assert merged.merged
        main = alice.get_repo("alice/calc")
        assert b"a + b" in main.get_contents("calc/ops.py", ref="main").decoded_content
        assert fork.get_branch("fix-add").commit.sha == second  # the contributor's branch is theirs


def test_cross_repository_heads_that_are_not_a_fork_are_refused(simulator: SimulatorHandle, tmp_path: Path):
    simulator.create_repo("alice", "calc", source_dir=buggy_package(tmp_path / "src"))
    simulator.create_repo("dave", "calc")  # same name, not a fork of alice/calc
    dave, bot = simulator.api("dave"), simulator.api()
    refused = dave.post("/repos/alice/calc/pulls", json={"title": "x", "head": "dave:main", "base": "main"})
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "head"
    nobody = dave.post("/repos/alice/calc/pulls", json={"title": "x", "head": "erin:main", "base": "main"})
    assert nobody.status_code == 422
    assert bot.post("/repos/alice/calc/forks").status_code == 403  # an app cannot own a fork
    assert dave.post("/repos/alice/calc/forks").status_code == 422  # dave/calc is taken by another repository
    own = simulator.api("alice").post("/repos/alice/calc/forks")
    assert own.status_code == 422  # the owner's fork would be the repository itself
    fork = simulator.api("erin").post("/repos/alice/calc/forks", json={"name": "renamed"})
    assert fork.status_code == 422 and "name" in fork.text
    with pytest.raises(GithubException) as no_branch:
        gh(simulator, user_token("erin")).get_repo("alice/calc").create_fork()
        gh(simulator, user_token("erin")).get_repo("alice/calc").create_pull(title="x", head="erin:nope", base="main")
    assert no_branch.value.status == 422
