"""The issue text an issue's pipeline works from: read from GitHub when triage starts and again
when work starts, and watched for edits after that.

The text an event carried is what the issue said when the event was sent; a stranger can open a
malicious issue, edit it into a harmless one, and wait for a maintainer to ask for a fix. So the
agents never work from an event's text: triage reads the issue from GitHub when it starts, and
when work starts (a maintainer's `/shopfloor fix`, the trigger label, or the policy at open) the
issue is read again — the text the maintainer saw when they asked. If that differs from what
triage read, triage runs again on it, so nothing the fix agent is given derives from other text.
An edit after work started (an `issues.edited` event whose text differs, confirmed by reading
GitHub; and before every merge, a read whatever the events said) parks the run: the progress
comment says so, and a maintainer's `/shopfloor fix` starts work again on the new text.

Histories recorded before this replay with the event's text (patch WORK_TEXT_PATCH).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.github_text import safe_login
    from shopfloor.models.inbox import IssueText, IssueTextInput, RepoEvent
    from shopfloor.workflows.activity_catalogue import FACTORY_ISSUE_TEXT, call

if TYPE_CHECKING:
    from shopfloor.workflows.factory_run import FactoryRun

WORK_TEXT_PATCH = "issue-work-text-from-github"
EDITED_REASON = "the issue was edited after work started; `/shopfloor fix` again to work on the new text"


class IssueTextWatch:
    def __init__(self, run: FactoryRun) -> None:
        self.run = run
        self.enabled = False
        self.triaged: IssueText | None = None  # what the last triage read
        self.work: IssueText | None = None  # what fix and review work from, once work started
        self.edited: IssueText | None = None  # GitHub's text when it differs from `work`
        self._link: str | None = None

    def enable(self) -> bool:
        """Decide once, at the pipeline's start, whether this run reads its text from GitHub."""
        self.enabled = workflow.patched(WORK_TEXT_PATCH)
        return self.enabled

    def for_agent(self, kind: str) -> IssueText | None:
        """The snapshot an agent of `kind` gets: triage what it was read for, the others the work
        text once work started."""
        return self.triaged if kind == "triage" else (self.work or self.triaged)

    async def read(self, cause: str, link: str | None = None) -> IssueText:
        """The issue as GitHub shows it now, stored in the blob store; `cause` says who asked ("": a
        check for edits, which needs no quote for people)."""
        run = self.run
        text = await call(
            FACTORY_ISSUE_TEXT,
            IssueTextInput(repo=run.repo, number=run.number, quote=bool(cause)),
            summary=f"text of #{run.number} ({cause or 'edit check'})",
        )
        self._link = link if cause else self._link
        return text.model_copy(update={"cause": cause})

    def triage_reads(self, text: IssueText) -> None:
        self.triaged = text
        self._show(text)

    def start_work(self, text: IssueText) -> None:
        """From now on the agents work from `text`; an edit after this parks the run."""
        self.work, self.edited = text, None
        # What the `inbox` query shows; the quote stays out so history stays small.
        self.run.issue_workflow.carry.work_text = text.model_copy(update={"quote": ""})
        self._show(text)

    def _show(self, text: IssueText) -> None:
        self.run.progress.show_text(text, edited=self.edited, link=self._link)

    # -- edits after work started --------------------------------------------------------------

    async def on_edited(self, e: RepoEvent) -> None:
        """An `issues.edited` event: confirm on GitHub and warn in the progress comment at once."""
        if not self.enabled or self.work is None:
            return  # before work starts an edit changes nothing: work reads the text when it starts
        if e.text is not None and e.text.digest == self.work.text.digest and self.edited is None:
            return  # the text the agents have (a late delivery of the edit it already holds)
        warned = self.edited is not None
        try:
            changed = await self.changed_on_github()
        except ActivityError as exc:  # GitHub unreadable for now: the check before the next merge reads again
            workflow.logger.warning("edit of #%s not checked: %s", self.run.number, exc)
            return
        if changed or warned:  # a new warning, a newer edit, or the edit undone
            await self.run.progress.refresh()

    async def changed_on_github(self) -> bool:
        """Whether the issue on GitHub now reads differently from the work text (kept in `edited`)."""
        if not self.enabled or self.work is None:
            return False
        now = await self.read("")
        before = self.edited
        self.edited = None if now.text.digest == self.work.text.digest else now
        if (before is None) != (self.edited is None):
            self._show(self.work)
        return self.edited is not None

    # -- who started work ------------------------------------------------------------------------

    def cause(self, labeled_by: str | None) -> tuple[str, str | None]:
        """What started work, for people ("maria's `/shopfloor fix`"), and a link to it if any."""
        run = self.run
        fixes = [r for r in run.issue_workflow.carry.commands if r.accepted and r.name == "fix"]
        if fixes:
            r = fixes[-1]
            issue_url = run.progress.view.links.issue_url
            link = f"{issue_url}#issuecomment-{r.comment_id}" if issue_url and r.comment_id else None
            return f"{safe_login(r.sender)}'s `/shopfloor fix`", link
        if run.policy.auto_fix == "label":
            who = f"{safe_login(labeled_by)}'s " if labeled_by else "the "
            return f"{who}`{run.policy.labels.trigger}` label", None
        return f"the repository's policy (`auto_fix: {run.policy.auto_fix}`)", None
