"""Who may call and do what: tokens, human users, collaborator permissions, the GitHub App flow."""

from __future__ import annotations

import subprocess
import time

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from simulator_runs import SimulatorHandle, running_simulator, user_token
from webhook_receiver import git_env

API = "/repos/alice/demo"


def test_no_token_and_bad_installation_tokens_are_401(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    with httpx.Client(base_url=simulator.api_url) as anon:
        resp = anon.get(API)
        assert resp.status_code == 401
        assert resp.json()["message"] == "Requires authentication" and "documentation_url" in resp.json()
        bad = anon.get(API, headers={"Authorization": "token ghs_not_one_we_minted"})
        assert bad.status_code == 401 and bad.json()["message"] == "Bad credentials"


def test_permissions_of_a_stranger_and_a_collaborator(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    bob = simulator.api("bob")
    issue = bob.post(f"{API}/issues", json={"title": "from bob", "labels": ["bug"]})
    assert issue.status_code == 201 and issue.json()["labels"] == []  # labels silently dropped
    assert bob.post(f"{API}/issues/1/comments", json={"body": "me too"}).status_code == 201
    denied = bob.post(f"{API}/issues/1/labels", json={"labels": ["bug"]})
    assert denied.status_code == 403 and denied.json()["message"]
    assert bob.put(f"{API}/collaborators/bob", json={"permission": "admin"}).status_code == 403
    assert bob.get(f"{API}/hooks").status_code == 403
    assert simulator.api().get(f"{API}/hooks").status_code == 200  # the app reads hooks and deliveries
    perm = bob.get(f"{API}/collaborators/bob/permission").json()
    assert (perm["permission"], perm["role_name"], perm["user"]["login"]) == ("read", "read", "bob")
    assert bob.get(f"{API}/collaborators/bob").status_code == 404

    simulator.set_permission("alice", "demo", "bob", "triage")
    assert bob.get(f"{API}/collaborators/bob/permission").json()["role_name"] == "triage"
    assert bob.get(f"{API}/collaborators/bob").status_code == 204
    assert bob.post(f"{API}/issues/1/labels", json={"labels": ["bug"]}).status_code == 200
    main = bob.get(f"{API}/branches/main").json()["commit"]["sha"]
    cant_push = bob.post(f"{API}/git/refs", json={"ref": "refs/heads/x", "sha": main})
    assert cant_push.status_code == 403

    simulator.set_permission("alice", "demo", "bob", "write")
    perm = bob.get(f"{API}/collaborators/bob/permission").json()
    assert (perm["permission"], perm["role_name"]) == ("write", "write")
    assert bob.post(f"{API}/git/refs", json={"ref": "refs/heads/x", "sha": main}).status_code == 201
    owner = simulator.api().get(f"{API}/collaborators/alice/permission").json()
    assert owner["permission"] == "admin"


def test_private_repo_is_invisible_to_strangers(simulator: SimulatorHandle):
    simulator.create_repo("alice", "secret", private=True)
    assert simulator.api("bob").get("/repos/alice/secret").status_code == 404
    assert simulator.api("alice").get("/repos/alice/secret").status_code == 200
    assert simulator.api().get("/repos/alice/secret").status_code == 200  # the app is installed


def test_private_repo_cannot_be_cloned_by_strangers(simulator: SimulatorHandle, tmp_path):
    simulator.create_repo("alice", "secret", private=True)
    env = git_env(tmp_path)

    def clone(url: str, to: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "clone", url, str(tmp_path / to)], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    anonymous = clone(simulator.git_url("alice", "secret"), "anon")
    # A 401 challenge: git asks for credentials, which a non-interactive client cannot give.
    assert anonymous.returncode != 0 and "could not read Username" in anonymous.stderr
    stranger = clone(simulator.git_url("alice", "secret", token=user_token("bob")), "bob")
    assert stranger.returncode != 0 and "not found" in (stranger.stderr + stranger.stdout).lower()
    owner = clone(simulator.git_url("alice", "secret", token=user_token("alice")), "alice")
    assert owner.returncode == 0, owner.stderr
    assert (tmp_path / "alice" / "README.md").is_file()


def _app_jwt(key: rsa.RSAPrivateKey, app_id: int, *, exp_in: int = 540) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now - 60, "exp": now + exp_in, "iss": str(app_id)}, key, algorithm="RS256")


def test_github_app_jwt_installation_and_token_flow(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with running_simulator(
        tmp_path / "sim", app_id=42, app_public_keys={42: public}, installation_token_ttl_s=2
    ) as sim:
        sim.create_repo("alice", "demo")
        with httpx.Client(base_url=sim.api_url) as c:
            auth = {"Authorization": f"Bearer {_app_jwt(key, 42)}"}
            assert c.get("/app", headers=auth).json()["id"] == 42
            forged = c.get("/app", headers={"Authorization": f"Bearer {_app_jwt(other, 42)}"})
            assert forged.status_code == 401
            expired = c.get("/app", headers={"Authorization": f"Bearer {_app_jwt(key, 42, exp_in=-10)}"})
            assert expired.status_code == 401
            inst = c.get("/repos/alice/demo/installation", headers=auth).json()
            assert inst["id"] == c.get("/repos/alice/demo/installation", headers=auth).json()["id"]
            minted = c.post(f"/app/installations/{inst['id']}/access_tokens", headers=auth)
            assert minted.status_code == 201
            token = minted.json()["token"]
            assert token.startswith("ghs_") and minted.json()["expires_at"].endswith("Z")
            me = c.get("/user", headers={"Authorization": f"token {token}"}).json()
            assert (me["login"], me["type"]) == ("shopfloor[bot]", "Bot")
            made = c.post(
                "/repos/alice/demo/issues", json={"title": "by the app"}, headers={"Authorization": f"Bearer {token}"}
            )
            assert made.json()["user"]["login"] == "shopfloor[bot]"
            assert c.post("/app/installations/999999/access_tokens", headers=auth).status_code == 404
            time.sleep(2.2)  # the only sleep: waiting out a 2-second token TTL
            stale = c.get("/user", headers={"Authorization": f"token {token}"})
            assert stale.status_code == 401 and stale.json()["message"] == "Bad credentials"
