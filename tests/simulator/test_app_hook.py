"""The GitHub App's own webhook: configured and read by the App (its JWT), fed every event of every
repository the App is installed on (not forks), with deliveries listed, paged and redelivered
like a repository hook's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from github import Auth
from simulator_runs import BOT_TOKEN, SimulatorHandle, app_keys, running_simulator, user_token
from webhook_receiver import Received, receiving

from shopfloor.github_signature import verify

APP_ID = 4242
API = "/repos/alice/demo"
# What GitHub answers for an App that has no webhook URL: still 200 and the config's shape, with
# an empty url (the schema's `url` is a string, not nullable) and no secret.
NO_WEBHOOK = {"content_type": "json", "insecure_ssl": "0", "url": ""}


@dataclass
class AppSim:
    sim: SimulatorHandle
    app: httpx.Client  # the App itself: `Authorization: Bearer <its RS256 JWT>`


@pytest.fixture
def app_sim(tmp_path: Path) -> Iterator[AppSim]:
    """A simulator that verifies the App's JWTs with its public key, and a client acting as the App."""
    private, public = app_keys()
    with running_simulator(tmp_path / "sim", app_id=APP_ID, app_public_keys={APP_ID: public}) as sim:
        jwt = Auth.AppAuth(APP_ID, private).token
        with httpx.Client(base_url=sim.api_url, timeout=60, headers={"Authorization": f"Bearer {jwt}"}) as app:
            yield AppSim(sim, app)


def _issues(receiver_items: list[Received]) -> list[Received]:
    return [r for r in receiver_items if r.event == "issues"]


def test_the_app_sets_and_reads_its_webhook_config_with_its_jwt_only(app_sim: AppSim):
    app = app_sim.app
    assert app.get("/app/hook/config").json() == NO_WEBHOOK

    set_ = app.patch("/app/hook/config", json={"url": "https://edge.example/webhooks/github", "secret": "s3cret"})
    expected = {
        "content_type": "json",
        "insecure_ssl": "0",
        "secret": "********",
        "url": "https://edge.example/webhooks/github",
    }
    assert (set_.status_code, set_.json()) == (200, expected)
    assert app.get("/app/hook/config").json() == expected  # the secret is never shown, only masked
    partial = app.patch("/app/hook/config", json={"content_type": "form", "insecure_ssl": "1"}).json()
    assert partial == {**expected, "content_type": "form", "insecure_ssl": "1"}  # keys not sent are kept
    unsigned = app.patch("/app/hook/config", json={"secret": None, "content_type": "json"}).json()
    assert "secret" not in unsigned and unsigned["url"] == expected["url"]

    bad = app.patch("/app/hook/config", json={"url": "ftp://edge.example/hook"})
    assert bad.status_code == 422 and bad.json()["message"] == "Validation Failed"
    assert [(e["resource"], e["field"], e["code"]) for e in bad.json()["errors"]] == [("Hook", "url", "custom")]
    assert app.get("/app/hook/config").json()["url"] == expected["url"]  # nothing changed

    # Anyone but the App gets what `GET /app` gives them: a 401.
    with httpx.Client(base_url=app_sim.sim.api_url, timeout=60) as anon:
        for headers in ({"Authorization": f"token {user_token('alice')}"}, {"Authorization": f"token {BOT_TOKEN}"}, {}):
            for method, path in (
                ("GET", "/app/hook/config"),
                ("PATCH", "/app/hook/config"),
                ("GET", "/app/hook/deliveries"),
                ("GET", "/app/hook/deliveries/1"),
                ("POST", "/app/hook/deliveries/1/attempts"),
            ):
                body = {"url": "https://evil.example/hook"} if method == "PATCH" else None
                resp = anon.request(method, path, headers=headers, json=body)
                assert resp.status_code == 401, (method, path, headers, resp.text)
                assert resp.json()["message"] == anon.get("/app", headers=headers).json()["message"]
    assert app.get("/app/hook/config").json()["url"] == expected["url"]


