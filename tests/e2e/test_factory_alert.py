"""An alert becomes a merged fix, and a regression reopens it, end to end:
a monitor POSTs generic alerts (bearer token) to the real webhook edge, `SHOPFLOOR_ALERT_ROUTES`
sends them to a repository on the GitHub simulator, the AlertWorkflow has its assessing agent
(scripted: actionable) judge the first firing, files one issue and starts its IssueWorkflow, which runs the real pipeline with scripted agents (triage → fix → PR → the
simulator's CI → review → a maintainer's `/shopfloor approve` → squash merge → issue closed).
CI on main after the squash is awaited and reported on the issue (green); the alert's `resolved`
notification after the merge records "verified" on the issue. The alert then fires again: the
issue is reopened and a new IssueWorkflow run starts on it.

The edge starts the AlertWorkflow with its defaults (poll every 60 s, a 24 h refire window): the
test never waits for a poll, because every new firing checks the issue's state at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from agent_runs import call, record_history
from factory_runs import (
    APPROVE,
    ASSESS,
    TRIAGE_TURNS,
    Factory,
    approve_and_finish,
    assert_merged,
    assess_turns,
    factory,
    fix_turns,
)
from pydantic import SecretStr
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from waiting import DEADLINE_S, query_until

from shopfloor.models.alert_issue import ALERT_ISSUE_LABEL, AlertWatch
from shopfloor.models.github_ops import comment_marker
from shopfloor.models.inbox import alert_workflow_id, issue_workflow_id
from shopfloor.models.inbox_state import InboxSummary
from shopfloor.models.merge_verify import MAIN_CI_KIND, MergeVerifyOutcome, merge_verify_workflow_id

TOKEN = "factory-alert-token"


class Monitor:
    """The monitoring system: POSTs generic alerts for one fingerprint to the edge."""

    def __init__(self, f: Factory, fingerprint: str) -> None:
        self.f, self.fp = f, fingerprint
        self.wf_id = alert_workflow_id("generic", fingerprint)
        self.t0 = datetime.now(UTC).replace(microsecond=0)
        self.fired = 0

    def fire(self, status: str = "firing") -> str:
        """One notification (a distinct one each time: a later `last_seen`); the edge's outcome."""
        self.fired += 1
        body = {
            "fingerprint": self.fp,
            "summary": "calc.add returns the difference",
            "status": status,
            "description": "AssertionError: add(2, 3) == -1, expected 5",
            "labels": {"service": "calc"},
            "first_seen": self.t0.isoformat(),
            "last_seen": (self.t0 + timedelta(seconds=self.fired)).isoformat(),
        }
        resp = httpx.post(
            f"{self.f.edge_url}/webhooks/alerts/generic",
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert resp.status_code == 202, resp.text
        (got,) = resp.json()["alerts"]
        assert got["workflow_id"] == self.wf_id, got
        return got["outcome"]

    async def state_when(self, ok: Callable[[AlertWatch], bool], what: str) -> AlertWatch:
        return await query_until(self.f.client.get_workflow_handle(self.wf_id), "alert_state", AlertWatch, ok, what)

    def alert_comments(self, number: int, kind: str) -> list[dict[str, Any]]:
        marker = comment_marker(self.wf_id, kind)
        return [c for c in self.f.get(f"/issues/{number}/comments") if marker in c["body"]]


async def inbox_when(f: Factory, ok: Callable[[InboxSummary], bool], what: str) -> InboxSummary:
    assert f.handle is not None
    return await query_until(f.handle, "inbox", InboxSummary, ok, what)


async def test_alert_fires_three_times_is_fixed_and_merged_then_refires_and_reopens(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {
        "assess_alert": assess_turns(),
        "triage": TRIAGE_TURNS,
        "fix": fix_turns(),
        "review": [{"tool_calls": [call("submit", **APPROVE)]}],
    }
    name = f"calc{uuid.uuid4().hex[:6]}"
    routes = {"service=calc": f"acme/{name}"}
    async with factory(
        simulator,
        settings,
        running_worker,
        temporal_client,
        tmp_path,
        models,
        name=name,
        alert_token=SecretStr(TOKEN),
        alert_routes=routes,
        ci_on_default_branch=True,
    ) as f:
        m = Monitor(f, f"calc-add-{uuid.uuid4().hex[:8]}")
        try:
            await fired_fixed_refired(f, m)
        finally:  # the reopened run would go on (its cassettes are spent): stop both workflows
            await terminate_running(f, m.wf_id, *([f.handle.id] if f.handle else []))


async def fired_fixed_refired(f: Factory, m: Monitor) -> None:
    # First firing: the edge starts the AlertWorkflow, which files the issue and starts its run.
    assert m.fire() == "started"
    filed = await m.state_when(lambda s: s.issue_number is not None and s.starts_done == 1, "the issue to be filed")
    number = filed.issue_number
    assert filed.assessments == 1 and filed.verdict is not None and filed.verdict.actionable, filed
    assert filed.verdict_run == f"{m.wf_id}/assess-1" and filed.assessment.startswith("actionable, severity high")
    f.handle = f.client.get_workflow_handle(issue_workflow_id(f.repo, number))
    # Two more notifications while the fix is under way: counted on the same issue.
    assert m.fire() == "signalled"
    assert m.fire() == "signalled"
    await m.state_when(lambda s: s.reported_occurrences == 3, "the occurrences comment to say 3")

    # The IssueWorkflow the alert started runs the real pipeline; a maintainer approves; merged.
    outcome = await approve_and_finish(f, number)
    assert_merged(f, number, outcome)  # closed as completed, ONE merged PR, the fix on main
    first_run = (await f.handle.describe()).run_id
    issues = f.get("/issues", state="all", labels=ALERT_ISSUE_LABEL)
    assert [i["number"] for i in issues] == [number], issues  # ONE issue for the fingerprint
    issue = issues[0]
    assert issue["user"]["login"] == "shopfloor[bot]" and issue["title"] == f"[alert] {ASSESS['title']}"
    assert comment_marker(m.wf_id, "alert-issue") in issue["body"]
    assert {label["name"] for label in issue["labels"]} == {"bug", ALERT_ISSUE_LABEL}
    (occurrences,) = m.alert_comments(number, "occurrences")
    assert "fired **3** times" in occurrences["body"], occurrences["body"]
    state = await m.state_when(lambda s: True, "a look")
    assert (state.occurrences, state.notifications, state.issues_filed, state.reopened) == (3, 3, 1, 0), state
    (assessed,) = m.alert_comments(number, "assessment")  # the verdict the issue was filed on
    assert "actionable, severity **high**" in assessed["body"] and ASSESS["suspected_area"] in assessed["body"]

    # CI on main after the squash: awaited, green, reported on the (still closed) issue.
    (pr,) = f.get("/pulls", state="all")
    sha = f.get(f"/pulls/{pr['number']}")["merge_commit_sha"]
    verify = f.client.get_workflow_handle(merge_verify_workflow_id(f.repo, number, sha))
    main_ci = MergeVerifyOutcome.model_validate(await asyncio.wait_for(verify.result(), timeout=DEADLINE_S))
    assert (main_ci.state, main_ci.reopened, main_ci.reported) == ("success", False, True), main_ci
    (reported,) = [
        c for c in f.get(f"/issues/{number}/comments") if comment_marker(verify.id, MAIN_CI_KIND) in c["body"]
    ]
    assert f"**CI passed** on `main` after the merge of #{pr['number']}" in reported["body"], reported["body"]
    assert f.get(f"/issues/{number}")["state"] == "closed"

    # The alert resolves after the merge: "verified" on the issue, once.
    assert m.fire("resolved") == "signalled"
    verified = await m.state_when(lambda s: s.verified_round == 0, "the verification")
    assert verified.phase == "watching" and verified.verified_at is not None, verified
    (note,) = m.alert_comments(number, "verified-0")
    assert "\n**Verified**: the alert resolved at " in note["body"] and "after the fix merged" in note["body"], note
    await record_history(f.client.get_workflow_handle(m.wf_id), "alert-issue-verified-after-merge")

    # The alert fires again after the merge (within the 24 h window): the issue is reopened with a
    # comment and a new IssueWorkflow run starts on it (an internal `issues.reopened`).
    assert m.fire() == "signalled"
    reopened = await m.state_when(lambda s: s.phase == "reopened" and s.starts_done == 2, "the reopen")
    assert (reopened.reopened, reopened.issue_number, reopened.issues_filed) == (1, number, 1), reopened
    issue = f.get(f"/issues/{number}")
    assert issue["state"] == "open", issue
    refired = m.alert_comments(number, "refired-1")
    assert len(refired) == 1 and "fired again after the fix merged" in refired[0]["body"], refired
    inbox = await inbox_when(f, lambda s: s.events_seen >= 1, "the new run's first event")
    assert (await f.handle.describe()).run_id != first_run
    assert inbox.last_events[0].delivery_id == f"alert:generic/{m.fp}#{number}:reopened-1"
    assert inbox.last_events[0].action == "reopened"
    assert [i["number"] for i in f.get("/issues", state="all", labels=ALERT_ISSUE_LABEL)] == [number]
    assert len(f.get("/pulls", state="all")) == 1
    # The assessing agent ran once for the fingerprint, not once per firing.
    assert reopened.assessments == 1, reopened
    assert (
        await f.client.get_workflow_handle(f"{m.wf_id}/assess-1").describe()
    ).status == WorkflowExecutionStatus.COMPLETED
    try:
        await f.client.get_workflow_handle(f"{m.wf_id}/assess-2").describe()
        raise AssertionError("a second assessing run started")
    except RPCError as exc:
        assert exc.status == RPCStatusCode.NOT_FOUND


async def terminate_running(f: Factory, *workflow_ids: str) -> None:
    for wf_id in workflow_ids:
        handle = f.client.get_workflow_handle(wf_id)
        try:
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test over")
        except RPCError:
            pass  # never started
