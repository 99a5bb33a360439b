"""A draft pull request is made ready (and back) through `/_sim/.../draft`, the simulator's stand-in
for GitHub's UI buttons: only its author or a writer may, and the webhook says which way it went."""

from __future__ import annotations

import httpx
from simulator_runs import SimulatorHandle
from webhook_receiver import receiving


def test_ready_for_review_and_back_to_draft(simulator: SimulatorHandle):
    simulator.create_repo("alice", "app")
    alice = simulator.api("alice")
    main = alice.get("/repos/alice/app/branches/main").json()["commit"]["sha"]
    assert alice.post("/repos/alice/app/git/refs", json={"ref": "refs/heads/wip", "sha": main}).status_code == 201
    put = alice.put("/repos/alice/app/contents/NOTES.md", json={"message": "wip", "content": "d2lw", "branch": "wip"})
    assert put.status_code == 201, put.text
    with receiving() as receiver:
        hook = alice.post("/repos/alice/app/hooks", json={"config": {"url": receiver.url}, "events": ["pull_request"]})
        assert hook.status_code == 201
        pr = alice.post("/repos/alice/app/pulls", json={"title": "WIP", "head": "wip", "base": "main", "draft": True})
        assert pr.status_code == 201 and pr.json()["draft"] is True
        number = pr.json()["number"]
        with httpx.Client(base_url=simulator.base_url) as c:
            path = f"/_sim/repos/alice/app/pulls/{number}/draft"
            assert (
                c.post(path, json={"login": "mallory", "draft": False}).status_code == 403
            )  # neither author nor writer
            ready = c.post(path, json={"login": "alice", "draft": False})
            assert ready.status_code == 200 and ready.json()["draft"] is False
            assert c.post(path, json={"login": "alice", "draft": False}).status_code == 200  # already ready: no event
            back = c.post(path, json={"login": "alice", "draft": True})
            assert back.status_code == 200 and back.json()["draft"] is True
            assert c.post(f"/_sim/repos/alice/app/pulls/{number + 1}/draft", json={"login": "alice"}).status_code == 404
        simulator.wait_idle()
        assert alice.get(f"/repos/alice/app/pulls/{number}").json()["draft"] is True
        assert [e for e in receiver.events() if e.startswith("pull_request")] == [
            "pull_request.opened",
            "pull_request.ready_for_review",
            "pull_request.converted_to_draft",
        ]