def test_events_reach_the_repository_hook_and_the_app_hook_but_not_from_forks(app_sim: AppSim):
    sim, app = app_sim.sim, app_sim.app
    sim.create_repo("alice", "demo")
    alice, carol = sim.api("alice"), sim.api("carol")
    with receiving() as receiver:
        app.patch("/app/hook/config", json={"url": receiver.url, "secret": "app-secret"}).raise_for_status()
        repo_hook = alice.post(
            f"{API}/hooks", json={"config": {"url": receiver.url, "secret": "repo-secret"}, "events": ["issues"]}
        ).json()
        alice.post(f"{API}/issues", json={"title": "to both"}).raise_for_status()
        sim.wait_idle()
        (listed,) = app.get("/app/hook/deliveries").json()
        sent = app.get(f"/app/hook/deliveries/{listed['id']}").json()["request"]["headers"]
        app_hook_id = int(sent["X-GitHub-Hook-ID"])

        by_hook = {int(r.headers["x-github-hook-id"]): r for r in _issues(receiver.received)}
        assert set(by_hook) == {repo_hook["id"], app_hook_id} and repo_hook["id"] != app_hook_id
        to_repo, to_app = by_hook[repo_hook["id"]], by_hook[app_hook_id]
        assert to_repo.payload()["issue"]["title"] == to_app.payload()["issue"]["title"] == "to both"
        assert verify(b"repo-secret", to_repo.body, to_repo.headers["x-hub-signature-256"])
        assert verify(b"app-secret", to_app.body, to_app.headers["x-hub-signature-256"])
        assert not verify(b"repo-secret", to_app.body, to_app.headers["x-hub-signature-256"])
        repo_id = to_repo.payload()["repository"]["id"]
        assert (
            to_repo.headers["x-github-hook-installation-target-type"],
            to_repo.headers["x-github-hook-installation-target-id"],
        ) == ("repository", str(repo_id))
        assert (
            to_app.headers["x-github-hook-installation-target-type"],
            to_app.headers["x-github-hook-installation-target-id"],
        ) == ("integration", str(APP_ID))
        assert to_app.payload()["installation"]["id"] == app.get(f"{API}/installation").json()["id"]
        assert "installation" not in to_repo.payload()  # only an App's own webhook hears of its installation
        # The repository hook's ping went to that hook only.
        assert [int(r.headers["x-github-hook-id"]) for r in receiver.received if r.event == "ping"] == [repo_hook["id"]]

        # carol's fork: the App is not installed there, so a push to it reaches her own hook only.
        fork = carol.post(f"{API}/forks")
        assert fork.status_code == 202 and fork.json()["full_name"] == "carol/demo"
        carol_hook = carol.post(
            "/repos/carol/demo/hooks", json={"config": {"url": receiver.url}, "events": ["push"]}
        ).json()
        main = carol.get("/repos/carol/demo/branches/main").json()["commit"]["sha"]
        carol.post("/repos/carol/demo/git/refs", json={"ref": "refs/heads/in-fork", "sha": main}).raise_for_status()
        alice.post(f"{API}/git/refs", json={"ref": "refs/heads/in-parent", "sha": main}).raise_for_status()
        sim.wait_idle()

    pushes = [(d["hook_id"], d["payload"]["ref"]) for d in sim.deliveries() if d["event"] == "push"]
    assert sorted(pushes) == sorted([(carol_hook["id"], "refs/heads/in-fork"), (app_hook_id, "refs/heads/in-parent")])
    listed = app.get("/app/hook/deliveries").json()
    # Newest first: the new branch's `create` came with its push.
    assert [(d["event"], d["repository_id"]) for d in listed] == [
        ("create", repo_id),
        ("push", repo_id),
        ("issues", repo_id),
    ]


