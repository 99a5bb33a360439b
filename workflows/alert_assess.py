"""The AlertWorkflow's assessing agent: whether an alert the rules find actionable
really is, decided by `assess_alert` (read-only tools on the routed repository, the alert's
details as quoted data) as the child AgentWorkflow `<alert workflow id>/assess-<n>`.

Its verdict stands for `reassess_seconds` (an hour): firings meanwhile reuse it instead of
spending a model call each. When the agent cannot decide (it fails, hits a limit, the model is
unreachable, GitHub cannot be read) the caller keeps the rules' decision: an alert is never lost
because the model is down. The verdict the issue was filed on is posted on it, the model's words
fenced (they derive from the alert's untrusted text).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from shopfloor.agents.registry import get_agent
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import AgentInput, AgentResult, Limits, Timeouts, WorkspaceRef
    from shopfloor.models.alert_issue import AlertAssessment, AlertGoalInput, AlertRunInput, AlertWatch
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.factory_run import RepoInfoInput
    from shopfloor.models.inbox import Alert
    from shopfloor.workflows.activity_catalogue import (
        ALERT_GOAL,
        FACTORY_CONFIG,
        FACTORY_REPO_INFO,
        SHORT_RETRY,
        failure_message,
    )
    from shopfloor.workflows.admission import Admission
    from shopfloor.workflows.factory_agents import UNPRICED_TOKEN_CAP_PATCH
    from shopfloor.workflows.late_cancel import unless_cancelled

ASSESS_AGENT = "alert-assess-agent"  # workflow.patched: runs recorded before the agent decide by the rules
ASSESSOR = "assess_alert"
# The assessing agent winds down (limit_reached) after ASSESS_WALL; Temporal ends it at
# ASSESS_TIMEOUT whatever it waits on (a hung model): either way the rules' decision files the issue.
ASSESS_WALL = timedelta(minutes=15)
ASSESS_TIMEOUT = timedelta(minutes=20)


def when_text(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def _fenced(text: str) -> str:
    """`text` in a fenced block no line of it can close: mentions and markdown stay inert."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def assessment_comment(v: AlertAssessment, child_id: str) -> str:
    """The verdict the issue was filed on, as a comment (the model's words fenced: they derive
    from the alert's untrusted text)."""
    parts = [
        f"**shopfloor's assessment of this alert:** actionable, severity **{v.severity}** (agent `{ASSESSOR}`, "
        + f"run `{child_id}`).",
        "",
        "**Why**",
        "",
        _fenced(v.reason.strip() or "(none given)"),
    ]
    if v.suspected_area.strip():
        parts += ["", "**Suspected area**", "", _fenced(v.suspected_area.strip())]
    parts += ["", "**Proposed title**", "", _fenced(v.title.strip())]
    parts += ["", "This is a first look at the code from the alert alone; the issue's triage judges the bug."]
    return "\n".join(parts)


def _verdict_text(v: AlertAssessment) -> str:
    word = "actionable" if v.actionable else "not actionable"
    return f"{word}, severity {v.severity}: {v.reason}"


