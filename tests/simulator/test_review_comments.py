"""Line comments on a pull request, as GitHub delivers them: a review's inline comments are one
`pull_request_review_comment.created` each after its `pull_request_review.submitted`, and a
single comment (POST .../pulls/{n}/comments) is a COMMENTED review holding it."""

from __future__ import annotations

import json

from fixture_files import fixture
from githubkit.webhooks import parse_obj
from simulator_runs import SimulatorHandle
from webhook_receiver import receiving

from shopfloor.models.github_events import PullRequestReviewCommentEvent

API = "/repos/alice/demo"


def _open_pr(simulator: SimulatorHandle) -> int:
    bot = simulator.api()
    main = bot.get(f"{API}/git/ref/heads/main").json()["object"]["sha"]
    assert bot.post(f"{API}/git/refs", json={"ref": "refs/heads/topic", "sha": main}).status_code == 201
    put = bot.put(
        f"{API}/contents/app.py",
        json={"message": "app", "content": "cHJpbnQoMSkK", "branch": "topic"},
    )
    assert put.status_code in (200, 201), put.text
    pr = bot.post(f"{API}/pulls", json={"title": "t", "head": "topic", "base": "main"})
    assert pr.status_code == 201, pr.text
    return pr.json()["number"]


def test_a_reviews_line_comments_are_delivered_one_by_one_after_the_review(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    number = _open_pr(simulator)
    with receiving() as receiver:
        alice = simulator.api("alice")
        hook = alice.post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["*"]})
        assert hook.status_code == 201
        review = alice.post(
            f"{API}/pulls/{number}/reviews",
            json={
                "event": "REQUEST_CHANGES",
                "body": "two things",
                "comments": [
                    {"path": "app.py", "line": 1, "body": "first"},
                    {"path": "app.py", "line": 1, "side": "RIGHT", "body": "second"},
                ],
            },
        )
        assert review.status_code == 200, review.text
        simulator.wait_idle()
        events = [e for e in receiver.events() if e.startswith("pull_request_review")]
        assert events == [
            "pull_request_review.submitted",
            "pull_request_review_comment.created",
            "pull_request_review_comment.created",
        ]
        comments = [r.payload() for r in receiver.received if r.event == "pull_request_review_comment"]
    review_id = review.json()["id"]
    assert [(c["comment"]["body"], c["comment"]["path"], c["comment"]["line"]) for c in comments] == [
        ("first", "app.py", 1),
        ("second", "app.py", 1),
    ]
    for payload in comments:
        assert payload["comment"]["pull_request_review_id"] == review_id
        assert payload["comment"]["user"]["login"] == "alice" and payload["sender"]["login"] == "alice"
        assert payload["pull_request"]["number"] == number
        assert payload["pull_request"]["head"]["ref"] == "topic"
        # GitHub's published webhook schema, and our own model of the event, both take it.
        parse_obj("pull_request_review_comment", payload)
        event = PullRequestReviewCommentEvent.model_validate(payload)
        assert event.comment.pull_request_review_id == review_id and event.comment.line == 1
    real = json.loads(fixture("github", "webhooks", "pull_request_review_comment.created.json").read_text())
    # Every key of the comment in a real delivery of GitHub.
    missing = set(real["comment"]) - set(comments[0]["comment"])
    assert not missing, missing
    listed = alice.get(f"{API}/pulls/{number}/comments").json()
    assert [c["body"] for c in listed] == ["first", "second"]


def test_a_single_line_comment_is_a_commented_review_holding_it(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    number = _open_pr(simulator)
    simulator.set_permission("alice", "demo", "carol", "read")
    with receiving() as receiver:
        alice, carol = simulator.api("alice"), simulator.api("carol")
        assert alice.post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["*"]}).status_code == 201
        made = carol.post(f"{API}/pulls/{number}/comments", json={"body": "why?", "path": "app.py", "line": 1})
        assert made.status_code == 201, made.text
        empty = carol.post(f"{API}/pulls/{number}/comments", json={"body": " ", "path": "app.py", "line": 1})
        assert empty.status_code == 422
        simulator.wait_idle()
        events = [e for e in receiver.events() if e.startswith("pull_request_review")]
        assert events == ["pull_request_review.submitted", "pull_request_review_comment.created"]
        (payload,) = [r.payload() for r in receiver.received if r.event == "pull_request_review_comment"]
    comment = made.json()
    assert (comment["body"], comment["path"], comment["line"], comment["user"]["login"]) == (
        "why?",
        "app.py",
        1,
        "carol",
    )
    assert payload["comment"]["id"] == comment["id"]
    reviews = alice.get(f"{API}/pulls/{number}/reviews").json()
    assert [(r["id"], r["state"], r["user"]["login"]) for r in reviews] == [
        (comment["pull_request_review_id"], "COMMENTED", "carol")
    ]
    parse_obj("pull_request_review_comment", payload)
