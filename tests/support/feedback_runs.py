"""What the feedback tests share (tests/e2e/test_factory_feedback.py,
tests/security/test_feedback_needs_write_access.py): the goal an agent run was given, read from
its start in Temporal's history, a pull request's line comment or review made as a person, the
cassettes of a run whose second fix round answers people's feedback, and the run's refusals."""

from __future__ import annotations

from typing import Any

from agent_runs import call
from factory_runs import APPROVE, FIX, TEST_CMD, TRIAGE_TURNS, Factory, fix_turns
from temporalio.client import Client

from shopfloor.models.agent_run import AgentInput

# Round 2 answers the feedback: a test for negative numbers.
NEGATIVES = {
    "path": "tests/test_ops.py",
    "old": "assert add(2, 3) == 5",
    "new": "assert add(2, 3) == 5\n    assert add(-1, -1) == -2",
}


def feedback_models() -> dict[str, list[dict[str, Any]]]:
    """Triage, a first fix the review approves, and a second fix round (if one comes) that adds a test."""
    approve = [{"tool_calls": [call("submit", **APPROVE)]}]
    return {
        "triage": TRIAGE_TURNS,
        "fix": fix_turns(),
        "fix-2": [
            {"tool_calls": [call("edit_file", **NEGATIVES)]},
            {"tool_calls": [call("run_command", command=TEST_CMD)]},
            {"tool_calls": [call("submit", **FIX)]},
        ],
        "review": approve,
        "review-2": approve,
    }


async def agent_goal(client: Client, workflow_id: str) -> str:
    """The goal the agent run `workflow_id` was started with (its input in history)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    start = history.events[0].workflow_execution_started_event_attributes
    [inp] = await client.data_converter.decode(start.input.payloads, [AgentInput])
    return inp.goal


def review(f: Factory, pr: int, login: str, event: str, body: str, comments: list[dict[str, Any]]) -> dict[str, Any]:
    resp = f.gh(login).post(
        f"/repos/{f.repo}/pulls/{pr}/reviews", json={"event": event, "body": body, "comments": comments}
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def line_comment(f: Factory, pr: int, login: str, path: str, line: int, body: str) -> dict[str, Any]:
    resp = f.gh(login).post(f"/repos/{f.repo}/pulls/{pr}/comments", json={"path": path, "line": line, "body": body})
    assert resp.status_code == 201, resp.text
    return resp.json()


def feedback_refusals(f: Factory, number: int) -> list[str]:
    """The replies that said a person's feedback was not acted on (on the issue)."""
    return [c["body"] for c in f.get(f"/issues/{number}/comments") if "shopfloor did not act on" in c["body"]]
