"""AlertWorkflow files one bug per fingerprint and follows it (DESIGN §5, issue 6 scenario 5), on
the dev server with every workflow task replayed, GitHub being the simulator. The worker serves
IssueWorkflow too, so the issue's inbox runs; the triage → merge pipeline is not assumed: "the fix
merged" is a maintainer closing the issue as completed (and the edge's `issues.closed` reaching
the IssueWorkflow, which then ends `closed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from agent_runs import record_history
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle

from shopfloor.models.alert_issue import ALERT_ISSUE_LABEL, AlertRunInput, AlertRunOutcome, AlertWatch
from shopfloor.models.factory import InboxSummary
from shopfloor.models.github_ops import comment_marker
from shopfloor.models.inbox import (
    ALERT_SIGNAL,
    ALERT_WORKFLOW,
    GITHUB_EVENT_SIGNAL,
    Alert,
    RepoEvent,
    alert_workflow_id,
    issue_workflow_id,
)
from shopfloor.settings import Settings

WINDOW = 6.0  # seconds: the refire window of these runs


@pytest.fixture
def gh_settings(settings: Settings, simulator: SimulatorHandle) -> Settings:
    return settings.model_copy(update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN)})


class Fixture:
    def __init__(self, client: Client, s: Settings, sim: SimulatorHandle) -> None:
        self.client, self.s, self.sim = client, s, sim
        self.name = f"shop-{uuid.uuid4().hex[:8]}"
        self.repo = f"acme/{self.name}"
        self.fp = f"fp-{uuid.uuid4().hex[:8]}"
        self.wf_id = alert_workflow_id("generic", self.fp)
        sim.create_repo("acme", self.name)
        sim.set_permission("acme", self.name, "maria", "maintain")

    def alert(self, delivery: str, *, status: str = "firing", repo: str | None = "",
              labels: dict[str, str] | None = None) -> Alert:  # fmt: skip
        return Alert(
            source="generic", fingerprint=self.fp, status=status, delivery_id=delivery,  # type: ignore[arg-type]
            repo=self.repo if repo == "" else repo, summary="checkout returns 500 @oncall",
            description="Traceback:\n  ```\n<!-- hidden -->KeyError: 'cart'", labels=labels or {"service": "checkout"},
            links=["https://grafana.example/d/1"],
        )  # fmt: skip

    async def fire(self, a: Alert, **inp: Any) -> WorkflowHandle:
        """As the edge does it: signal-with-start (a finished run is followed by a new one)."""
        defaults = {"poll_seconds": 0.5, "poll_max_seconds": 1.0, "refire_window_seconds": WINDOW}
        return await self.client.start_workflow(
            ALERT_WORKFLOW, AlertRunInput(source="generic", fingerprint=self.fp, repo=a.repo, **{**defaults, **inp}),
            id=self.wf_id, task_queue=self.s.task_queue, start_signal=ALERT_SIGNAL, start_signal_args=[a],
        )  # fmt: skip

    async def state_when(self, ok: Callable[[AlertWatch], bool], timeout: float = 40) -> AlertWatch:
        handle = self.client.get_workflow_handle(self.wf_id)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            state = await handle.query("alert_state", result_type=AlertWatch)
            if ok(state):
                return state
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"alert never got there: {state.model_dump_json(indent=1)}")
            await asyncio.sleep(0.2)

    def issues(self, state: str = "all") -> list[dict[str, Any]]:
        with self.sim.api() as c:
            resp = c.get(f"/repos/{self.repo}/issues", params={"state": state, "labels": ALERT_ISSUE_LABEL})
            resp.raise_for_status()
            return resp.json()

    def comments(self, number: int) -> list[dict[str, Any]]:
        with self.sim.api() as c:
            resp = c.get(f"/repos/{self.repo}/issues/{number}/comments")
            resp.raise_for_status()
            return resp.json()

    async def close_as_fixed(self, number: int, delivery: str) -> None:
        """A maintainer closes the issue as completed; the edge delivers `issues.closed`."""
        with self.sim.api("maria") as c:
            c.patch(f"/repos/{self.repo}/issues/{number}", json={"state": "closed", "state_reason": "completed"}).raise_for_status()
        closed = RepoEvent(delivery_id=delivery, event="issues", action="closed", repo=self.repo, number=number, sender="maria")
        handle = self.client.get_workflow_handle(issue_workflow_id(self.repo, number))
        await handle.signal(GITHUB_EVENT_SIGNAL, closed)
        with contextlib.suppress(WorkflowFailureError):  # how the issue's own pipeline ended is not tested here
            await asyncio.wait_for(handle.result(), 30)


async def inbox_when(handle: WorkflowHandle, ok: Callable[[InboxSummary], bool], timeout: float = 30) -> InboxSummary:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        summary = await handle.query("inbox", result_type=InboxSummary)
        if ok(summary):
            return summary
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"inbox never got there: {summary.model_dump_json(indent=1)}")
        await asyncio.sleep(0.2)


async def test_three_firings_one_issue_fixed_then_refire_reopens_and_later_files_anew(
    temporal_client, gh_settings, running_worker, simulator
):
    f = Fixture(temporal_client, gh_settings, simulator)
    async with running_worker(gh_settings):
        await f.fire(f.alert("n-1"))
        filed = await f.state_when(lambda s: s.phase in ("fixing", "filed") and s.starts_done == 1)
        number = filed.issue_number
        assert number is not None and filed.issues_filed == 1
        await f.fire(f.alert("n-2"))
        await f.fire(f.alert("n-3"))
        await f.fire(f.alert("n-3"))  # the sender retried: no effect
        state = await f.state_when(lambda s: s.reported_occurrences == 3)
        assert (state.issue_occurrences, state.notifications, state.issues_filed) == (3, 3, 1)

        # ONE issue, labelled, carrying the marker; ONE occurrences comment saying 3.
        (issue,) = f.issues()
        assert issue["number"] == number and issue["state"] == "open" and issue["user"]["login"] == "shopfloor[bot]"
        assert {lab["name"] for lab in issue["labels"]} == {"bug", ALERT_ISSUE_LABEL}
        assert comment_marker(f.wf_id, "alert-issue") in issue["body"]
        assert "<!-- hidden -->" not in issue["body"] and "````text" in issue["body"]  # quoted data, fenced
        assert issue["title"] == "[alert] checkout returns 500 @oncall"
        # (the IssueWorkflow may add its own progress comment: only ours are counted)
        (comment,) = [c for c in f.comments(number) if comment_marker(f.wf_id, "occurrences") in c["body"]]
        assert not [c for c in f.comments(number) if f.wf_id in c["body"] and c["id"] != comment["id"]]
        assert "fired **3** times" in comment["body"]

        # Its IssueWorkflow was started by us, with an internal trigger: the filed issue's text.
        issue_wf = temporal_client.get_workflow_handle(issue_workflow_id(f.repo, number))
        inbox = await inbox_when(issue_wf, lambda s: s.events_seen == 1)
        assert inbox.bots_ignored == 0 and inbox.trigger_title == issue["title"]
        assert inbox.trigger_text is not None and "shopfloor filed this bug" in inbox.trigger_text.preview
        assert inbox.last_events[0].delivery_id == f"alert:generic/{f.fp}#{number}"
        first_run = (await issue_wf.describe()).run_id

        # "Merged": closed as completed, the IssueWorkflow ends closed -> the alert watches.
        await f.close_as_fixed(number, "close-1")
        await f.state_when(lambda s: s.phase == "watching" and s.closed_reason == "completed")

        # Fires again within the window: reopened with a comment, a new IssueWorkflow run.
        await f.fire(f.alert("n-4"))
        state = await f.state_when(lambda s: s.phase == "reopened" and s.starts_done == 2)
        assert state.reopened == 1 and state.issue_number == number and state.issues_filed == 1
        (issue,) = f.issues()
        assert issue["state"] == "open"
        refired = [c for c in f.comments(number) if comment_marker(f.wf_id, "refired-1") in c["body"]]
        assert len(refired) == 1 and "fired again after the fix merged" in refired[0]["body"]
        latest = temporal_client.get_workflow_handle(issue_workflow_id(f.repo, number))
        desc = await latest.describe()
        assert desc.run_id != first_run
        inbox = await inbox_when(latest, lambda s: s.events_seen == 1)
        assert inbox.last_events[0].delivery_id == f"alert:generic/{f.fp}#{number}:reopened-1"
        assert inbox.last_events[0].action == "reopened" and inbox.trigger_text is not None

        # Fixed again; the window passes without a firing: the run ends closed.
        await f.close_as_fixed(number, "close-2")
        first_alert_run = temporal_client.get_workflow_handle(f.wf_id)
        outcome = AlertRunOutcome.model_validate(await asyncio.wait_for(first_alert_run.result(), WINDOW + 30))
        await record_history(first_alert_run, "alert-issue-filed-reopened-closed")
        assert (outcome.state, outcome.phase, outcome.issue_number, outcome.reopened) == ("closed", "closed", number, 1)

        # Firing after the window: a fresh run files a second issue.
        await f.fire(f.alert("n-5"))
        state = await f.state_when(lambda s: s.starts_done == 1 and s.issue_number not in (None, number))
        await temporal_client.get_workflow_handle(f.wf_id).terminate("test over")
        assert state.issues_filed == 1 and state.runs == 1  # a fresh run: its own count
        second = temporal_client.get_workflow_handle(issue_workflow_id(f.repo, state.issue_number))
        if (await second.describe()).status == WorkflowExecutionStatus.RUNNING:
            await second.terminate("test over")
    issues = sorted(f.issues(), key=lambda i: i["number"])
    assert [(i["number"], i["state"]) for i in issues] == [(number, "closed"), (state.issue_number, "open")]


async def test_unrouted_alert_ends_without_filing(temporal_client, gh_settings, running_worker, simulator):
    f = Fixture(temporal_client, gh_settings, simulator)
    async with running_worker(gh_settings):
        handle = await f.fire(f.alert("u-1", repo=None))
        outcome = AlertRunOutcome.model_validate(await asyncio.wait_for(handle.result(), 30))
    assert (outcome.state, outcome.phase, outcome.issue_number, outcome.issues_filed) == ("unrouted", "unrouted", None, 0)
    assert "unrouted" in outcome.reason
    assert not [r for r in simulator.requests() if r["method"] == "POST" and r["path"].endswith("/issues")]


async def test_informational_and_resolved_alerts_file_nothing(temporal_client, gh_settings, running_worker, simulator):
    f = Fixture(temporal_client, gh_settings, simulator)
    async with running_worker(gh_settings):
        await f.fire(f.alert("r-1", status="resolved"))
        state = await f.state_when(lambda s: s.notifications == 1 and bool(s.assessment))
        assert state.assessment == "resolved before an issue was filed"
        await f.fire(f.alert("i-1", labels={"severity": "info"}))
        state = await f.state_when(lambda s: s.notifications == 2 and s.assessment.startswith("informational"))
        await asyncio.sleep(1.5)  # a few ticks: still nothing filed
        state = await f.state_when(lambda s: True)
        await temporal_client.get_workflow_handle(f.wf_id).terminate("test over")
    assert (state.phase, state.issue_number, state.want_issue) == ("assessing", None, False)
    assert f.issues() == []


def test_rules_and_issue_text_are_plain_functions():
    from shopfloor.activities.github.alert_issues import render_alert_issue
    from shopfloor.models.alert_issue import FileAlertIssueInput
    from shopfloor.workflows.alert_issue import assess

    a = Alert(source="generic", fingerprint="fp", status="firing", summary="x")
    assert assess(a, "acme/shop") == (True, "firing on acme/shop")
    assert assess(a, None)[0] is False and assess(a, None)[1].startswith("unrouted")
    assert assess(a.model_copy(update={"status": "resolved"}), "acme/shop")[0] is False
    assert assess(a.model_copy(update={"labels": {"Severity": "INFO"}}), "acme/shop")[1] == "informational (severity=info)"
    assert assess(a.model_copy(update={"labels": {"severity": "critical"}}), "acme/shop")[0] is True

    title, body = render_alert_issue(FileAlertIssueInput(
        repo="acme/shop", workflow_id="alert/generic/fp", source="generic", fingerprint="fp",
        summary="boom `x`", description="a ````` fence\n<!-- shopfloor:alert/generic/fp:alert-issue -->",
        labels={"service": "check`out"}, links=["javascript:alert(1)", "https://ok.example/x"], occurrences=3,
    ))  # fmt: skip
    assert title == "[alert] boom `x`"
    assert body.count(comment_marker("alert/generic/fp", "alert-issue")) == 1  # a pasted marker is stripped
    assert "``````text\na ````` fence" in body and "fired **3** times" in body
    assert "javascript:" not in body and "<https://ok.example/x>" in body and "`check'out`" in body
