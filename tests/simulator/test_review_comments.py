"""Line comments on a pull request, as GitHub delivers them: a review's inline comments are one
`pull_request_review_comment.created` each after its `pull_request_review.submitted`, and a
single comment (POST .../pulls/{n}/comments) is a COMMENTED review holding it."""

from __future__ import annotations

import base64
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


def _open_pr_changing_a_file(simulator: SimulatorHandle) -> tuple[int, str]:
    """A pull request that changes line 3 of a 12-line file (one hunk: lines 1 to 6 of the new file)."""
    bot = simulator.api()
    main = bot.get(f"{API}/git/ref/heads/main").json()["object"]["sha"]
    old = "".join(f"line {n}\n" for n in range(1, 13))
    made = bot.put(f"{API}/contents/calc.py", json={"message": "calc", "content": _b64(old), "branch": "main"})
    assert made.status_code in (200, 201), made.text
    main = made.json()["commit"]["sha"]
    assert bot.post(f"{API}/git/refs", json={"ref": "refs/heads/change", "sha": main}).status_code == 201
    new = old.replace("line 3\n", "line three\n")
    sha = made.json()["content"]["sha"]
    put = bot.put(
        f"{API}/contents/calc.py", json={"message": "three", "content": _b64(new), "sha": sha, "branch": "change"}
    )
    assert put.status_code == 200, put.text
    pr = bot.post(f"{API}/pulls", json={"title": "three", "head": "change", "base": "main"})
    assert pr.status_code == 201, pr.text
    return pr.json()["number"], put.json()["commit"]["sha"]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_review_with_a_comment_off_the_diff_is_refused_whole(simulator: SimulatorHandle):
    """GitHub rejects the whole review when one comment is not on the diff (a line outside every
    hunk, a file the pull request does not change, a removed line named on the new side, a range
    across hunks): 422, and nothing is kept or delivered. The simulator used to accept them all."""
    simulator.create_repo("alice", "demo")
    number, _ = _open_pr_changing_a_file(simulator)
    with receiving() as receiver:
        alice = simulator.api("alice")
        assert alice.post(f"{API}/hooks", json={"config": {"url": receiver.url}, "events": ["*"]}).status_code == 201
        good = {"path": "calc.py", "line": 3, "body": "fine"}
        for bad in (
            {"path": "calc.py", "line": 999, "body": "far away"},
            {"path": "calc.py", "line": 11, "body": "outside the hunk"},
            {"path": "README.md", "line": 1, "body": "not in this pull request"},
        ):
            refused = alice.post(
                f"{API}/pulls/{number}/reviews", json={"event": "COMMENT", "body": "b", "comments": [good, bad]}
            )
            assert refused.status_code == 422, (bad, refused.text)
            assert refused.json()["errors"] == ["Pull request review thread line must be part of the diff"]
        across = {"path": "calc.py", "line": 3, "start_line": 11, "body": "range from outside"}
        refused = alice.post(
            f"{API}/pulls/{number}/reviews", json={"event": "COMMENT", "body": "b", "comments": [across]}
        )
        assert refused.status_code == 422 and "same hunk" in refused.json()["errors"][0], refused.text
        simulator.wait_idle()
        assert [e for e in receiver.events() if e.startswith("pull_request_review")] == []
    assert alice.get(f"{API}/pulls/{number}/reviews").json() == []
    assert alice.get(f"{API}/pulls/{number}/comments").json() == []


def test_comments_on_the_diff_carry_its_hunk_and_position_and_can_be_fetched_and_answered(
    simulator: SimulatorHandle,
):
    simulator.create_repo("alice", "demo")
    number, head = _open_pr_changing_a_file(simulator)
    simulator.set_permission("alice", "demo", "carol", "read")
    alice, carol = simulator.api("alice"), simulator.api("carol")
    comments = [
        {"path": "calc.py", "line": 3, "body": "the new line"},
        {"path": "calc.py", "line": 3, "side": "LEFT", "body": "the removed line"},
        {"path": "calc.py", "line": 5, "start_line": 2, "body": "a range in the hunk"},
    ]
    made = alice.post(f"{API}/pulls/{number}/reviews", json={"event": "COMMENT", "body": "b", "comments": comments})
    assert made.status_code == 200, made.text
    listed = alice.get(f"{API}/pulls/{number}/comments").json()
    shown = [(c["line"], c["side"], c["start_line"], c["position"], c["diff_hunk"].splitlines()[-1]) for c in listed]
    # The hunk: "@@ -1,6 +1,6 @@", " line 1", " line 2", "-line 3", "+line three", " line 4", ...
    assert shown == [
        (3, "RIGHT", None, 4, "+line three"),
        (3, "LEFT", None, 3, "-line 3"),
        (5, "RIGHT", 2, 6, " line 5"),
    ]
    assert all(c["diff_hunk"].startswith("@@ -1,") and c["commit_id"] == head for c in listed)
    first = listed[0]
    fetched = carol.get(f"{API}/pulls/comments/{first['id']}")
    assert fetched.status_code == 200 and fetched.json()["body"] == "the new line"
    assert carol.get(f"{API}/pulls/comments/999999999").status_code == 404
    reply = carol.post(f"{API}/pulls/{number}/comments", json={"body": "agreed", "in_reply_to": first["id"]})
    assert reply.status_code == 201, reply.text
    assert (reply.json()["in_reply_to_id"], reply.json()["path"], reply.json()["line"]) == (first["id"], "calc.py", 3)
    missing = carol.post(f"{API}/pulls/{number}/comments", json={"body": "to nothing", "in_reply_to": 999999999})
    assert missing.status_code == 404


def test_a_single_comment_off_the_diff_names_the_field(simulator: SimulatorHandle):
    simulator.create_repo("alice", "demo")
    number, _ = _open_pr_changing_a_file(simulator)
    alice = simulator.api("alice")
    refused = alice.post(f"{API}/pulls/{number}/comments", json={"body": "x", "path": "calc.py", "line": 999})
    assert refused.status_code == 422
    assert refused.json()["message"] == "Validation Failed"
    assert refused.json()["errors"] == [
        {
            "resource": "PullRequestReviewComment",
            "code": "custom",
            "field": "pull_request_review_thread.line",
            "message": "could not be resolved",
        }
    ]
