"""The whole issue → branch → PR → CI → review → merge flow, driven by PyGithub and the `git`
command against the simulator, exactly as shopfloor drives real GitHub."""

from __future__ import annotations

from pathlib import Path

import pytest
from github import Auth, Github
from simulator_runs import BOT_TOKEN, SimulatorHandle, user_token
from webhook_receiver import receiving, run_git

from shopfloor.github_signature import verify

SECRET = "flow-secret"


def gh(handle: SimulatorHandle, token: str) -> Github:
    return Github(
        base_url=handle.api_url,
        auth=Auth.Token(token),
        retry=None,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )


def tiny_package(root: Path, *, correct: bool) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    body = "a + b" if correct else "a - b"
    (root / "calc" / "ops.py").write_text(f"def add(a, b):\n    return {body}\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_ops.py").write_text(
        "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


@pytest.fixture
def receiver():
    with receiving() as r:
        yield r


def test_issue_to_merge_with_pygithub_and_git(simulator: SimulatorHandle, receiver, tmp_path: Path):
    src = tiny_package(tmp_path / "src", correct=False)
    simulator.create_repo("alice", "calc", source_dir=src, ci_command="python -m pytest -q")
    alice, bot = gh(simulator, user_token("alice")), gh(simulator, BOT_TOKEN)
    repo_a = alice.get_repo("alice/calc")
    repo_a.create_hook("web", {"url": receiver.url, "content_type": "json", "secret": SECRET}, events=["*"])

    issue = repo_a.create_issue(title="add() subtracts", body="2 + 3 should be 5")
    assert issue.number == 1

    # A developer (the bot's token) clones, fixes and pushes a branch with plain git.
    home, work = tmp_path / "home", tmp_path / "work"
    run_git(tmp_path, "clone", simulator.git_url("alice", "calc", token=BOT_TOKEN), str(work), home=home)
    run_git(work, "checkout", "-b", "shopfloor/fix-1", home=home)
    (work / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    run_git(work, "commit", "-am", "Fix add()", home=home)
    run_git(work, "push", "origin", "shopfloor/fix-1", home=home)
    head_sha = run_git(work, "rev-parse", "HEAD", home=home).strip()

    repo_b = bot.get_repo("alice/calc")
    pr = repo_b.create_pull(title="Fix add()", body="Fixes #1", head="shopfloor/fix-1", base="main")
    assert pr.head.sha == head_sha
    simulator.wait_idle()

    runs = list(repo_b.get_commit(head_sha).get_check_runs())
    assert [(r.name, r.status, r.conclusion) for r in runs] == [("ci", "completed", "success")]
    assert "passed" in runs[0].output.text

    review = alice.get_repo("alice/calc").get_pull(pr.number).create_review(event="APPROVE", body="LGTM")
    assert review.state == "APPROVED"

    result = repo_b.get_pull(pr.number).merge(merge_method="squash", sha=head_sha)
    assert result.merged
    simulator.wait_idle()

    assert repo_a.get_issue(1).state == "closed"
    assert repo_a.get_issue(1).state_reason == "completed"
    merged = repo_a.get_pull(pr.number)
    assert merged.merged and merged.merged_by.login == "shopfloor[bot]"
    assert repo_a.get_branch("main").commit.sha == merged.merge_commit_sha
    assert b"a + b" in repo_a.get_contents("calc/ops.py", ref="main").decoded_content

    fresh = tmp_path / "fresh"
    run_git(tmp_path, "clone", simulator.git_url("alice", "calc"), str(fresh), home=home)
    assert "a + b" in (fresh / "calc" / "ops.py").read_text()

    events = receiver.events()
    wanted = [
        "ping",
        "issues.opened",
        "push",
        "pull_request.opened",
        "check_run.completed",
        "pull_request_review.submitted",
        "pull_request.closed",
        "issues.closed",
    ]
    positions = [events.index(e) for e in wanted]
    assert positions == sorted(positions), events
    for delivery in receiver.received:
        assert verify(SECRET.encode(), delivery.body, delivery.headers["x-hub-signature-256"])
    closed = next(d.payload() for d in receiver.received if d.event == "pull_request" and d.action == "closed")
    assert closed["pull_request"]["merged"] is True
