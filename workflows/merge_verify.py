"""MergeVerifyWorkflow `verify/<owner>/<repo>/<issue>/<sha12>`: after an issue's pipeline
squash-merged its fix, wait for CI on the merge commit of the default branch and report it on
the issue. A red default branch reopens the issue with a comment naming the failing checks; the
merge is not reverted (a maintainer decides). No result within the policy's `ci_timeout_minutes`
is reported as such, and the issue stays closed.

The pipeline starts it as a child that outlives it (ParentClosePolicy.ABANDON), so the issue's run
ends "merged" as before while this one waits. CI is read by an activity (bounded retries) at once
and then after a timer that doubles from `poll_seconds` to `poll_max_seconds`: a bounded poll, no
webhook routing needed for a commit no pull request holds. Every GitHub write is idempotent: the
report is one comment per run (marker kind `main-ci`), edited in place, and reopening an open
issue does nothing.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.alert_issue import ReopenIssueInput
    from shopfloor.models.git_remote import PushInput, RevertInput
    from shopfloor.models.github_ops import (
        BRANCH_PREFIX,
        CiStatusInput,
        CiStatusOutput,
        FindOrCreatePrInput,
        UpsertCommentInput,
    )
    from shopfloor.models.merge_verify import (
        MAIN_CI_KIND,
        MERGE_VERIFY_WORKFLOW,
        MergeVerifyInput,
        MergeVerifyOutcome,
        merge_verify_workflow_id,
    )
    from shopfloor.workflows.activity_catalogue import (
        GIT_PUSH_WORKSPACE,
        GIT_REVERT_PATCH,
        GITHUB_CI_STATUS,
        GITHUB_FIND_OR_CREATE_PR,
        GITHUB_REOPEN_ISSUE,
        GITHUB_UPSERT_COMMENT,
        call,
        failure_message,
    )
    from shopfloor.workflows.pipeline import PipelineContext

# Histories recorded before the pipeline verified its merges end at the merge.
VERIFY_AFTER_MERGE_PATCH = "verify-default-branch-after-merge"
NAMES_SHOWN = 10


def code(text: str) -> str:
    """`text` as inline code that it cannot close (so no markdown or mention in it works)."""
    return "`" + text.replace("`", "'")[:100] + "`"


def check_names(names: list[str]) -> str:
    """Check names as inline code, at most NAMES_SHOWN of them."""
    shown = [code(n) for n in dict.fromkeys(names)]
    more = len(shown) - NAMES_SHOWN
    return ", ".join(shown[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def report_text(inp: MergeVerifyInput, out: MergeVerifyOutcome) -> str:
    """The comment on the issue saying what CI on the default branch made of the merge."""
    commit, branch = code(inp.sha[:12]), code(inp.branch)
    merged = f"the merge of #{inp.pr_number}" if inp.pr_number else "the merge"
    if out.state == "success":
        return f"**CI passed** on {branch} after {merged} (commit {commit})."
    if out.state == "failure":
        revert = (
            f"#{out.revert_pr} reverts the merge, as the repository's policy asks; a maintainer decides whether to merge it"
            if out.revert_pr
            else "The merge was not reverted: a maintainer decides"
        )
        return (
            f"**CI failed** on {branch} after {merged} (commit {commit}). Failing: {check_names(out.failing)}.\n\n"
            f"shopfloor reopened this issue. {revert} (`/shopfloor fix` starts a new run on it)."
        )
    still = f" Still waiting for: {check_names(out.waiting)}." if out.waiting else " No check reported."
    minutes = f"{inp.timeout_minutes} minute{'s' if inp.timeout_minutes != 1 else ''}"
    return f"**No CI result** on {branch} for {merged} (commit {commit}) within {minutes}.{still}"


def revert_branch(inp: MergeVerifyInput) -> str:
    return f"{BRANCH_PREFIX}revert-{inp.number}-{inp.sha[:12]}"


def revert_body(inp: MergeVerifyInput, out: MergeVerifyOutcome) -> str:
    merged = f"#{inp.pr_number}" if inp.pr_number else f"commit {code(inp.sha[:12])}"
    return (
        f"CI failed on {code(inp.branch)} after shopfloor merged {merged} for #{inp.number} "
        f"(failing: {check_names(out.failing)}). This reverts that merge; the repository's policy "
        "(`revert_on_red_default_branch`) asks for it. A maintainer decides whether to merge it."
    )


async def start_merge_verify(ctx: PipelineContext, sha: str, clone_url: str = "") -> None:
    """Start the verification of the merge commit `sha` (once: a second start finds it)."""
    if not workflow.patched(VERIFY_AFTER_MERGE_PATCH):
        return
    inp = MergeVerifyInput(
        repo=ctx.repo,
        number=ctx.number,
        pr_number=ctx.state.pr_number,
        sha=sha,
        branch=ctx.base_branch,
        timeout_minutes=ctx.policy.ci_timeout_minutes,
        revert=ctx.policy.revert_on_red_default_branch and bool(clone_url),
        clone_url=clone_url,
        protected_paths=list(ctx.policy.protected_paths),
    )
    try:
        await workflow.start_child_workflow(
            MERGE_VERIFY_WORKFLOW,
            inp,
            id=merge_verify_workflow_id(ctx.repo, ctx.number, sha),
            result_type=MergeVerifyOutcome,
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"CI on {ctx.base_branch} after merging #{ctx.number} as {sha[:12]}",
        )
    except WorkflowAlreadyStartedError:
        pass  # this merge commit is being verified already


@workflow.defn(name=MERGE_VERIFY_WORKFLOW)
class MergeVerifyWorkflow:
    @workflow.init
    def __init__(self, inp: MergeVerifyInput) -> None:
        self.inp = inp
        self.last: CiStatusOutput | None = None
        self.error = ""

    @workflow.query(name="merge_verify")
    def state(self) -> MergeVerifyOutcome:
        """Where the verification stands: `pending` while CI has not decided."""
        last = self.last
        return MergeVerifyOutcome(
            state="pending" if last is None else last.state,
            sha=self.inp.sha,
            failing=last.failing if last else [],
            error=self.error,
        )

    @workflow.run
    async def run(self, inp: MergeVerifyInput) -> MergeVerifyOutcome:
        out = await self._wait_ci(inp)
        if out.state == "failure":
            out.reopened = await self._reopen(inp)
            if inp.revert:
                out.revert_pr = await self._open_revert(inp, out)
        if out.state != "no_ci":  # a repository whose CI runs on pull requests only is not told so on every merge
            out.reported = await self._report(inp, out)
        out.error = self.error
        workflow.set_current_details(f"CI on `{inp.branch}` at `{inp.sha[:12]}`: **{out.state}**")
        return out

    async def _wait_ci(self, inp: MergeVerifyInput) -> MergeVerifyOutcome:
        deadline = workflow.now() + timedelta(minutes=inp.timeout_minutes)
        delay = timedelta(seconds=inp.poll_seconds)
        while True:
            try:
                self.last = await call(
                    GITHUB_CI_STATUS,
                    CiStatusInput(repo=inp.repo, sha=inp.sha),
                    summary=f"CI status of {inp.branch} at {inp.sha[:12]}",
                )
            except ActivityError as exc:  # GitHub unreadable after the bounded retries: read again later
                self.error = f"read CI: {failure_message(exc)}"[:300]
            last = self.last
            if last is not None and last.state != "pending":
                return MergeVerifyOutcome(state=last.state, sha=inp.sha, failing=last.failing)
            workflow.set_current_details(f"waiting for CI on `{inp.branch}` at `{inp.sha[:12]}`")
            left = deadline - workflow.now()
            if left <= timedelta(0):
                if last is not None and last.total == 0 and not last.checks:  # nothing ever showed on the commit
                    return MergeVerifyOutcome(state="no_ci", sha=inp.sha)
                running = [c.name for c in last.checks if c.state == "pending"] if last else []
                return MergeVerifyOutcome(state="timeout", sha=inp.sha, waiting=running)
            await workflow.sleep(min(delay, left), summary=f"CI on {inp.branch}: read again")
            delay = min(delay * 2, timedelta(seconds=inp.poll_max_seconds))

    async def _open_revert(self, inp: MergeVerifyInput, out: MergeVerifyOutcome) -> int | None:
        """A pull request that reverts the merge, on its own `shopfloor/` branch (the same branch and
        commit on a retry, found again rather than made twice); None when it could not be made."""
        branch = revert_branch(inp)
        try:
            ws = await call(
                GIT_REVERT_PATCH,
                RevertInput(repo=inp.repo, clone_url=inp.clone_url, sha=inp.sha),
                summary=f"the change that reverts {inp.sha[:12]}",
            )
            if ws.patch_digest is None:
                self.error = f"{inp.sha[:12]} changed nothing: no revert"
                return None
            subject = f"Revert #{inp.pr_number}" if inp.pr_number else f"Revert {inp.sha[:12]}"
            await call(
                GIT_PUSH_WORKSPACE,
                PushInput(
                    workspace=ws,
                    branch=branch,
                    message=f"{subject}: CI failed on {inp.branch}\n\nFailing: {', '.join(out.failing[:10])}",
                    committed_at=workflow.now(),
                    protected_paths=inp.protected_paths,
                ),
                summary=f"push {branch}",
            )
            pr = await call(
                GITHUB_FIND_OR_CREATE_PR,
                FindOrCreatePrInput(
                    repo=inp.repo,
                    head=branch,
                    base=inp.branch,
                    title=f"{subject}: CI failed on {inp.branch}",
                    body=revert_body(inp, out),
                ),
                summary=f"open the revert of {inp.sha[:12]}",
            )
        except ActivityError as exc:
            self.error = f"revert {inp.sha[:12]}: {failure_message(exc)}"[:300]
            return None
        return pr.number

    async def _reopen(self, inp: MergeVerifyInput) -> bool:
        try:
            await call(
                GITHUB_REOPEN_ISSUE,
                ReopenIssueInput(repo=inp.repo, issue_number=inp.number),
                summary=f"reopen #{inp.number}: CI on {inp.branch} failed",
            )
        except ActivityError as exc:
            self.error = f"reopen #{inp.number}: {failure_message(exc)}"[:300]
            return False
        return True

    async def _report(self, inp: MergeVerifyInput, out: MergeVerifyOutcome) -> bool:
        comment = UpsertCommentInput(
            repo=inp.repo,
            issue_number=inp.number,
            workflow_id=workflow.info().workflow_id,
            kind=MAIN_CI_KIND,
            body=report_text(inp, out),
        )
        try:
            await call(GITHUB_UPSERT_COMMENT, comment, summary=f"report CI on {inp.branch} on #{inp.number}")
        except ActivityError as exc:
            self.error = f"report on #{inp.number}: {failure_message(exc)}"[:300]
            return False
        return True
