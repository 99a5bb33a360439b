"""AlertWorkflow `alert/<source>/<fingerprint>`: one run per alert fingerprint (DESIGN §5).

For now it counts: each new notification (de-duplicated by its delivery id, so a retried
webhook counts once) adds its occurrences, and the run keeps the last status and the first and
last time the alert was seen. Filing the issue and watching for a regression come next. It ends
after IDLE_TIMEOUT with no notification, and continues as new like the GitHub inboxes.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.factory import AlertInboxInput, AlertNotification, AlertOutcome, AlertState
    from shopfloor.models.inbox import ALERT_SIGNAL, ALERT_WORKFLOW, Alert
    from shopfloor.search_attributes import SHOPFLOOR_REPO, SHOPFLOOR_STAGE
    from shopfloor.workflows.inbox import DEDUPE_KEPT, EVENTS_KEPT, idle_left, remember


def _utc(t: datetime | None, default: datetime) -> datetime:
    if t is None:
        return default
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)  # sources omit the zone at times


@workflow.defn(name=ALERT_WORKFLOW)
class AlertWorkflow:
    @workflow.init
    def __init__(self, inp: AlertInboxInput) -> None:
        self.s = inp.carry or AlertState(source=inp.source, fingerprint=inp.fingerprint, repo=inp.repo)
        self._handled_this_run = 0
        self._repo_published: str | None = None

    @workflow.signal(name=ALERT_SIGNAL)
    def alert(self, a: Alert) -> None:
        s = self.s
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
        self._handled_this_run += 1
        self.publish()

    @workflow.query(name="alert_state")
    def alert_state(self) -> AlertState:
        return self.s

    @workflow.run
    async def run(self, inp: AlertInboxInput) -> AlertOutcome:
        s = self.s
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
                await workflow.wait_condition(lambda h=handled: self._handled_this_run != h, timeout=left)
            except TimeoutError:
                break
        s.state = "idle"
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set("idle")])
        self.publish()
        return AlertOutcome(
            state="idle", occurrences=s.occurrences, notifications=s.notifications, last_status=s.last_status
        )

    def _publish_repo(self) -> None:
        # The repo may come with a later notification (routes change): mark it once known.
        if self.s.repo and self.s.repo != self._repo_published:
            workflow.upsert_search_attributes([SHOPFLOOR_REPO.value_set(self.s.repo)])
            self._repo_published = self.s.repo

    def publish(self) -> None:
        s = self.s
        lines = [
            f"**alert** `{s.source}/{s.fingerprint}` · {s.last_status or 'no notification yet'}"
            + (f" · repo `{s.repo}`" if s.repo else " · unrouted"),
            f"occurrences: {s.occurrences} in {s.notifications} notifications · run {s.runs}",
        ]
        if s.summary:
            lines.append(f"summary: {s.summary[:120]!r}")
        if s.first_seen and s.last_seen:
            lines.append(f"first seen {s.first_seen.isoformat()} · last seen {s.last_seen.isoformat()}")
        workflow.set_current_details("\n".join(lines))