def test_failed_app_hook_deliveries_are_listed_paged_and_redelivered_with_their_guid(app_sim: AppSim):
    sim, app = app_sim.sim, app_sim.app
    sim.create_repo("alice", "demo")
    alice = sim.api("alice")
    with receiving() as receiver:
        receiver.status = 500  # the edge is down
        app.patch("/app/hook/config", json={"url": receiver.url, "secret": "app-secret"}).raise_for_status()
        repo_hook = alice.post(f"{API}/hooks", json={"config": {"url": receiver.url}}).json()
        for title in ("first", "second"):
            alice.post(f"{API}/issues", json={"title": title}).raise_for_status()
        sim.wait_idle()

        listed = app.get("/app/hook/deliveries").json()
        assert [(d["event"], d["action"], d["status_code"], d["redelivery"]) for d in listed] == [
            ("issues", "opened", 500, False),
            ("issues", "opened", 500, False),
        ]
        first_page = app.get("/app/hook/deliveries", params={"per_page": 1})
        assert [d["id"] for d in first_page.json()] == [listed[0]["id"]]
        next_url = first_page.headers["link"].split(";")[0].strip("<>")
        assert 'rel="next"' in first_page.headers["link"] and "cursor=" in next_url
        second_page = app.get(next_url.removeprefix(sim.api_url))
        assert [d["id"] for d in second_page.json()] == [listed[1]["id"]] and "link" not in second_page.headers

        failed = listed[1]  # the oldest: "first"
        detail = app.get(f"/app/hook/deliveries/{failed['id']}").json()
        assert detail["request"]["payload"]["issue"]["title"] == "first" and detail["url"] == receiver.url
        assert detail["request"]["headers"]["X-GitHub-Hook-Installation-Target-Type"] == "integration"
        assert (detail["status_code"], detail["response"]["payload"]) == (500, "ok")
        ping = next(d for d in sim.deliveries() if d["hook_id"] == repo_hook["id"])  # not the App hook's
        assert app.get(f"/app/hook/deliveries/{ping['id']}").status_code == 404
        assert app.post(f"/app/hook/deliveries/{ping['id']}/attempts").status_code == 404
        assert app.get("/app/hook/deliveries/999999").status_code == 404

        receiver.status = 200  # the edge is back
        again = app.post(f"/app/hook/deliveries/{failed['id']}/attempts")
        assert (again.status_code, again.json()) == (202, {})
        sim.wait_idle()
        newest = app.get("/app/hook/deliveries").json()[0]
        assert (newest["guid"], newest["redelivery"], newest["status_code"], newest["status"]) == (
            failed["guid"],
            True,
            200,
            "OK",
        )
        firsts = [
            r
            for r in _issues(receiver.received)
            if r.headers["x-github-delivery"] == failed["guid"]
            and int(r.headers["x-github-hook-id"]) != repo_hook["id"]
        ]
        assert len(firsts) == 2 and firsts[0].body == firsts[1].body
        assert verify(b"app-secret", firsts[1].body, firsts[1].headers["x-hub-signature-256"])


def test_a_reset_forgets_the_app_hook(app_sim: AppSim):
    sim, app = app_sim.sim, app_sim.app
    sim.create_repo("alice", "demo")
    app.patch("/app/hook/config", json={"url": "http://127.0.0.1:9/nothing", "secret": "s"}).raise_for_status()
    sim.api("alice").post(f"{API}/issues", json={"title": "x"}).raise_for_status()
    sim.wait_idle()
    assert [d["status_code"] for d in app.get("/app/hook/deliveries").json()] == [0]  # unreachable: code 0

    sim.reset()
    assert app.get("/app/hook/config").json() == NO_WEBHOOK  # 200, empty url, no secret
    assert app.get("/app/hook/deliveries").json() == []
    sim.create_repo("alice", "demo")
    sim.api("alice").post(f"{API}/issues", json={"title": "after the reset"}).raise_for_status()
    sim.wait_idle()
    assert sim.deliveries() == []  # no App hook, no repository hook: nothing is delivered
