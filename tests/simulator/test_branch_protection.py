"""Branch protection as GitHub applies it: admins set it, readers see the required checks on the
branch, direct pushes and REST ref moves are refused with GitHub's words and no ref moves, and a
pull request merges only with its required checks green, enough approvals and (strict) an
up-to-date head."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import githubkit_schemas.latest.models as m
from pydantic import TypeAdapter
from simulator_runs import BOT_TOKEN, SimulatorHandle, user_token
from webhook_receiver import git_env, run_git

API = "/repos/alice/demo"
RULES: dict[str, Any] = {
    "required_status_checks": {"strict": True, "contexts": ["ci"]},
    "enforce_admins": False,
    "required_pull_request_reviews": {"required_approving_review_count": 1},
    "restrictions": None,
}


def _sha(sim: SimulatorHandle, branch: str) -> str | None:
    resp = sim.api().get(f"{API}/branches/{branch}")
    return resp.json()["commit"]["sha"] if resp.status_code == 200 else None


def _push(tmp_path: Path, sim: SimulatorHandle, token: str, *refspec: str, commit: bool = True) -> str:
    """Commit a change on main's tip and push `refspec` with `token`; git's output when refused ("" if not)."""
    home, work = tmp_path / "home", tmp_path / "work"
    if not work.exists():
        run_git(tmp_path, "clone", "-q", sim.git_url("alice", "demo"), str(work), home=home)
    if commit:
        with (work / "notes.txt").open("a") as notes:
            notes.write("more\n")
        run_git(work, "add", "-A", home=home)
        run_git(work, "commit", "-qm", "notes", home=home)
    done = subprocess.run(
        ["git", "push", sim.git_url("alice", "demo", token), *refspec],
        cwd=work,
        env=git_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return "" if done.returncode == 0 else done.stderr


def test_admins_set_protection_and_readers_see_the_required_checks(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    alice, bot = simulator.api("alice"), simulator.api()
    url = f"{API}/branches/main/protection"
    assert bot.put(url, json=RULES).status_code == 403  # the App has no Administration permission
    assert alice.get(url).json()["message"] == "Branch not protected"
    assert alice.put(url, json={"enforce_admins": None}).status_code == 422  # GitHub requires all four keys
    put = alice.put(url, json=RULES)
    assert put.status_code == 200
    shape = TypeAdapter(m.ProtectedBranch).validate_python(put.json())
    assert shape.required_status_checks and shape.required_status_checks.contexts == ["ci"]
    assert alice.get(url).json() == put.json()

    branch = bot.get(f"{API}/branches/main").json()
    TypeAdapter(m.BranchWithProtection).validate_python(branch)
    assert branch["protected"] is True and branch["protection"]["required_status_checks"]["contexts"] == ["ci"]
    assert [b["protected"] for b in bot.get(f"{API}/branches").json()] == [True]

    assert alice.delete(url).status_code == 204
    assert alice.get(url).status_code == 404 and bot.get(f"{API}/branches/main").json()["protected"] is False


def test_direct_pushes_to_a_protected_branch_are_refused_and_move_nothing(simulator: SimulatorHandle, tmp_path: Path):
    simulator.create_repo("alice", "demo")
    simulator.set_permission("alice", "demo", "carol", "write")
    assert simulator.api("alice").put(f"{API}/branches/main/protection", json=RULES).status_code == 200
    main = _sha(simulator, "main")

    said = _push(tmp_path, simulator, user_token("carol"), "HEAD:refs/heads/main")
    assert "GH006: Protected branch update failed for refs/heads/main." in said
    assert "Changes must be made through a pull request." in said and 'Required status check "ci" is expected.' in said
    assert "[remote rejected]" in said and _sha(simulator, "main") == main
    said = _push(tmp_path, simulator, BOT_TOKEN, "HEAD:refs/heads/main", commit=False)
    assert "GH006" in said and _sha(simulator, "main") == main
    # Other branches take pushes as before.
    assert _push(tmp_path, simulator, BOT_TOKEN, "HEAD:refs/heads/shopfloor/issue-1", commit=False) == ""

    # The owner is an admin, and admins are not held to the rules (enforce_admins false) ...
    assert _push(tmp_path, simulator, user_token("alice"), "HEAD:refs/heads/main", commit=False) == ""
    pushed = _sha(simulator, "main")
    assert pushed != main
    # ... except that nobody deletes a protected branch or force-pushes to it.
    said = _push(tmp_path, simulator, user_token("alice"), f"+{main}:refs/heads/main", commit=False)
    assert "Cannot force-push to this branch" in said and _sha(simulator, "main") == pushed
    said = _push(tmp_path, simulator, user_token("alice"), ":refs/heads/main", commit=False)
    assert "Cannot delete this protected branch" in said and _sha(simulator, "main") == pushed

    # The REST API's ways of moving a branch are held to the same rules.
    carol = simulator.api("carol")
    moved = carol.patch(f"{API}/git/refs/heads/main", json={"sha": main, "force": True})
    assert moved.status_code == 422 and "Protected branch update failed" in moved.json()["message"]
    body = {"message": "x", "content": base64.b64encode(b"x\n").decode(), "branch": "main"}
    written = carol.put(f"{API}/contents/x.txt", json=body)
    assert written.status_code == 409 and "Changes must be made through a pull request." in written.json()["message"]
    assert _sha(simulator, "main") == pushed


def test_a_pull_request_merges_only_when_the_protection_is_satisfied(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    for login in ("carol", "dave"):
        simulator.set_permission("alice", "demo", login, "write")
    alice, bot, carol, dave = (simulator.api(x) for x in ("alice", None, "carol", "dave"))
    assert alice.put(f"{API}/branches/main/protection", json=RULES).status_code == 200
    main = _sha(simulator, "main")
    assert bot.post(f"{API}/git/refs", json={"ref": "refs/heads/shopfloor/issue-1", "sha": main}).status_code == 201
    body = {"message": "fix", "content": base64.b64encode(b"fixed\n").decode(), "branch": "shopfloor/issue-1"}
    head = bot.put(f"{API}/contents/fix.txt", json=body).json()["commit"]["sha"]
    pr = bot.post(f"{API}/pulls", json={"title": "Fix", "head": "shopfloor/issue-1", "base": "main"}).json()
    merge = f"{API}/pulls/{pr['number']}/merge"

    def refused() -> str:
        resp = bot.put(merge, json={"sha": head, "merge_method": "squash"})
        assert resp.status_code == 405, resp.text
        return resp.json()["message"]

    assert refused() == "At least 1 approving review is required by reviewers with write access."
    # The author cannot approve; a reader's approval does not count.
    assert bot.post(f"{API}/pulls/{pr['number']}/reviews", json={"event": "APPROVE"}).status_code == 422
    by_reader = simulator.api("erin").post(
        f"{API}/pulls/{pr['number']}/reviews", json={"event": "APPROVE", "commit_id": head}
    )
    assert by_reader.status_code == 200, by_reader.text
    assert refused().startswith("At least 1 approving review")
    approve = dave.post(f"{API}/pulls/{pr['number']}/reviews", json={"event": "APPROVE", "commit_id": head})
    assert approve.status_code == 200, approve.text
    assert refused() == 'Required status check "ci" is expected.'
    carol.post(f"{API}/statuses/{head}", json={"state": "failure", "context": "ci"})
    assert refused() == 'Required status check "ci" is failing.'
    carol.post(f"{API}/statuses/{head}", json={"state": "success", "context": "ci"})

    # strict: main moved (an admin's commit) since the branch was made, so the head is out of date.
    alice_body = {"message": "admin", "content": base64.b64encode(b"a\n").decode(), "branch": "main"}
    assert alice.put(f"{API}/contents/admin.txt", json=alice_body).status_code == 201
    assert refused() == "Head branch is out of date. Update the branch and try the merge again."
    assert (
        alice.put(
            f"{API}/branches/main/protection",
            json={**RULES, "required_status_checks": {"strict": False, "contexts": ["ci"]}},
        ).status_code
        == 200
    )
    merged = bot.put(merge, json={"sha": head, "merge_method": "squash"})
    assert merged.status_code == 200 and merged.json()["merged"] is True
