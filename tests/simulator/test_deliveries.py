"""Webhook deliveries: ordered per hook, logged with their outcome, redelivered on demand."""

from __future__ import annotations

from simulator_runs import SimulatorHandle
from webhook_receiver import receiving

from shopfloor.github_signature import verify

API = "/repos/alice/demo"


def test_failed_delivery_is_logged_and_redelivery_keeps_the_guid(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    alice = simulator.api("alice")
    with receiving() as receiver:
        receiver.status = 500
        hook = alice.post(
            f"{API}/hooks", json={"config": {"url": receiver.url, "secret": "s"}, "events": ["issues"]}
        ).json()
        alice.post(f"{API}/issues", json={"title": "first"})
        simulator.wait_idle()
        listed = alice.get(f"{API}/hooks/{hook['id']}/deliveries").json()
        assert [(d["event"], d["action"], d["status_code"]) for d in listed] == [
            ("issues", "opened", 500),
            ("ping", None, 500),
        ]
        failed = listed[0]
        detail = alice.get(f"{API}/hooks/{hook['id']}/deliveries/{failed['id']}").json()
        assert detail["request"]["headers"]["X-GitHub-Event"] == "issues"
        assert detail["request"]["payload"]["issue"]["title"] == "first"
        assert detail["response"]["payload"] == "ok"

        receiver.status = 200
        again = alice.post(f"{API}/hooks/{hook['id']}/deliveries/{failed['id']}/attempts")
        assert again.status_code == 202
        simulator.wait_idle()
        newest = alice.get(f"{API}/hooks/{hook['id']}/deliveries").json()[0]
        assert (newest["guid"], newest["redelivery"], newest["status_code"]) == (failed["guid"], True, 200)
        bodies = [r for r in receiver.received if r.event == "issues"]
        assert len(bodies) == 2 and bodies[0].body == bodies[1].body
        assert bodies[0].headers["x-github-delivery"] == bodies[1].headers["x-github-delivery"] == failed["guid"]
        assert verify(b"s", bodies[1].body, bodies[1].headers["x-hub-signature-256"])


def test_unreachable_target_records_status_code_zero(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    alice = simulator.api("alice")
    hook = alice.post(f"{API}/hooks", json={"config": {"url": "http://127.0.0.1:9/nothing"}}).json()
    simulator.wait_idle()
    (ping,) = alice.get(f"{API}/hooks/{hook['id']}/deliveries").json()
    assert ping["status_code"] == 0 and ping["event"] == "ping"
    assert [d["event"] for d in simulator.deliveries()] == ["ping"]


def test_burst_is_delivered_in_order_and_cursor_pages(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    alice = simulator.api("alice")
    with receiving() as receiver:
        hook = alice.post(
            f"{API}/hooks",
            json={"config": {"url": receiver.url, "content_type": "form"}, "events": ["issues", "issue_comment"]},
        ).json()
        alice.post(f"{API}/issues", json={"title": "burst"})
        for i in range(25):
            alice.post(f"{API}/issues/1/comments", json={"body": str(i)})
        simulator.wait_idle()
        comments = [r.payload()["comment"]["body"] for r in receiver.received if r.event == "issue_comment"]
        assert comments == [str(i) for i in range(25)]
        assert receiver.events()[:2] == ["ping", "issues.opened"]

    first = alice.get(f"{API}/hooks/{hook['id']}/deliveries", params={"per_page": 10})
    assert len(first.json()) == 10 and 'rel="next"' in first.headers["link"]
    url = first.headers["link"].split(";")[0].strip("<>").removeprefix(simulator.api_url)
    second = alice.get(url).json()
    assert second[0]["id"] < first.json()[-1]["id"]
    by_page = alice.get(f"{API}/hooks/{hook['id']}/deliveries", params={"per_page": 10, "page": 3}).json()
    assert len(by_page) == 7  # 27 deliveries: ping, opened, 25 comments


def test_default_hook_from_config(tmp_path):
    from simulator_runs import running_simulator

    with (
        receiving() as receiver,
        running_simulator(tmp_path / "sim", default_hook_url=receiver.url, default_hook_secret="dflt") as sim,
    ):
        sim.create_repo("alice", "demo")
        sim.api("alice").post(f"{API}/issues", json={"title": "wired"})
        sim.wait_idle()
        assert receiver.events() == ["ping", "issues.opened"]
        assert all(verify(b"dflt", r.body, r.headers["x-hub-signature-256"]) for r in receiver.received)
