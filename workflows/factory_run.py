"""An issue's pipeline: triage → policy gate → fix → PR → CI → review ⇄ fix
(bounded rounds) → merge stage, run by IssueWorkflow beside its event inbox. A merge starts the
MergeVerifyWorkflow that follows CI on the default branch (workflows/merge_verify.py).

The inbox keeps handling events while this runs (an asyncio task in the same workflow); events
reach the pipeline through `on_event` (CI results wake the CI wait, accepted commands and writers'
APPROVED reviews are recorded) and the pipeline waits on conditions over what they recorded.

People's feedback (workflows/feedback.py: a writer's changes_requested review, a writer's line
comment on the run's pull request, `/shopfloor fix <instructions>`) is quoted in the next goal:
the triage's and the first fix's when it came before, else it starts a fix round while the run
waits for CI, for approval, or parked (rounds ran out, a merge refused for protected paths),
after the line comments of one review are gathered; it waits for the next round while one runs.
A round a writer asked for runs even after the rounds ran out: each counts as a round the
maintainer granted.
Every way out ends with an explicit final state in the progress comment: merged, salvaged
(limits hit with work to keep: pushed, draft PR), failed (why), cancelled (issue closed,
`/shopfloor stop`), or parked (waiting for a human, and for what — resumed by the command named).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.github_text import safe_login
    from shopfloor.agents.outputs import FixResult, ReviewResult, TriageResult
    from shopfloor.agents.policy import within_operator_bounds
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import AgentResult, WorkspaceRef
    from shopfloor.models.factory_run import FactoryState, GoalInput, GoalKind, PipelineResult, RepoInfoInput
    from shopfloor.models.github_ops import IssueRef, LabelsInput
    from shopfloor.models.github_reads import PolicyInput, SimilarIssuesInput, SimilarIssuesOutput
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.search_attributes import SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import (
        FACTORY_CONFIG,
        FACTORY_REPO_INFO,
        GITHUB_ADD_LABELS,
        GITHUB_GET_ISSUE,
        GITHUB_LOAD_POLICY,
        GITHUB_SIMILAR_ISSUES,
        call,
        failure_message,
    )
    from shopfloor.workflows.admission import Admission
    from shopfloor.workflows.commands import WRITE_LEVELS
    from shopfloor.workflows.factory_agents import (
        goal_images,
        open_pr,
        post_review,
        push,
        render_goal,
        required_test_command,
        run_agent,
    )
    from shopfloor.workflows.feedback import PeopleFeedback
    from shopfloor.workflows.inbox import CI_EVENTS
    from shopfloor.workflows.issue_text import EDITED_REASON, IssueTextWatch
    from shopfloor.workflows.merge_stage import approved_head, update_and_merge, wait_approval, wait_ci
    from shopfloor.workflows.merge_verify import start_merge_verify
    from shopfloor.workflows.pipeline import (
        BaseConflicts,
        BaseMergedIn,
        Final,
        Merged,
        MergeRefused,
        OnPipeline,
        PipelineContext,
        ProtectedPathsChanged,
        Step,
    )
    from shopfloor.workflows.progress import ProgressComment
    from shopfloor.workflows.repo_profile import REPO_PROFILE_PATCH, WORKSPACE_SETUP_PATCH, read_profile
    from shopfloor.workflows.workspace_setup import prepare_environment

if TYPE_CHECKING:
    from shopfloor.workflows.issue import IssueWorkflow

NOT_FIXABLE_KINDS = {"question", "duplicate", "invalid"}
NO_MODEL_REASON = (
    "not triaged: no real model is configured (SHOPFLOOR_MODEL), so nobody read this issue; set one where the "
    "worker runs (openai:<model> with OPENAI_API_KEY, or anthropic:<model> with ANTHROPIC_API_KEY) and restart it"
)
MAX_TRIAGES_PER_START = 3  # triage again when the text changed under it, this often, then park


@dataclass
class Work:
    """What the fix ⇄ review loop carries from one step to the next."""

    triage: TriageResult
    workspace: WorkspaceRef  # the base, then the fix agent's (or the base update's) workspace
    fix: FixResult | None = None  # the last fix the agent submitted
    fix_context: dict[str, Any] = field(default_factory=dict)  # for the next fix goal: why again


class FactoryRun(OnPipeline):
    """An issue's pipeline, run as a task beside the IssueWorkflow's inbox."""

    def __init__(self, issue_workflow: IssueWorkflow) -> None:
        self.issue_workflow = issue_workflow
        self.repo, self.number = issue_workflow.repo, issue_workflow.number
        state = FactoryState()
        progress = ProgressComment(
            workflow.info().workflow_id, issue_workflow.repo, issue_workflow.number, state, issue_workflow.publish
        )
        self.admission = Admission(self.repo)
        self.ctx = PipelineContext(
            repo=self.repo, number=self.number, state=state, progress=progress, admission=self.admission
        )
        self.commands: list[str] = []  # accepted /shopfloor commands, in order
        self.extra_rounds = 0  # granted by a maintainer after the rounds ran out
        self.trigger_labeled = False  # someone added the policy's trigger label (auto_fix: label)
        self.labeled_by: str | None = None  # who added it
        self.text = IssueTextWatch(self)  # the issue text the agents work from (read from GitHub)
        self.triages = 0
        self.base_ws = WorkspaceRef(repo=self.repo)
        self.feedback = PeopleFeedback(issue_workflow, state)
        self.refused_for_paths = False  # the last refused merge was for protected paths

    # -- what the inbox tells us ---------------------------------------------------------------

    def busy(self) -> bool:
        return self.state.started and self.state.result == ""

    async def on_event(self, e: RepoEvent, note: str) -> None:
        state = self.state
        if e.event in CI_EVENTS:
            self.ctx.ci_events += 1
        elif e.command is not None and note.endswith(" accepted"):
            if e.command.name == "fix" and e.command.args:  # before the name: a resumed park reads both
                await self.feedback.on_instructions(e)
            self.commands.append(e.command.name)
            if e.command.name == "approve":
                head = await approved_head(self.ctx, e)  # None: refused with a reply
                if head and head not in state.approved_heads:
                    state.approved_heads.append(head)
        elif e.event == "pull_request_review" and (e.state or "").lower() == "approved" and e.head_sha:
            if (
                e.number == state.pr_number
                and e.head_sha not in state.approved_heads
                and await self.issue_workflow.permission_of(e.sender) in WRITE_LEVELS
            ):
                state.approved_heads.append(e.head_sha)
        elif e.event == "pull_request_review" and (e.state or "").lower() == "changes_requested":
            await self.feedback.on_review(e)
        elif e.event == "pull_request_review_comment" and e.action == "created":
            await self.feedback.on_line_comment(e)
        elif e.event == "issues" and e.action == "labeled" and e.label == self.policy.labels.trigger:
            self.trigger_labeled = True  # the label the gate looks for, added after it looked
            self.labeled_by = e.sender
        elif e.event == "issues" and e.action == "edited":
            await self.text.on_edited(e)  # after work started: confirm on GitHub, warn at once

    # -- the run -------------------------------------------------------------------------------

    async def run_when_triggered(self) -> None:
        inbox = self.issue_workflow.carry  # what the inbox keeps: trigger text, commands, its state
        try:
            await workflow.wait_condition(lambda: inbox.trigger_text is not None)
            self.ctx.config = await call(FACTORY_CONFIG, None, summary="factory settings")
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not is_cancelled_exception(exc):
                raise
            return  # the inbox ended before anything asked for work
        if not self.config.pipeline:
            return  # this deployment runs issue workflows as inboxes only
        self.state.started = True
        try:
            await self._pipeline()
        except asyncio.CancelledError:
            await self.finish_cancelled()
        except Final as f:
            if f.result == "failed" and inbox.state in ("stopped", "closed"):
                # Its agent run ended "cancelled" (with its checkpoint) before the cancel reached this task.
                await self.finish_cancelled()
            else:
                await self._final(f.result, f.reason, f.waiting_for)
        except (ActivityError, ChildWorkflowError, ApplicationError, ValidationError) as exc:
            if is_cancelled_exception(exc):  # cancelled while an activity or child ran
                await self.finish_cancelled()
            else:
                await self._final("failed", failure_message(exc))
        await self.admission.report(self.state.cost_usd, final=True)  # its slot in the ledger is free
        if inbox.state == "received" and self.state.result != "parked":
            inbox.state = "done"

    async def finish_cancelled(self) -> None:
        """The final "cancelled" state: the issue closed, `/shopfloor stop`, or the inbox idled out."""
        inbox = self.issue_workflow.carry
        closed_by = {"closed": "the issue was closed", "stopped": f"stopped by @{inbox.stopped_by}"}
        why = closed_by.get(inbox.state, inbox.state)
        if self.state.result == "parked":  # e.g. a person merged the PR a refused merge left: not waiting any more
            why = f"{why} while the run was parked ({self.state.reason})"
        await self._final("cancelled", why)

    async def _pipeline(self) -> None:
        ctx, wid = self.ctx, workflow.info().workflow_id
        self.text.enable()
        info = await call(FACTORY_REPO_INFO, RepoInfoInput(repo=self.repo), summary=f"repository {self.repo}")
        ctx.progress.links(
            workflow_url=ctx.config.workflow_url(wid),
            issue_url=f"{info.html_url}/issues/{self.number}" if info.html_url else None,
        )
        while True:
            load = await call(GITHUB_LOAD_POLICY, PolicyInput(repo=self.repo), summary=f"policy of {self.repo}")
            load = within_operator_bounds(load, ctx.config.repo_models)
            ctx.progress.view.problems = list(load.errors)  # each one on the comment, whole
            if load.ok:
                break
            await self.park("policy", "; ".join(load.errors), ("retry", "fix"))
        ctx.policy, ctx.base_branch = load.policy, load.ref or info.default_branch
        await self.admission.admit(ctx.config, ctx.policy, ctx.progress)  # a budget or a queue may hold it here
        base_sha = load.commit or info.head_sha
        if base_sha is None:
            raise Final("failed", f"{self.repo} has no commits on {ctx.base_branch}")
        self.base_ws = WorkspaceRef(repo=self.repo, clone_url=info.clone_url, base_sha=base_sha)
        if workflow.patched(REPO_PROFILE_PATCH):
            # Read at the policy's commit on the default branch, before any agent starts.
            ctx.profile = await read_profile(ctx, self.base_ws)
        if workflow.patched(WORKSPACE_SETUP_PATCH):
            self.base_ws = await prepare_environment(ctx, self.base_ws)  # every agent works in it
        if info.html_url:
            ctx.progress.links(branch_url=f"{info.html_url}/tree/shopfloor/issue-{self.number}")
        if self.text.enabled:
            self.text.triage_reads(await self.text.read("triage"))
        triage = await self._triage()
        await self._gate(triage)
        if self.text.enabled:
            triage = await self._start_work(triage)
        work, step = Work(triage=triage, workspace=self.base_ws), Step.FIX
        while True:
            try:
                await self._fix_review_loop(work, step)
            except Final as f:
                # A merge refused for protected paths parks the run with its pull request open:
                # feedback resumes it.
                if f.result != "parked" or not self.refused_for_paths or not self.feedback.enabled():
                    raise
                await self._final(f.result, f.reason, f.waiting_for)
                await workflow.wait_condition(self.feedback.ready)
                self.state.result, self.state.reason = "", ""
                step = await self._feedback_round(work)

    async def _start_work(self, triage: TriageResult) -> TriageResult:
        """Read the text work starts from, now that a maintainer (or the policy) started it; when it
        is not what triage read, triage it (and pass the gate) again, so the fix agent gets nothing
        derived from other text."""
        tries = 0
        while True:
            started_by, link = self.text.cause(self.labeled_by)
            work_text = await self.text.read(started_by, link)
            if self.text.triaged is not None and work_text.text.digest == self.text.triaged.text.digest:
                self.text.start_work(work_text)
                return triage
            tries += 1
            if tries > MAX_TRIAGES_PER_START:
                await self.park("fix_command", "the issue's text kept changing while triage read it", ("fix",))
                tries = 0
                continue
            self.text.triage_reads(work_text)
            triage = await self._triage()
            await self._gate(triage)

    async def _triage(self) -> TriageResult:
        ctx, state = self.ctx, self.state
        self.triages += 1
        ctx.progress.stage("triage", "triage")
        await ctx.progress.show("running")
        similar = SimilarIssuesOutput()
        read = self.text.for_agent("triage")
        title = (read.title if read else None) if self.text.enabled else self.issue_workflow.carry.trigger_title
        if title:
            similar = await call(
                GITHUB_SIMILAR_ISSUES,
                SimilarIssuesInput(repo=self.repo, number=self.number, title=title),
                summary=f"issues similar to #{self.number}",
            )
        goal = await render_goal(
            self._goal_input("triage", similar=[i.model_dump() for i in similar.issues], feedback=self.feedback.asked())
        )
        suffix = "triage" if self.triages == 1 else f"triage-{self.triages}"
        res = await run_agent(ctx, "triage", suffix, "triage", goal, self.base_ws, self.triages)
        triage = TriageResult.model_validate(self._output(res, "triage"))
        state.kind, state.fixability = triage.kind, triage.fixability
        labels = list(dict.fromkeys(triage.labels))
        if labels:
            out = await call(
                GITHUB_ADD_LABELS,
                LabelsInput(repo=self.repo, issue_number=self.number, labels=labels),
                summary=f"label #{self.number}: {', '.join(labels)}",
            )
            state.labels = out.labels
        ctx.progress.outcome(f"{triage.kind}, {triage.severity}, fixability {triage.fixability:.2f}")
        return triage

    async def _gate(self, triage: TriageResult) -> None:
        policy = self.policy
        self.progress.stage("policy")
        reasons, no_label = [], ""
        if self.ctx.config.triage_has_no_model:
            reasons.append(NO_MODEL_REASON)
        elif triage.kind in NOT_FIXABLE_KINDS:
            reasons.append(f"triaged as {triage.kind}" + (f" of #{triage.duplicate_of}" if triage.duplicate_of else ""))
        if policy.auto_fix == "never":
            reasons.append("the repository's policy is auto_fix: never")
        elif policy.auto_fix == "label":
            issue = await call(
                GITHUB_GET_ISSUE, IssueRef(repo=self.repo, number=self.number), summary=f"labels of #{self.number}"
            )
            if policy.labels.trigger not in issue.labels and not self.trigger_labeled:
                no_label = f"auto_fix is label and the issue has no `{policy.labels.trigger}` label"
                reasons.append(no_label)
        if triage.fixability < policy.fixability_threshold and not self.ctx.config.triage_has_no_model:
            reasons.append(
                f"fixability {triage.fixability:.2f} is below the threshold {policy.fixability_threshold:.2f}"
            )
        if reasons and "fix" not in self.commands:
            # Only the label missing: adding it later resumes the run, as it would have passed the gate.
            labeled = (lambda: self.trigger_labeled) if reasons == [no_label] else None
            await self.park("fix_command", "; ".join(reasons), ("fix",), or_when=labeled)
        by_label = reasons == [no_label] and self.trigger_labeled and "fix" not in self.commands
        asked = "the trigger label was added" if by_label else "asked by a maintainer"
        self.progress.outcome("fix: " + (asked if reasons else "within policy"))

    # -- fix ⇄ review ----------------------------------------------------------------------------

    async def _fix_review_loop(self, work: Work, step: Step = Step.FIX) -> None:
        """Fix, push, CI, review, merge, each step naming the next, until one ends the run (Final)."""
        while True:
            await self._unpaused()
            if self.text.edited is not None and await self.text.changed_on_github():
                # Edited after work started: whatever comes next was made for the old text.
                await self.park("fix_command", EDITED_REASON, ("fix",))
                work.triage, work.fix_context, step = await self._start_work(work.triage), {}, Step.FIX
            match step:
                case Step.FIX:
                    step = await self._fix(work)
                case Step.PUSH:
                    step = await self._push(work)
                case Step.CI:
                    step = await self._ci(work)
                case Step.REVIEW:
                    step = await self._review(work)
                case Step.MERGE:
                    step = await self._merge(work)

    async def _fix(self, work: Work) -> Step:
        state, policy = self.state, self.policy
        if self.feedback.ready():  # feedback that came while the last round ran: this round takes it
            work.fix_context = {
                **work.fix_context,
                "feedback": [*work.fix_context.get("feedback", []), *self.feedback.take()],
            }
        if state.fix_round >= policy.max_review_rounds + 1 + self.extra_rounds:
            if not work.fix_context.get("feedback"):
                await self.park(
                    "fix_command",
                    f"{state.fix_round} fix rounds did not get the change through",
                    or_when=self.feedback.ready,
                )
                if self.feedback.ready():
                    await self.feedback.gathered()
                    work.fix_context = {**work.fix_context, "feedback": self.feedback.take()}
            self.extra_rounds += 1  # granted by a maintainer: a fix command, or their feedback
        state.fix_round += 1
        command = required_test_command(self.ctx)
        goal = await render_goal(
            self._goal_input(
                "fix", triage=work.triage.model_dump(), round=state.fix_round, test_command=command, **work.fix_context
            )
        )
        res = await run_agent(
            self.ctx, "fix", f"fix-{state.fix_round}", "fix", goal, work.workspace, state.fix_round, command
        )
        if res.state in ("limit_reached", "stuck"):
            await self._salvage(res, work.fix)
        fix = FixResult.model_validate(self._output(res, f"fix round {state.fix_round}"))
        work.fix = fix
        if res.workspace is None or not res.workspace.patch_digest:
            raise Final("failed", "the fix agent changed nothing: " + (fix.remaining_work or fix.summary))
        work.workspace, work.fix_context = res.workspace, {}
        return Step.PUSH

    async def _push(self, work: Work) -> Step:
        if work.fix is None:
            raise ApplicationError(
                "pushing before the fix agent submitted a result",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        await push(self.ctx, work.workspace, work.fix.pr_title)
        if self.state.pr_number is None:
            await open_pr(self.ctx, work.fix)
        return Step.CI

    async def _ci(self, work: Work) -> Step:
        head = self.state.head_sha or ""
        edited = (lambda: self.text.edited is not None) if self.text.enabled else None
        outcome = await wait_ci(self.ctx, head, until=lambda: bool(edited and edited()) or self.feedback.ready())
        match outcome:
            case "moved":
                if self.feedback.ready() and not (edited and edited()):
                    return await self._feedback_round(work)
                return Step.CI  # the issue was edited: the loop parks
            case "timeout":
                # What resumes the run is a command, not CI itself: the comment must name it.
                # Only a retry: a fix round would not make CI report on this head.
                minutes = self.policy.ci_timeout_minutes
                await self.park("retry", f"no CI result for {head[:12]} within {minutes} minutes", ("retry",))
                return Step.CI
            case "failure":
                work.fix_context = {"ci_failed_sha": head}
                return Step.FIX
            case _:
                work.fix_context = {}
                return Step.REVIEW

    async def _review(self, work: Work) -> Step:
        ctx, state = self.ctx, self.state
        state.review_round += 1
        goal = await render_goal(
            self._goal_input(
                "review",
                triage=work.triage.model_dump(),
                round=state.review_round,
                patch_digest=work.workspace.patch_digest,
                pr_number=state.pr_number,
                ci_summary=f"CI passed on {(state.head_sha or '')[:12]}.",
            )
        )
        res = await run_agent(
            ctx, "review", f"review-{state.review_round}", "review", goal, work.workspace, state.review_round
        )
        review = ReviewResult.model_validate(self._output(res, f"review round {state.review_round}"))
        await post_review(ctx, review, state.head_sha or "")
        state.verdict, state.verdict_head = review.verdict, state.head_sha
        ctx.progress.outcome(f"verdict: {review.verdict}")
        if review.verdict != "request_changes":
            return Step.MERGE
        if state.review_round >= self.policy.max_review_rounds + self.extra_rounds:
            await self.park(
                "fix_command",
                f"the review still requests changes after {state.review_round} rounds",
                or_when=self.feedback.ready,
            )
            self.extra_rounds += 1
        work.fix_context = {"review": review.model_dump()}
        return Step.FIX

    async def _merge(self, work: Work) -> Step:
        state, fix = self.state, work.fix
        if fix is None or not state.head_sha:
            raise ApplicationError(
                "merging before the fix agent submitted a result and pushed a head commit",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        head = state.head_sha
        if not await self._unless_edited(wait_approval(self.ctx, head, force=state.verdict != "approve")):
            if self.feedback.ready() and self.text.edited is None:
                return await self._feedback_round(work)
            return Step.MERGE  # the issue was edited while the run waited: the loop parks
        await self._unpaused()  # paused while waiting for the approval: hold the merge too
        if await self.text.changed_on_github():
            return Step.MERGE  # never merge work done for other text, whatever the events said
        message = f"{fix.summary}\n\nFixes #{self.number}"
        match await update_and_merge(self.ctx, work.workspace, head, fix.pr_title, message):
            case Merged(sha):
                await start_merge_verify(self.ctx, sha, work.workspace.clone_url or "")  # CI on the default branch
                raise Final("merged", f"merged as {state.merged_sha}")
            case ProtectedPathsChanged(reason) | MergeRefused(reason) as refused:
                # A fix round can take protected files out of the change; it cannot push over a
                # branch someone else moved, so only the first kind of refusal waits for feedback.
                self.refused_for_paths = isinstance(refused, ProtectedPathsChanged)
                raise Final(
                    "parked",
                    f"the merge was refused: {reason}",
                    waiting_for="a maintainer to merge or close the pull request",
                )
            case BaseConflicts(workspace, files):
                work.workspace, work.fix_context = workspace, {"conflicts": files}
                return Step.FIX
            case BaseMergedIn(workspace):
                work.workspace, work.fix_context = workspace, {}
                return Step.PUSH

    async def _salvage(self, res: AgentResult, fix: FixResult | None) -> NoReturn:
        ws, why = res.workspace, f"{res.state}: {res.reason or 'no reason given'}"
        if ws is None or not ws.patch_digest:
            raise Final("failed", f"the fix agent stopped ({why}) before changing anything")
        done = FixResult.model_validate(res.output) if res.output else None
        left = (done.remaining_work if done else "") or f"finish the fix; the agent stopped ({why})"
        await push(self.ctx, ws, f"WIP: fix #{self.number}")
        note = (
            f"**Salvaged by shopfloor**: the fix agent stopped before finishing ({why}).\n\n"
            f"Done so far: {res.steps} steps; this branch holds every edit made.\n\nLeft to do: {left}"
        )
        await open_pr(self.ctx, fix, draft=True, salvage_note=note)
        raise Final("salvaged", left)

    async def _feedback_round(self, work: Work) -> Step:
        """A fix round for the feedback people gave while the run waited (a review's line comments
        gathered first: one review, one round)."""
        await self.feedback.gathered()
        self.state.feedback_rounds += 1
        who = ", ".join(dict.fromkeys(f"@{safe_login(i.author)}" for i in self.state.feedback))
        self.progress.outcome(f"feedback from {who}: another fix round")
        work.fix_context = {"feedback": self.feedback.take()}
        return Step.FIX

    # -- helpers ---------------------------------------------------------------------------------

    def _goal_input(self, kind: GoalKind, **fields: Any) -> GoalInput:
        inbox = self.issue_workflow.carry
        if self.text.enabled:  # the text read from GitHub when this stage's work started
            read = self.text.for_agent(kind)
            digest, title = (read.text.digest, read.title) if read else (None, None)
        else:
            digest, title = (inbox.trigger_text.digest if inbox.trigger_text else None), inbox.trigger_title
        return GoalInput(
            kind=kind,
            repo=self.repo,
            number=self.number,
            issue_digest=digest,
            title=title,
            base_branch=self.ctx.base_branch,
            images=goal_images(),
            **fields,
        )

    async def _unless_edited(self, wait: Coroutine[Any, Any, Any]) -> bool:
        """Run `wait` (for people); False, with `wait` cancelled, as soon as an edit of the issue
        after work started is confirmed (the run must park instead of asking for more) or people's
        feedback came (a fix round takes it)."""
        if not self.text.enabled:
            await wait
            return True
        task = asyncio.ensure_future(wait)
        # Never cancel a progress upsert half-way: its failure is swallowed, so the cancel would be too.
        await workflow.wait_condition(
            lambda: (
                task.done()
                or ((self.text.edited is not None or self.feedback.ready()) and not self.progress.updating())
            )
        )
        if task.done():
            task.result()
            return True
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not is_cancelled_exception(exc):
                raise
        return False

    def _output(self, res: AgentResult, what: str) -> dict[str, Any]:
        if res.state != "completed" or res.output is None:
            raise Final("failed", f"{what} ended {res.state}: {res.reason or 'no result submitted'}")
        return res.output

    async def _unpaused(self) -> None:
        inbox = self.issue_workflow.carry
        if inbox.paused:
            await self.progress.show("waiting", waiting_for="resume")
            await workflow.wait_condition(lambda: not inbox.paused)

    async def park(
        self,
        waiting_for: str,
        reason: str,
        resume_on: Iterable[str] = ("fix", "retry"),
        or_when: Callable[[], bool] | None = None,
    ) -> None:
        """Wait for a human: the comment says for what; a writer's command in `resume_on` resumes
        (as does `or_when()` turning true)."""
        state, wanted, mark = self.state, set(resume_on), len(self.commands)
        state.result, state.reason = "parked", reason
        self.progress.stage("parked")
        await self._label(self.policy.labels.needs_human)
        await self.progress.show("parked", waiting_for=waiting_for, reason=reason)
        await self.admission.step_aside()  # waiting for a person holds no slot in the ledger
        await workflow.wait_condition(
            lambda: any(n in wanted for n in self.commands[mark:]) or bool(or_when and or_when())
        )
        state.result, state.reason = "", ""
        self.progress.outcome("resumed by a maintainer")
        await self.admission.rejoin(self.progress)

    async def _final(self, result: PipelineResult, reason: str, waiting_for: str | None = None) -> None:
        state = self.state
        state.result, state.reason = result, reason
        if result in ("merged", "salvaged"):
            self.progress.stage("done")
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set("parked" if result == "parked" else "done")])
        if result == "merged":
            await self._label(self.policy.labels.fixed)
        await self.progress.show(result, waiting_for=waiting_for, reason=None if result == "merged" else reason)

    async def _label(self, name: str | None) -> None:
        if not name:
            return
        try:
            await call(
                GITHUB_ADD_LABELS,
                LabelsInput(repo=self.repo, issue_number=self.number, labels=[name]),
                summary=f"label #{self.number}: {name}",
            )
        except ActivityError as exc:
            workflow.logger.warning("label %s not added: %s", name, exc)
