"""GitHub's smaller edges: the events a bot gets beside the big ones (`create`, `delete`, `label`,
`member`, `check_suite.requested`), `installation` only in an App's deliveries, the User-Agent
GitHub requires, the contents API's git-commit shape, and `/installation/repositories`."""

from __future__ import annotations

import base64
import time

import githubkit_schemas.latest.models as m
import httpx
import jwt
from githubkit.webhooks import parse_obj
from pydantic import TypeAdapter
from simulator_runs import SimulatorHandle, app_keys, running_simulator
from webhook_receiver import receiving

API = "/repos/alice/demo"


def test_the_smaller_events_arrive_in_githubs_shapes(simulator: SimulatorHandle):
    with receiving() as receiver:
        simulator.create_repo("alice", "demo", ci_command="true")
        alice = simulator.api("alice")
        alice.post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["*"]}).raise_for_status()
        main = alice.get(f"{API}/branches/main").json()["commit"]["sha"]
        alice.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": main}).raise_for_status()
        body = {"message": "x", "content": base64.b64encode(b"x\n").decode(), "branch": "topic"}
        alice.put(f"{API}/contents/x.txt", json=body).raise_for_status()
        alice.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"}).raise_for_status()
        alice.post(f"{API}/labels", json={"name": "triaged", "color": "00ff00"}).raise_for_status()
        alice.put(f"{API}/collaborators/bob", json={"permission": "push"}).raise_for_status()
        alice.put(f"{API}/collaborators/bob", json={"permission": "maintain"}).raise_for_status()
        alice.delete(f"{API}/git/refs/heads/topic")
        simulator.wait_idle()
        got = [(r.event, r.payload()) for r in receiver.received]

    def of(event: str, action: str | None = None) -> list[dict]:
        return [p for e, p in got if e == event and (action is None or p.get("action") == action)]

    (created,) = of("create")
    assert (created["ref"], created["ref_type"], created["master_branch"]) == ("topic", "branch", "main")
    (deleted,) = of("delete")
    assert (deleted["ref"], deleted["ref_type"]) == ("topic", "branch")
    (label,) = of("label", "created")
    assert label["label"]["name"] == "triaged"
    added, edited = of("member")
    assert (added["action"], added["member"]["login"], added["changes"]["permission"]["to"]) == (
        "added",
        "bob",
        "write",
    )
    assert edited["changes"]["permission"] == {"from": "write", "to": "maintain"}
    requested = of("check_suite", "requested")
    assert requested and requested[0]["check_suite"]["status"] == "queued"
    for event, payload in [("create", created), ("delete", deleted), ("label", label), ("member", added)]:
        parse_obj(event, payload)
    parse_obj("check_suite", requested[0])
    assert all("installation" not in p for _, p in got)  # a repository hook: no installation


def test_a_request_without_a_user_agent_is_refused_as_github_refuses_it(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    with httpx.Client(base_url=simulator.api_url) as c:
        bare = c.get(API, headers={"Authorization": "token user:alice", "User-Agent": ""})
        assert bare.status_code == 403 and bare.json()["message"].startswith(
            "Request forbidden by administrative rules"
        )
        assert c.get(API, headers={"Authorization": "token user:alice"}).status_code == 200  # httpx's own agent


def test_the_contents_api_answers_with_a_git_commit(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    body = {"message": "add x", "content": base64.b64encode(b"x\n").decode()}
    put = simulator.api("alice").put(f"{API}/contents/x.txt", json=body)
    assert put.status_code == 201
    commit = TypeAdapter(m.FileCommit).validate_python(put.json()).commit
    assert commit.message == "add x" and commit.tree and commit.tree.sha
    assert "commit" not in put.json()["commit"]  # the git shape: no nested REST `commit`


def test_an_installation_lists_its_repositories(tmp_path):
    private, public = app_keys()
    now = int(time.time())
    token = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": "7"}, private, algorithm="RS256")
    with running_simulator(tmp_path / "sim", app_id=7, app_public_keys={7: public}) as sim:
        sim.create_repo("alice", "demo")
        sim.create_repo("alice", "other")
        sim.create_repo("bob", "elsewhere")
        sim.api("carol").post(f"{API}/forks").raise_for_status()
        with httpx.Client(base_url=sim.api_url, headers={"Authorization": f"Bearer {token}"}) as c:
            inst = c.get(f"{API}/installation").json()["id"]
            minted = c.post(f"/app/installations/{inst}/access_tokens").json()["token"]
        with httpx.Client(base_url=sim.api_url) as c:
            listed = c.get("/installation/repositories", headers={"Authorization": f"token {minted}"}).json()
            assert [r["full_name"] for r in listed["repositories"]] == ["alice/demo", "alice/other"]
            assert listed["total_count"] == 2 and listed["repository_selection"] == "all"
            as_user = c.get("/installation/repositories", headers={"Authorization": "token user:alice"})
            assert as_user.status_code == 403
