"""AlertWorkflow `alert/<source>/<fingerprint>`: one run per alert fingerprint.

Each new notification (de-duplicated by its delivery id, so a retried webhook counts once) adds
its occurrences, and the run keeps the last status and the first and last time the alert was seen.
Then (workflows/alert_issue.py) it decides whether the alert is actionable (the deterministic
rules as a pre-filter, then the assessing agent as the child AgentWorkflow `<id>/assess-<n>`;
notifications that arrive meanwhile are counted and queued, and taken in order afterwards), files
ONE issue for the fingerprint (later firings update one occurrences comment on it), starts that issue's
IssueWorkflow itself, follows the issue by polling its state (GitHub's issue plus the
IssueWorkflow's latest run, by id: this survives either workflow continuing as new), and once the
issue is closed watches for `refire_window_seconds`: a firing within the window reopens an issue
closed as fixed and starts a new IssueWorkflow run on it, a `resolved` within it records
"verified" on the issue, and an issue that opens again meanwhile (a red default branch after the
merge) is followed again; when the window passes the run ends, so the next firing starts a fresh
run, which files a new issue.

Runs recorded before filing existed only count (workflow.patched(FILES_ISSUES) is False on replay),
and runs recorded before the assessing agent existed decide by the rules alone (ASSESS_AGENT).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.alert_issue import AlertEnd, AlertRunInput, AlertRunOutcome, AlertWatch
    from shopfloor.models.inbox import ALERT_SIGNAL, ALERT_WORKFLOW, Alert
    from shopfloor.models.inbox_state import AlertNotification
    from shopfloor.models.ledger import ADMISSION_SIGNAL, AdmissionReply
    from shopfloor.models.pipeline_status import STATUS_QUERY, PipelineStatus
    from shopfloor.search_attributes import SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.alert_issue import AlertIssueFlow
    from shopfloor.workflows.inbox import DEDUPE_KEPT, EVENTS_KEPT, IDLE_TIMEOUT, idle_left, remember
    from shopfloor.workflows.pipeline_controls import alert_status

FILES_ISSUES = "alert-files-issues"
# Runs recorded before the watch window polled the issue wait for the window's end unwatched.
WATCH_POLLS = "alert-watch-polls-issue"


def _utc(t: datetime | None, default: datetime) -> datetime:
    if t is None:
        return default
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)  # sources omit the zone at times


@workflow.defn(name=ALERT_WORKFLOW)
class AlertWorkflow(AlertIssueFlow):
    @workflow.init
    def __init__(self, inp: AlertRunInput) -> None:
        self.inp = inp
        self.watch = inp.carry or AlertWatch(source=inp.source, fingerprint=inp.fingerprint, repo=inp.repo)
        self._queue: list[Alert] = list(self.watch.pending)
        self.watch.pending = []
        self._handled_this_run = 0
        self._repo_published: str | None = None

    @workflow.signal(name=ALERT_SIGNAL)
    def alert(self, a: Alert) -> None:
        s = self.watch
        if a.delivery_id:
            if a.delivery_id in s.seen:
                return  # the same notification again (sender retry, second replica)
            remember(s.seen, a.delivery_id, DEDUPE_KEPT)
        now = workflow.now()
        s.occurrences += a.occurrences
        s.notifications += 1
        s.last_status = a.status
        s.summary = a.summary[:200] or s.summary
        s.repo = s.repo or a.repo
        first, last = _utc(a.first_seen, now), _utc(a.last_seen, now)
        s.first_seen = min(s.first_seen, first) if s.first_seen else first
        s.last_seen = max(s.last_seen, last) if s.last_seen else last
        s.last_activity = now.timestamp()
        note = AlertNotification(delivery_id=a.delivery_id, status=a.status, occurrences=a.occurrences, at=now)
        remember(s.last_notifications, note, EVENTS_KEPT)
        self._queue.append(a)  # what the notification means for the issue: in the run loop, in order
        self._handled_this_run += 1
        self.publish()

    @workflow.signal(name=ADMISSION_SIGNAL)
    def ledger_admission(self, reply: AdmissionReply) -> None:
        """The spend ledger's answer to an assessment's request to run (workflows/ledger.py)."""
        if self.admission is not None:
            self.admission.on_reply(reply)

    @workflow.query(name="alert_state")
    def alert_state(self) -> AlertWatch:
        return self.watch

    @workflow.query(name=STATUS_QUERY)
    def status(self) -> PipelineStatus:
        return alert_status(self.watch)  # the one control that applies to an alert run

    @workflow.run
    async def run(self, inp: AlertRunInput) -> AlertRunOutcome:
        if not workflow.patched(FILES_ISSUES):
            return await self._count_only(inp)
        s = self.watch
        if s.last_activity is None:
            s.last_activity = workflow.now().timestamp()
        s.poll_delay = s.poll_delay or inp.poll_seconds
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set(s.phase)])
        while True:
            self._publish_repo()
            self.publish()
            if self._handled_this_run >= inp.continue_after_events or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                s.pending, s.runs = list(self._queue), s.runs + 1
                workflow.continue_as_new(inp.model_copy(update={"carry": s}))
            if self._queue:
                await self.take(self._queue.pop(0))
                if s.phase == "unrouted":
                    return self._outcome("unrouted", s.assessment)
                continue  # take everything received before acting on GitHub
            await self.converge()
            self.publish()
            seconds, why = self._next_wake()
            try:
                if seconds <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: bool(self._queue), timeout=timedelta(seconds=seconds), timeout_summary=f"alert: next {why}"
                )
            except TimeoutError:
                if why == "window":
                    self.set_phase("closed")
                if why in ("window", "idle"):
                    if not self._queue:
                        break
                    continue
                changed = await self.poll()
                self._handled_this_run += 1
                s.poll_delay = inp.poll_seconds if changed else min(s.poll_delay * 2, inp.poll_max_seconds)
        if s.phase == "closed":
            return self._outcome("closed", f"the issue was closed ({s.closed_reason}); no firing within the window")
        return self._outcome("idle", f"no notification for {IDLE_TIMEOUT.days} days; {s.assessment}".rstrip("; "))

    def _next_wake(self) -> tuple[float, str]:
        s, now = self.watch, workflow.now()
        if s.phase == "watching" and s.watch_until is not None:
            left = (s.watch_until - now).total_seconds()
            # The closed issue may open again meanwhile (CI on the default branch went red after
            # the merge, a person reopened it): follow it then, as before the close.
            if left > s.poll_delay and workflow.patched(WATCH_POLLS):
                return s.poll_delay, "poll"
            return left, "window"
        if s.want_issue or s.issue_number is not None:
            return s.poll_delay, "poll"  # follow the issue; a failed step is retried meanwhile
        return idle_left(s.last_activity or now.timestamp()).total_seconds(), "idle"

    def _handled_since(self, handled: int) -> Callable[[], bool]:
        """Whether a notification was handled after the first `handled` of this run."""
        return lambda: self._handled_this_run != handled

    def _outcome(self, state: AlertEnd, reason: str) -> AlertRunOutcome:
        s = self.watch
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set(s.phase)])
        self.publish()
        return AlertRunOutcome(
            state=state,
            phase=s.phase,
            occurrences=s.occurrences,
            notifications=s.notifications,
            last_status=s.last_status,
            issue_number=s.issue_number,
            issue_url=s.issue_url,
            issues_filed=s.issues_filed,
            reopened=s.reopened,
            reason=reason,
        )

    async def _count_only(self, inp: AlertRunInput) -> AlertRunOutcome:
        """The loop of runs recorded before issues were filed: count until idle (kept for replay)."""
        s = self.watch
        if s.last_activity is None:
            s.last_activity = workflow.now().timestamp()
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set("received")])
        while True:
            self._publish_repo()
            self.publish()
            if self._handled_this_run >= inp.continue_after_events or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                s.runs += 1
                workflow.continue_as_new(inp.model_copy(update={"carry": s}))
            handled = self._handled_this_run
            left = idle_left(s.last_activity)
            try:
                if left.total_seconds() <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    self._handled_since(handled),
                    timeout=left,
                    timeout_summary="alert: idle, ends unless it fires again",
                )
            except TimeoutError:
                break
        s.state = "idle"
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set("idle")])
        self.publish()
        return AlertRunOutcome(
            state="idle", occurrences=s.occurrences, notifications=s.notifications, last_status=s.last_status
        )

    def _publish_repo(self) -> None:
        # The repo may come with a later notification (routes change): mark it once known.
        if self.watch.repo and self.watch.repo != self._repo_published:
            workflow.upsert_search_attributes([SHOPFLOOR_REPO.value_set(self.watch.repo)])
            self._repo_published = self.watch.repo

    def publish(self) -> None:
        s = self.watch
        lines = [
            f"**alert** `{s.source}/{s.fingerprint}` · {s.last_status or 'no notification yet'}"
            + (f" · repo `{s.repo}`" if s.repo else " · unrouted")
            + f" · phase **{s.phase}**",
            f"occurrences: {s.occurrences} in {s.notifications} notifications · run {s.runs}",
        ]
        if s.issue_number is not None:
            lines.append(
                f"issue [#{s.issue_number}]({s.issue_url}) · fired {s.issue_occurrences}× on it · "
                f"issue workflow: {s.issue_workflow or 'not seen yet'} · reopened {s.reopened}×"
            )
        if s.watch_until is not None and s.phase == "watching":
            lines.append(f"closed ({s.closed_reason}); watching until {s.watch_until.isoformat()}")
        if s.verified_at is not None:
            lines.append(f"verified: resolved at {s.verified_at.isoformat()} after the fix merged")
        if s.assessment:
            lines.append(f"assessment: {s.assessment[:600]}")
        if s.verdict is not None and s.assessed_at is not None:
            v = s.verdict
            lines.append(
                f"agent verdict ({s.verdict_run}, {s.assessed_at.isoformat()}): "
                f"{'actionable' if v.actionable else 'not actionable'}, severity {v.severity}"
                + (f" · suspected: {v.suspected_area[:160]!r}" if v.suspected_area else "")
            )
        if s.assessments:
            lines.append(f"assessing agent runs: {s.assessments} · ${s.assess_cost_usd:.4f}")
        if s.summary:
            lines.append(f"summary: {s.summary[:120]!r}")
        if s.first_seen and s.last_seen:
            lines.append(f"first seen {s.first_seen.isoformat()} · last seen {s.last_seen.isoformat()}")
        if s.last_error:
            lines.append(f"last error (retrying): {s.last_error[:200]}")
        workflow.set_current_details("\n".join(lines))