class AlertAssessing:
    """The assessing part of AlertIssueFlow (`_act` and `publish` are the flow's)."""

    watch: AlertWatch
    inp: AlertRunInput
    publish: Callable[[], None]  # AlertWorkflow's: the run's current details
    _act: Callable[..., Awaitable[Any]]  # AlertIssueFlow's: an activity, None when it failed
    _config: FactoryConfig | None = None  # fetched once per run, when the agent first runs
    admission: Admission | None = None  # the assessment under way's place in the spend ledger

    async def _ask_agent(self, a: Alert, rules: str) -> tuple[bool, str, AlertAssessment | None]:
        """(actionable, why, verdict) by the assessing agent; the rules' (actionable) when it cannot say."""
        s, now = self.watch, workflow.now()
        v, at, every = s.verdict, s.assessed_at, self.inp.reassess_seconds
        if v is not None and at is not None and (now - at).total_seconds() < every:
            again = when_text(at + timedelta(seconds=every))
            return v.actionable, f"{_verdict_text(v)} (agent, {when_text(at)}; assessed again after {again})", v
        s.assessments += 1
        child_id = f"{workflow.info().workflow_id}/assess-{s.assessments}"
        s.assessment = f"the agent assesses it ({child_id}); the rules say: {rules}"
        self.publish()
        v, failure = await self._run_assessor(a, child_id)
        if v is None:
            return True, f"the assessing agent could not decide ({failure}); filed by the rules: {rules}"[:1000], None
        s.verdict, s.verdict_run, s.assessed_at = v, child_id, workflow.now()
        return v.actionable, f"{_verdict_text(v)} (agent {child_id})", v

    async def _run_assessor(self, a: Alert, child_id: str) -> tuple[AlertAssessment | None, str]:
        s = self.watch
        if not s.repo:
            raise ApplicationError(
                "assessing the alert before its repository was routed",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        if self._config is None:
            # The assessing agent's setup retries briefly (SHORT_RETRY): when it fails, the rules decide.
            self._config = await self._act(FACTORY_CONFIG, None, "factory settings", retry=SHORT_RETRY)
            if self._config is None:
                return None, s.last_error
        info = await self._act(FACTORY_REPO_INFO, RepoInfoInput(repo=s.repo), f"repository {s.repo}", retry=SHORT_RETRY)
        if info is None:
            return None, s.last_error
        if not info.head_sha or not info.clone_url:
            return None, f"{s.repo} has no commit to read on {info.default_branch}"
        goal = await self._act(ALERT_GOAL, self._goal_input(a), "the assessing agent's goal")
        if goal is None:
            return None, s.last_error
        config, model = self._config, self._config.model_for(ASSESSOR)
        tokens = None
        if not config.is_priced(model) and workflow.patched(UNPRICED_TOKEN_CAP_PATCH):
            tokens = config.unpriced_token_cap(None)  # an alert's repository file sets no budgets
            if tokens is None:
                return None, config.no_token_limit(model, repo_may_set=False)
        # An assessment is a run in the spend ledger; held back, it is not waited for: the rules decide.
        self.admission = Admission(s.repo, f"assess-{s.assessments}")
        held = await self.admission.try_admit(config)
        if held:
            return None, f"the spend ledger holds the assessment back: {held}"[:300]
        try:
            result = await self._assessor_run(child_id, model, goal.goal, info.clone_url, info.head_sha, tokens)
        except (ChildWorkflowError, WorkflowAlreadyStartedError) as exc:
            await self.admission.report(0.0, final=True)
            return None, f"{child_id}: {failure_message(exc)}"[:300]
        await self.admission.report(result.cost_usd, final=True)
        s.assess_cost_usd += result.cost_usd
        if result.state != "completed" or result.output is None:
            return None, f"{child_id} ended {result.state}: {result.reason or 'no result submitted'}"[:300]
        try:
            return AlertAssessment.model_validate(result.output), ""
        except ValidationError as exc:
            return None, f"{child_id} submitted no valid AlertAssessment ({exc.error_count()} errors)"

    async def _assessor_run(
        self, child_id: str, model: str, goal: str, clone_url: str, head_sha: str, tokens: int | None
    ) -> AgentResult:
        s, config = self.watch, self._config
        assert config is not None and s.repo
        result: AgentResult = await unless_cancelled(
            workflow.execute_child_workflow(
                "AgentWorkflow",
                AgentInput(
                    agent=ASSESSOR,
                    model=model,
                    goal=goal,
                    stage="assess",
                    workspace=WorkspaceRef(repo=s.repo, clone_url=clone_url, base_sha=head_sha),
                    limits=Limits(
                        max_steps=get_agent(ASSESSOR).limits.max_steps,
                        max_wall_s=ASSESS_WALL.total_seconds(),
                        max_tokens=tokens,
                    ),
                    timeouts=Timeouts(model_heartbeat_s=config.model_heartbeat_s),
                ),
                id=child_id,
                result_type=AgentResult,
                execution_timeout=ASSESS_TIMEOUT,
                static_summary=f"{ASSESSOR} for alert {s.source}/{s.fingerprint} on {s.repo} with {model}"[:200],
            )
        )
        return result

    def _goal_input(self, a: Alert) -> AlertGoalInput:
        s = self.watch
        if not s.repo:
            raise ApplicationError(
                "writing the assessing agent's goal before the alert's repository was routed",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        return AlertGoalInput(
            repo=s.repo,
            source=s.source,
            fingerprint=s.fingerprint,
            status=a.status,
            summary=a.summary or s.summary,
            description=a.description,
            labels=a.labels,
            links=a.links,
            occurrences=max(s.occurrences, 1),
            notifications=max(s.notifications, 1),
            first_seen=s.first_seen,
            last_seen=s.last_seen,
        )
