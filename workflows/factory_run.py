"""An issue's pipeline: triage → policy gate → fix → PR → CI → review ⇄ fix
(bounded rounds) → merge stage, run by IssueWorkflow beside its event inbox.

The inbox keeps handling events while this runs (an asyncio task in the same workflow); events
reach the pipeline through `on_event` (CI results wake the CI wait, accepted commands and writers'
APPROVED reviews are recorded) and the pipeline waits on conditions over what they recorded.
Every way out ends with an explicit final state in the progress comment: merged, salvaged
(limits hit with work to keep: pushed, draft PR), failed (why), cancelled (issue closed,
`/shopfloor stop`), or parked (waiting for a human, and for what — resumed by the command named).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.outputs import FixResult, ReviewResult, TriageResult
    from shopfloor.agents.policy import PolicyLoad, RepoPolicy
    from shopfloor.models.agent_run import AgentResult, WorkspaceRef
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.factory_run import FactoryState, GoalInput, RepoInfo, RepoInfoInput
    from shopfloor.models.github_ops import IssueOutput, IssueRef, LabelsInput, LabelsOutput
    from shopfloor.models.github_reads import PolicyInput, SimilarIssuesInput, SimilarIssuesOutput
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.search_attributes import SHOPFLOOR_STAGE
    from shopfloor.workflows.commands import WRITE_LEVELS
    from shopfloor.workflows.factory_agents import AgentStages
    from shopfloor.workflows.factory_calls import act, cause
    from shopfloor.workflows.inbox import CI_EVENTS
    from shopfloor.workflows.issue_text import EDITED_REASON, IssueTextWatch
    from shopfloor.workflows.merge_stage import MergeStage
    from shopfloor.workflows.progress import ProgressComment

if TYPE_CHECKING:
    from shopfloor.workflows.issue import IssueWorkflow

NOT_FIXABLE_KINDS = {"question", "duplicate", "invalid"}
MAX_TRIAGES_PER_START = 3  # triage again when the text changed under it, this often, then park


class Final(Exception):
    """Ends the pipeline with this final state (raised inside, caught by `run_when_triggered`)."""

    def __init__(self, result: str, reason: str, waiting_for: str | None = None) -> None:
        super().__init__(reason)
        self.result, self.reason, self.waiting_for = result, reason, waiting_for


class FactoryRun:
    def __init__(self, wf: IssueWorkflow) -> None:
        self.wf, self.repo, self.number = wf, wf.repo, wf.number
        self.s = FactoryState()
        self.progress = ProgressComment(workflow.info().workflow_id, wf.repo, wf.number, self.s, wf.publish)
        self.agents, self.merging = AgentStages(self), MergeStage(self)
        self.ci_events = 0
        self.commands: list[str] = []  # accepted /shopfloor commands, in order
        self.extra_rounds = 0  # granted by a maintainer after the rounds ran out
        self.trigger_labeled = False  # someone added the policy's trigger label (auto_fix: label)
        self.labeled_by: str | None = None  # who added it
        self.text = IssueTextWatch(self)  # the issue text the agents work from (read from GitHub)
        self.triages = 0
        self.config = FactoryConfig()
        self.policy = RepoPolicy()
        self.base_branch = "main"
        self.base_ws = WorkspaceRef(repo=wf.repo)

    # -- what the inbox tells us ---------------------------------------------------------------

    def busy(self) -> bool:
        return self.s.started and self.s.result == ""

    async def on_event(self, e: RepoEvent, note: str) -> None:
        s = self.s
        if e.event in CI_EVENTS:
            self.ci_events += 1
        elif e.command is not None and note.endswith(" accepted"):
            self.commands.append(e.command.name)
            if e.command.name == "approve":
                head = await self.merging.approval(e)  # the head it names; None: refused with a reply
                if head and head not in s.approved_heads:
                    s.approved_heads.append(head)
        elif e.event == "pull_request_review" and (e.state or "").lower() == "approved" and e.head_sha:
            if (
                e.number == s.pr_number
                and e.head_sha not in s.approved_heads
                and await self.wf.permission_of(e.sender) in WRITE_LEVELS
            ):
                s.approved_heads.append(e.head_sha)
        elif e.event == "issues" and e.action == "labeled" and e.label == self.policy.labels.trigger:
            self.trigger_labeled = True  # the label the gate looks for, added after it looked
            self.labeled_by = e.sender
        elif e.event == "issues" and e.action == "edited":
            await self.text.on_edited(e)  # after work started: confirm on GitHub, warn at once

    # -- the run -------------------------------------------------------------------------------

    async def run_when_triggered(self) -> None:
        c = self.wf.c
        try:
            await workflow.wait_condition(lambda: c.trigger_text is not None)
            self.config = await act("factory_config", None, FactoryConfig, "factory settings")
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not is_cancelled_exception(exc):
                raise
            return  # the inbox ended before anything asked for work
        if not self.config.pipeline:
            return  # this deployment runs issue workflows as inboxes only
        self.s.started = True
        try:
            await self._pipeline()
        except asyncio.CancelledError:
            await self.finish_cancelled()
        except Final as f:
            await self._final(f.result, f.reason, f.waiting_for)
        except (ActivityError, ChildWorkflowError, ApplicationError, ValidationError) as exc:
            if is_cancelled_exception(exc):  # cancelled while an activity or child ran
                await self.finish_cancelled()
            else:
                await self._final("failed", cause(exc))
        if c.state == "received" and self.s.result != "parked":
            c.state = "done"

    async def finish_cancelled(self) -> None:
        """The final "cancelled" state: the issue closed, `/shopfloor stop`, or the inbox idled out."""
        c = self.wf.c
        why = {"closed": "the issue was closed", "stopped": f"stopped by @{c.stopped_by}"}.get(c.state, c.state)
        if self.s.result == "parked":  # e.g. a person merged the PR a refused merge left: not waiting any more
            why = f"{why} while the run was parked ({self.s.reason})"
        await self._final("cancelled", why)

    async def _pipeline(self) -> None:
        wid = workflow.info().workflow_id
        self.text.enable()
        info = await act("factory_repo_info", RepoInfoInput(repo=self.repo), RepoInfo, f"repository {self.repo}")
        self.progress.links(
            workflow_url=self.config.workflow_url(wid),
            issue_url=f"{info.html_url}/issues/{self.number}" if info.html_url else None,
        )
        while True:
            load = await act("github_load_policy", PolicyInput(repo=self.repo), PolicyLoad, f"policy of {self.repo}")
            if load.ok:
                break
            await self.park("policy", "; ".join(load.errors), ("retry", "fix"))
        self.policy, self.base_branch = load.policy, load.ref or info.default_branch
        base_sha = load.commit or info.head_sha
        if base_sha is None:
            raise Final("failed", f"{self.repo} has no commits on {self.base_branch}")
        self.base_ws = WorkspaceRef(repo=self.repo, clone_url=info.clone_url, base_sha=base_sha)
        if info.html_url:
            self.progress.links(branch_url=f"{info.html_url}/tree/shopfloor/issue-{self.number}")
        if self.text.enabled:
            self.text.triage_reads(await self.text.read("triage"))
        triage = await self._triage()
        await self._gate(triage)
        if self.text.enabled:
            triage = await self._start_work(triage)
        await self._rounds(triage)

    async def _start_work(self, t: TriageResult) -> TriageResult:
        """Read the text work starts from, now that a maintainer (or the policy) started it; when it
        is not what triage read, triage it (and pass the gate) again, so the fix agent gets nothing
        derived from other text."""
        tries = 0
        while True:
            cause, link = self.text.cause(self.labeled_by)
            work = await self.text.read(cause, link)
            if self.text.triaged is not None and work.text.digest == self.text.triaged.text.digest:
                self.text.start_work(work)
                return t
            tries += 1
            if tries > MAX_TRIAGES_PER_START:
                await self.park("fix_command", "the issue's text kept changing while triage read it", ("fix",))
                tries = 0
                continue
            self.text.triage_reads(work)
            t = await self._triage()
            await self._gate(t)

    async def _triage(self) -> TriageResult:
        c, s = self.wf.c, self.s
        self.triages += 1
        self.progress.stage("triage", "triage")
        await self.progress.show("running")
        similar = SimilarIssuesOutput()
        read = self.text.for_agent("triage")
        title = (read.title if read else None) if self.text.enabled else c.trigger_title
        if title:
            similar = await act(
                "github_similar_issues",
                SimilarIssuesInput(repo=self.repo, number=self.number, title=title),
                SimilarIssuesOutput,
                f"issues similar to #{self.number}",
            )
        goal = await self.agents.goal(self._goal("triage", similar=[i.model_dump() for i in similar.issues]))
        suffix = "triage" if self.triages == 1 else f"triage-{self.triages}"
        res = await self.agents.agent("triage", suffix, "triage", goal, self.base_ws, self.triages)
        t = TriageResult.model_validate(self._output(res, "triage"))
        s.kind, s.fixability = t.kind, t.fixability
        labels = list(dict.fromkeys(t.labels))
        if labels:
            out = await act(
                "github_add_labels",
                LabelsInput(repo=self.repo, issue_number=self.number, labels=labels),
                LabelsOutput,
                f"label #{self.number}: {', '.join(labels)}",
            )
            s.labels = out.labels
        self.progress.outcome(f"{t.kind}, {t.severity}, fixability {t.fixability:.2f}")
        return t

    async def _gate(self, t: TriageResult) -> None:
        p = self.policy
        self.progress.stage("policy")
        reasons, no_label = [], ""
        if t.kind in NOT_FIXABLE_KINDS:
            reasons.append(f"triaged as {t.kind}" + (f" of #{t.duplicate_of}" if t.duplicate_of else ""))
        if p.auto_fix == "never":
            reasons.append("the repository's policy is auto_fix: never")
        elif p.auto_fix == "label":
            issue = await act(
                "github_get_issue",
                IssueRef(repo=self.repo, number=self.number),
                IssueOutput,
                f"labels of #{self.number}",
            )
            if p.labels.trigger not in issue.labels and not self.trigger_labeled:
                no_label = f"auto_fix is label and the issue has no `{p.labels.trigger}` label"
                reasons.append(no_label)
        if t.fixability < p.fixability_threshold:
            reasons.append(f"fixability {t.fixability:.2f} is below the threshold {p.fixability_threshold:.2f}")
        if reasons and "fix" not in self.commands:
            # Only the label missing: adding it later resumes the run, as it would have passed the gate.
            labeled = (lambda: self.trigger_labeled) if reasons == [no_label] else None
            await self.park("fix_command", "; ".join(reasons), ("fix",), or_when=labeled)
        by_label = reasons == [no_label] and self.trigger_labeled and "fix" not in self.commands
        asked = "the trigger label was added" if by_label else "asked by a maintainer"
        self.progress.outcome("fix: " + (asked if reasons else "within policy"))

    async def _rounds(self, t: TriageResult) -> None:
        s, p = self.s, self.policy
        ws, fix, ctx, step = self.base_ws, None, {}, "fix"
        while True:
            await self._unpaused()
            if self.text.edited is not None and await self.text.changed_on_github():
                # Edited after work started: whatever comes next was made for the old text.
                await self.park("fix_command", EDITED_REASON, ("fix",))
                t, ctx, step = await self._start_work(t), {}, "fix"
            if step == "fix":
                if s.fix_round >= p.max_review_rounds + 1 + self.extra_rounds:
                    await self.park("fix_command", f"{s.fix_round} fix rounds did not get the change through")
                    self.extra_rounds += 1
                s.fix_round += 1
                cmd = self.agents.test_command()
                goal = await self.agents.goal(
                    self._goal("fix", triage=t.model_dump(), round=s.fix_round, test_command=cmd, **ctx)
                )
                res = await self.agents.agent("fix", f"fix-{s.fix_round}", "fix", goal, ws, s.fix_round, cmd)
                if res.state in ("limit_reached", "stuck"):
                    return await self._salvage(res, fix)
                fix = FixResult.model_validate(self._output(res, f"fix round {s.fix_round}"))
                if res.workspace is None or not res.workspace.patch_digest:
                    raise Final("failed", "the fix agent changed nothing: " + (fix.remaining_work or fix.summary))
                ws, ctx, step = res.workspace, {}, "push"
            elif step == "push":
                if fix is None:
                    raise ApplicationError(
                        "pushing before the fix agent submitted a result",
                        type="InconsistentWorkflowState",
                        non_retryable=True,
                    )
                await self.agents.push(ws, fix.pr_title)
                if s.pr_number is None:
                    await self.agents.open_pr(fix)
                step = "ci"
            elif step == "ci":
                head = s.head_sha or ""
                edited = (lambda: self.text.edited is not None) if self.text.enabled else None
                outcome = await self.merging.wait_ci(head, until=edited)
                if outcome == "moved":
                    continue  # the issue was edited: the loop parks
                if outcome == "timeout":
                    # What resumes the run is a command, not CI itself: the comment must name it.
                    # Only a retry: a fix round would not make CI report on this head.
                    await self.park(
                        "retry", f"no CI result for {head[:12]} within {p.ci_timeout_minutes} minutes", ("retry",)
                    )
                    continue
                ctx, step = ({"ci_failed_sha": head}, "fix") if outcome == "failure" else ({}, "review")
            elif step == "review":
                review = await self._review(t, ws)
                if review.verdict == "request_changes":
                    if s.review_round >= p.max_review_rounds + self.extra_rounds:
                        await self.park(
                            "fix_command", f"the review still requests changes after {s.review_round} rounds"
                        )
                        self.extra_rounds += 1
                    ctx, step = {"review": review.model_dump()}, "fix"
                else:
                    step = "merge"
            elif step == "merge":
                if fix is None or not s.head_sha:
                    raise ApplicationError(
                        "merging before the fix agent submitted a result and pushed a head commit",
                        type="InconsistentWorkflowState",
                        non_retryable=True,
                    )
                head = s.head_sha
                if not await self._unless_edited(self.merging.wait_approval(head, force=s.verdict != "approve")):
                    continue  # the issue was edited while the run waited: the loop parks
                await self._unpaused()  # paused while waiting for the approval: hold the merge too
                if await self.text.changed_on_github():
                    continue  # never merge work done for other text, whatever the events said
                status, detail = await self.merging.merge(
                    ws, head, fix.pr_title, f"{fix.summary}\n\nFixes #{self.number}"
                )
                if status == "merged":
                    raise Final("merged", f"merged as {s.merged_sha}")
                if status == "blocked":
                    raise Final(
                        "parked",
                        f"the merge was refused: {detail}",
                        waiting_for="a maintainer to merge or close the pull request",
                    )
                ws = detail.workspace
                ctx, step = ({"conflicts": detail.conflicts}, "fix") if status == "conflicts" else ({}, "push")

    async def _review(self, t: TriageResult, ws: WorkspaceRef) -> ReviewResult:
        s = self.s
        s.review_round += 1
        goal = await self.agents.goal(
            self._goal(
                "review",
                triage=t.model_dump(),
                round=s.review_round,
                patch_digest=ws.patch_digest,
                pr_number=s.pr_number,
                ci_summary=f"CI passed on {(s.head_sha or '')[:12]}.",
            )
        )
        res = await self.agents.agent("review", f"review-{s.review_round}", "review", goal, ws, s.review_round)
        review = ReviewResult.model_validate(self._output(res, f"review round {s.review_round}"))
        await self.agents.post_review(review, s.head_sha or "")
        s.verdict, s.verdict_head = review.verdict, s.head_sha
        self.progress.outcome(f"verdict: {review.verdict}")
        return review

    async def _salvage(self, res: AgentResult, fix: FixResult | None) -> None:
        ws, why = res.workspace, f"{res.state}: {res.reason or 'no reason given'}"
        if ws is None or not ws.patch_digest:
            raise Final("failed", f"the fix agent stopped ({why}) before changing anything")
        done = FixResult.model_validate(res.output) if res.output else None
        left = (done.remaining_work if done else "") or f"finish the fix; the agent stopped ({why})"
        await self.agents.push(ws, f"WIP: fix #{self.number}")
        note = (
            f"**Salvaged by shopfloor**: the fix agent stopped before finishing ({why}).\n\n"
            f"Done so far: {res.steps} steps; this branch holds every edit made.\n\nLeft to do: {left}"
        )
        await self.agents.open_pr(fix, draft=True, salvage_note=note)
        raise Final("salvaged", left)

    # -- helpers ---------------------------------------------------------------------------------

    def _goal(self, kind: str, **fields: Any) -> GoalInput:
        c = self.wf.c
        if self.text.enabled:  # the text read from GitHub when this stage's work started
            read = self.text.for_agent(kind)
            digest, title = (read.text.digest, read.title) if read else (None, None)
        else:
            digest, title = (c.trigger_text.digest if c.trigger_text else None), c.trigger_title
        return GoalInput(
            kind=kind,
            repo=self.repo,
            number=self.number,
            issue_digest=digest,
            title=title,
            base_branch=self.base_branch,
            **fields,
        )  # type: ignore[arg-type]

    async def _unless_edited(self, wait: Coroutine[Any, Any, None]) -> bool:
        """Run `wait` (for people); False, with `wait` cancelled, as soon as an edit of the issue
        after work started is confirmed: the run must park instead of asking for more."""
        if not self.text.enabled:
            await wait
            return True
        task = asyncio.ensure_future(wait)
        # Never cancel a progress upsert half-way: its failure is swallowed, so the cancel would be too.
        await workflow.wait_condition(
            lambda: task.done() or (self.text.edited is not None and not self.progress.updating())
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
        if self.wf.c.paused:
            await self.progress.show("waiting", waiting_for="resume")
            await workflow.wait_condition(lambda: not self.wf.c.paused)

    async def park(
        self,
        waiting_for: str,
        reason: str,
        resume_on: Iterable[str] = ("fix", "retry"),
        or_when: Callable[[], bool] | None = None,
    ) -> None:
        """Wait for a human: the comment says for what; a writer's command in `resume_on` resumes
        (as does `or_when()` turning true)."""
        s, wanted, mark = self.s, set(resume_on), len(self.commands)
        s.result, s.reason = "parked", reason
        self.progress.stage("parked")
        await self._label(self.policy.labels.needs_human)
        await self.progress.show("parked", waiting_for=waiting_for, reason=reason)
        await workflow.wait_condition(
            lambda: any(n in wanted for n in self.commands[mark:]) or bool(or_when and or_when())
        )
        s.result, s.reason = "", ""
        self.progress.outcome("resumed by a maintainer")

    async def _final(self, result: str, reason: str, waiting_for: str | None = None) -> None:
        s = self.s
        s.result, s.reason = result, reason  # type: ignore[assignment]
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
            await act(
                "github_add_labels",
                LabelsInput(repo=self.repo, issue_number=self.number, labels=[name]),
                LabelsOutput,
                f"label #{self.number}: {name}",
            )
        except ActivityError as exc:
            workflow.logger.warning("label %s not added: %s", name, exc)
