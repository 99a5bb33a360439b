"""GitHub's credential and App-permission edges: a token the simulator does not know is a 401,
and the App's bot may not change workflow files without the App's `workflows` permission."""

from __future__ import annotations

import base64
import subprocess
import time
from pathlib import Path

import httpx
import jwt
from simulator_runs import BOT_TOKEN, SimulatorHandle, app_keys, running_simulator, user_token
from webhook_receiver import git_env, run_git

from shopfloor.simulator.config import SHOPFLOOR_APP_PERMISSIONS

API = "/repos/alice/demo"


def _push(tmp_path: Path, sim: SimulatorHandle, token: str, path: str, branch: str) -> subprocess.CompletedProcess[str]:
    """Clone alice/demo, commit a change to `path` and push it to `branch` with `token`."""
    home, work = tmp_path / "home", tmp_path / f"work-{branch}"
    run_git(tmp_path, "clone", "-q", sim.git_url("alice", "demo"), str(work), home=home)
    target = work / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("on: push\njobs: {}\n")
    run_git(work, "add", "-A", home=home)
    run_git(work, "commit", "-qm", f"change {path}", home=home)
    return subprocess.run(
        ["git", "push", sim.git_url("alice", "demo", token), f"HEAD:refs/heads/{branch}"],
        cwd=work,
        env=git_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _branch(sim: SimulatorHandle, branch: str) -> int:
    return sim.api().get(f"{API}/branches/{branch}").status_code


def test_a_token_the_simulator_never_issued_is_bad_credentials(simulator: SimulatorHandle, tmp_path: Path):
    simulator.create_repo("alice", "demo")
    with httpx.Client(base_url=simulator.api_url) as c:
        for token in ("made-up", "ghp_0123456789abcdef", "shopfloor-simulator-bot"):  # the last: not this one's
            resp = c.get(API, headers={"Authorization": f"token {token}"})
            assert (resp.status_code, resp.json()["message"]) == (401, "Bad credentials"), token
        assert c.get(API, headers={"Authorization": f"token {BOT_TOKEN}"}).status_code == 200
    refused = _push(tmp_path, simulator, "made-up", "README.md", "feature")
    assert refused.returncode != 0 and _branch(simulator, "feature") == 404


def test_installation_tokens_carry_the_apps_declared_permissions(tmp_path: Path):
    private, public = app_keys()
    now = int(time.time())
    token = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": "7"}, private, algorithm="RS256")
    with running_simulator(tmp_path / "sim", app_id=7, app_public_keys={7: public}) as sim:
        sim.create_repo("alice", "demo")
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=sim.api_url) as c:
            inst = c.get(f"{API}/installation", headers=auth).json()
            assert inst["permissions"] == SHOPFLOOR_APP_PERMISSIONS and "workflows" not in inst["permissions"]
            minted = c.post(f"/app/installations/{inst['id']}/access_tokens", headers=auth).json()
            assert minted["permissions"] == SHOPFLOOR_APP_PERMISSIONS


def test_the_bot_cannot_push_workflow_changes_without_the_workflows_permission(
    simulator: SimulatorHandle, tmp_path: Path
):
    simulator.create_repo("alice", "demo")
    refused = _push(tmp_path, simulator, BOT_TOKEN, ".github/workflows/ci.yml", "shopfloor/issue-1")
    assert refused.returncode != 0
    assert "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml`" in refused.stderr
    assert "without `workflows` permission" in refused.stderr and "[remote rejected]" in refused.stderr
    assert _branch(simulator, "shopfloor/issue-1") == 404  # the whole push refused: no ref moved

    # Anything else the bot pushes lands; so does a person's workflow change.
    assert _push(tmp_path, simulator, BOT_TOKEN, "src/app.py", "shopfloor/issue-2").returncode == 0
    assert _push(tmp_path, simulator, user_token("alice"), ".github/workflows/ci.yml", "by-alice").returncode == 0

    # The contents API holds the bot to the same permission.
    body = {"message": "ci", "content": base64.b64encode(b"on: push\n").decode(), "branch": "main"}
    put = simulator.api().put(f"{API}/contents/.github/workflows/other.yml", json=body)
    assert (put.status_code, put.json()["message"]) == (403, "Resource not accessible by integration")
    assert simulator.api().put(f"{API}/contents/docs/notes.md", json=body).status_code == 201


def test_an_app_granted_workflows_may_push_them(tmp_path: Path):
    permissions = {**SHOPFLOOR_APP_PERMISSIONS, "workflows": "write"}
    with running_simulator(tmp_path / "sim", app_permissions=permissions) as sim:
        sim.create_repo("alice", "demo")
        pushed = _push(tmp_path, sim, BOT_TOKEN, ".github/workflows/ci.yml", "shopfloor/issue-1")
        assert pushed.returncode == 0, pushed.stderr
        assert _branch(sim, "shopfloor/issue-1") == 200
