"""How an AlertWorkflow files, follows and watches the bug for its fingerprint.

Whether an alert is actionable is decided in two steps. First the deterministic rules, a cheap
pre-filter that spends no model call:
- no routed repository → not actionable, the run ends as `unrouted`;
- `resolved` before any issue was filed → not actionable (yet): a later firing is assessed again;
- a label `severity`, `level` or `priority` of info / informational / debug / none / ok / low, or
  `shopfloor=ignore` → not actionable (informational);
- otherwise firing + routed → actionable by the rules.
Then, when the rules say actionable, the assessing agent decides (workflows/alert_assess.py):
actionable → one issue is filed; not actionable → nothing is filed and `assessment` says why; it
cannot decide → the rules' decision stands. Runs recorded before the agent existed replay with the
rules alone (workflow.patched(ASSESS_AGENT) is False there); AlertRunInput.assess_with_agent=False
keeps the rules alone on purpose.

Every GitHub or Temporal step is idempotent, so the loop converges: what should exist (an issue,
its IssueWorkflow run, the reopened state, the occurrence count on GitHub) is compared with what
was done, and a failed step (bounded retries) is tried again on the next tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models import failure_types
    from shopfloor.models.alert_issue import (
        ASSESSMENT_KIND,
        OCCURRENCES_KIND,
        AlertIssueStatusInput,
        AlertRunInput,
        AlertWatch,
        FileAlertIssueInput,
        ReopenIssueInput,
        StartAlertIssueInput,
    )
    from shopfloor.models.github_ops import UpsertCommentInput
    from shopfloor.models.inbox import Alert
    from shopfloor.search_attributes import SHOPFLOOR_ISSUE, SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import (
        ALERT_ISSUE_STATUS,
        ALERT_START_ISSUE_WORKFLOW,
        GITHUB_FILE_ALERT_ISSUE,
        GITHUB_REOPEN_ISSUE,
        GITHUB_UPSERT_COMMENT,
        STEADY_RETRY,
        ActivityEntry,
        call,
    )
    from shopfloor.workflows.alert_assess import ASSESS_AGENT, AlertAssessing, assessment_comment, when_text

In = TypeVar("In")
Out = TypeVar("Out")

QUIET = {"info", "informational", "debug", "none", "ok", "low"}
# Runs recorded before a `resolved` after the fix was recorded as verified on the issue.
VERIFY_ON_RESOLVE = "alert-verified-on-resolve"
VERIFIED_KIND = "verified"  # the comment kind: `verified-<round>` (round: times reopened so far)


def assess(a: Alert, repo: str | None) -> tuple[bool, str]:
    """(actionable, why) for a notification while no issue exists."""
    if not repo:
        return False, "unrouted: no repository for this alert (SHOPFLOOR_ALERT_ROUTES)"
    if a.status != "firing":
        return False, "resolved before an issue was filed"
    labels = {k.lower(): v.strip().lower() for k, v in a.labels.items()}
    if labels.get("shopfloor") == "ignore":
        return False, "labelled shopfloor=ignore"
    for key in ("severity", "level", "priority"):
        if labels.get(key) in QUIET:
            return False, f"informational ({key}={labels[key]})"
    return True, f"firing on {repo}"


class AlertIssueFlow(AlertAssessing):
    """The filing part of AlertWorkflow; `self.watch` is its AlertWatch, `self.inp` its input."""

    watch: AlertWatch
    inp: AlertRunInput

    # -- one notification, in arrival order -----------------------------------------------------

    async def take(self, a: Alert) -> None:
        s, now = self.watch, workflow.now()
        s.poll_delay = self.inp.poll_seconds  # news: look again soon
        if s.issue_number is not None and s.phase in ("filed", "fixing", "reopened"):
            await self.poll()  # a firing just after the fix closed the issue must see it closed
        if a.status != "firing":
            if s.phase == "assessing" and not s.want_issue:
                await self._assess(a)
            elif s.issue_number is not None and workflow.patched(VERIFY_ON_RESOLVE):
                if s.phase == "watching":
                    await self.poll()  # reopened since it closed (CI on the default branch, a person)?
                # Only a resolve that came after the issue closed can verify the fix: one that came
                # before, and is handled only now, cannot, whatever GitHub shows by now.
                received = self._received_at(a) or now
                s.resolved_at = received if self._closed_before(received) else None
            return
        s.resolved_at = None  # firing again: whatever resolved before does not verify the fix
        if s.phase == "watching" and s.watch_until is not None and now <= s.watch_until:
            s.issue_occurrences += a.occurrences
            if s.closed_reason == "completed":
                s.reopened += 1
                s.reopen_pending = True
                self.set_phase("reopened")
            else:
                s.assessment = f"fired again, but the issue was closed as {s.closed_reason}: counted only"
            return
        if s.phase in ("watching", "closed"):
            self._forget_issue()  # the window passed: this is a new bug, a new issue
        if s.want_issue:
            s.issue_occurrences += a.occurrences
            return
        await self._assess(a)

    async def _assess(self, a: Alert) -> None:
        s = self.watch
        actionable, why = assess(a, s.repo)
        verdict = None
        if not s.repo:
            s.assessment = why
            self.set_phase("unrouted")
            return
        # Notifications keep arriving while the agent runs: the signal handler counts and queues
        # them, and take() sees them afterwards, in order.
        if actionable and self.inp.assess_with_agent and workflow.patched(ASSESS_AGENT):
            actionable, why, verdict = await self._ask_agent(a, why)
        s.assessment = why
        if actionable:
            s.want_issue, s.issue_occurrences, s.filing_alert = True, a.occurrences, a
            s.filing_verdict, s.assessment_posted = verdict, False

    def _forget_issue(self) -> None:
        s = self.watch
        s.want_issue, s.issue_number, s.issue_url, s.filing_alert = False, None, "", None
        s.issue_occurrences = s.reported_occurrences = s.starts_wanted = s.starts_done = 0
        s.reopen_pending, s.issue_closed_at, s.closed_reason, s.watch_until = False, None, None, None
        s.closed_seen_at, s.issue_workflow = None, ""
        s.resolved_at = s.verified_round = s.verified_at = None
        s.filing_verdict, s.assessment_posted = None, False  # the agent's last verdict still stands its hour
        self.set_phase("assessing")

    # -- converge GitHub and Temporal to what the state says ------------------------------------

    async def converge(self) -> None:
        s = self.watch
        if s.want_issue and s.issue_number is None and s.repo:
            filed = await self._act(GITHUB_FILE_ALERT_ISSUE, self._file_input(), "file the issue")
            if filed is None:
                return
            s.issue_number, s.issue_url = filed.number, filed.url
            s.issues_filed += 1
            s.reported_occurrences = s.issue_occurrences if filed.created else 0
            s.starts_wanted = max(s.starts_wanted, 1)
            workflow.upsert_search_attributes([SHOPFLOOR_ISSUE.value_set(filed.number)])
            self.set_phase("filed")
        if s.issue_number is None or not s.repo:
            return
        if s.filing_verdict is not None and not s.assessment_posted:
            # Not blocking: a failed comment is tried again on the next tick.
            text = assessment_comment(s.filing_verdict, s.verdict_run)
            s.assessment_posted = await self._comment(ASSESSMENT_KIND, text, None)
        if s.reopen_pending:
            await self._reopen()
            if s.reopen_pending:
                return
        if s.starts_done < s.starts_wanted:
            reopening = s.reopened > 0 and s.starts_wanted > 1
            delivery = f"alert:{self.wf_id.removeprefix('alert/')}#{s.issue_number}"
            start = StartAlertIssueInput(
                repo=s.repo,
                number=s.issue_number,
                action="reopened" if reopening else "opened",
                delivery_id=f"{delivery}:reopened-{s.reopened}" if reopening else delivery,
                new_run=reopening,
            )
            if await self._act(ALERT_START_ISSUE_WORKFLOW, start, "start the issue workflow") is None:
                return
            s.starts_done = s.starts_wanted
            if s.phase == "filed":
                self.set_phase("fixing")
        if s.phase in ("filed", "fixing", "reopened") and s.issue_occurrences > s.reported_occurrences:
            await self._comment(OCCURRENCES_KIND, self._occurrences_text(), s.issue_occurrences)
        if self._verified_now():
            if await self._comment(f"{VERIFIED_KIND}-{s.reopened}", self._verified_text(), None):
                s.verified_round, s.verified_at = s.reopened, s.resolved_at

    def _received_at(self, a: Alert) -> datetime | None:
        """When the notification `a` came (its signal), as the run recorded it; None: not known
        (no delivery id, or no longer among the last notifications kept)."""
        if not a.delivery_id:
            return None
        for note in reversed(self.watch.last_notifications):
            if note.delivery_id == a.delivery_id:
                return note.at
        return None

    def _closed_before(self, received: datetime) -> bool:
        """Whether the issue was closed before `received`: the run had seen it closed by then, or
        GitHub's close (whole seconds) was a full second earlier."""
        s = self.watch
        if s.closed_seen_at is None:
            return False
        if s.closed_seen_at <= received.timestamp():
            return True
        return s.issue_closed_at is not None and s.issue_closed_at + timedelta(seconds=1) <= received

    def _verified_now(self) -> bool:
        """The alert resolved after the issue closed as fixed, and that is not on the issue yet."""
        s = self.watch
        return (
            s.phase == "watching"
            and s.closed_reason == "completed"
            and s.resolved_at is not None
            and s.verified_round != s.reopened
        )

    def _verified_text(self) -> str:
        s = self.watch
        resolved = when_text(s.resolved_at or workflow.now())
        closed = when_text(s.issue_closed_at) if s.issue_closed_at else "when the fix merged"
        until = f" until {when_text(s.watch_until)}" if s.watch_until else ""
        return (
            f"**Verified**: the alert resolved at {resolved}, after the fix merged (issue closed {closed}). "
            f"shopfloor keeps watching it{until}: a firing before then reopens this issue."
        )

    async def _reopen(self) -> None:
        s = self.watch
        if not s.repo or not s.issue_number:
            raise ApplicationError(
                "reopening the alert's issue before one was filed",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        inp = ReopenIssueInput(repo=s.repo, issue_number=s.issue_number)
        if await self._act(GITHUB_REOPEN_ISSUE, inp, "reopen the issue") is None:
            return
        closed = f"closed {when_text(s.issue_closed_at)}" if s.issue_closed_at else "closed"
        text = (
            f"This alert fired again after the fix merged ({closed}; fired again {when_text(workflow.now())}, "
            f"within the {_hours(self.inp.refire_window_seconds)} watch window), so shopfloor reopened this issue "
            "and starts a new run on it."
        )
        if await self._comment(f"refired-{s.reopened}", text, None):
            s.reopen_pending = False
            s.starts_wanted += 1
            s.issue_closed_at = s.closed_reason = s.watch_until = s.closed_seen_at = None

    async def _comment(self, kind: str, body: str, reported: int | None) -> bool:
        s = self.watch
        if not s.repo or not s.issue_number:
            raise ApplicationError(
                "commenting on the alert's issue before one was filed",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        inp = UpsertCommentInput(repo=s.repo, issue_number=s.issue_number, workflow_id=self.wf_id, kind=kind, body=body)
        # The alert loop's own retry (STEADY_RETRY) instead of the pipeline's: its next tick tries again.
        if await self._act(GITHUB_UPSERT_COMMENT, inp, f"comment {kind}", retry=STEADY_RETRY) is None:
            return False
        if reported is not None:
            s.reported_occurrences = reported
        return True

    def _occurrences_text(self) -> str:
        s = self.watch
        n = s.issue_occurrences
        last = when_text(s.last_seen) if s.last_seen else when_text(workflow.now())
        return f"This alert has fired **{n}** time{'s' if n != 1 else ''}, last at {last}."

    def _file_input(self) -> FileAlertIssueInput:
        s, a = self.watch, self.watch.filing_alert
        if not s.repo:
            raise ApplicationError(
                "filing the alert's issue before its repository was routed",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        return FileAlertIssueInput(
            repo=s.repo,
            workflow_id=self.wf_id,
            source=s.source,
            fingerprint=s.fingerprint,
            summary=a.summary if a else s.summary,
            description=a.description if a else "",
            labels=a.labels if a else {},
            links=a.links if a else [],
            occurrences=s.issue_occurrences,
            first_seen=s.first_seen,
            last_seen=s.last_seen,
            title=s.filing_verdict.title if s.filing_verdict else "",
        )

    # -- how the issue stands --------------------------------------------------------------------

    async def poll(self) -> bool:
        """Refresh the issue's state; True when something changed."""
        s = self.watch
        if s.issue_number is None or not s.repo:
            return False
        inp = AlertIssueStatusInput(repo=s.repo, number=s.issue_number)
        st = await self._act(ALERT_ISSUE_STATUS, inp, "read the issue's status")
        if st is None:
            return False
        before = (s.phase, s.issue_workflow)
        s.issue_workflow = st.workflow + (f" ({st.outcome_state})" if st.outcome_state else "")
        now = workflow.now()
        if st.state == "closed":
            s.closed_seen_at = s.closed_seen_at or now.timestamp()
            grace_over = now.timestamp() - s.closed_seen_at >= self.inp.close_grace_seconds
            if st.workflow != "running" or grace_over:
                s.issue_closed_at = st.closed_at or now
                s.closed_reason = st.state_reason or "completed"
                s.watch_until = s.issue_closed_at + timedelta(seconds=self.inp.refire_window_seconds)
                s.reopen_pending = False
                self.set_phase("watching")
        elif s.starts_done >= s.starts_wanted and s.phase != "reopened":
            s.closed_seen_at = None
            self.set_phase("fixing" if st.workflow == "running" else "filed")
        return (s.phase, s.issue_workflow) != before

    # -- plumbing --------------------------------------------------------------------------------

    async def _act(
        self, activity: ActivityEntry[In, Out], arg: In, what: str, *, retry: RetryPolicy | None = None
    ) -> Out | None:
        """The activity's result, or None when it failed (`last_error` says why; a later tick tries again)."""
        try:
            out = await call(activity, arg, summary=f"alert: {what}", retry=retry)
        except ActivityError as exc:
            cause = getattr(exc.cause, "message", None) or str(exc.cause or exc)
            self.watch.last_error = f"{what}: {cause}"[:300]
            return None
        self.watch.last_error = ""
        return out

    def set_phase(self, phase: str) -> None:
        if self.watch.phase != phase:
            self.watch.phase = phase  # type: ignore[assignment]
            workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set(phase)])

    @property
    def wf_id(self) -> str:
        return workflow.info().workflow_id


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds:g} s"
