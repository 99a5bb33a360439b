"""The operator's and the maintainer's view of an issue's pipeline.

One progress comment per run (marker kind `progress`), re-rendered and upserted at every stage
change and every wait, always ending in an explicit final state; the ShopfloorStage and
ShopfloorAgent search attributes; and the `set_current_details` markdown the Temporal UI shows.
A failed upsert is logged and skipped: the comment is a view, never a reason to fail the run.
While an agent runs, its steps are added to the comment by the live_progress activity
(workflows/live_progress.py), which renders `base()` (the `progress_base` query) with them.

The comment also shows the issue text the agents work from (`show_text`): when and why it was
read from GitHub, and the text itself in a collapsed, fenced block (inert: no markup, links or
mentions render in it), so a maintainer can see exactly what was worked on; and a warning when
the issue was edited after work started. Upserts are serialized (an edit's warning may be shown
from the inbox while the pipeline updates the comment), each rendering the newest view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.progress import (
        ProgressBase,
        ProgressLinks,
        ProgressView,
        TimelineEntry,
        progress_body,
    )
    from shopfloor.models.factory_run import FactoryState
    from shopfloor.models.github_ops import UpsertCommentInput
    from shopfloor.models.inbox import IssueText
    from shopfloor.search_attributes import SHOPFLOOR_AGENT, SHOPFLOOR_COST, SHOPFLOOR_STAGE
    from shopfloor.workflows.activity_catalogue import COMMENT_RETRY, GITHUB_UPSERT_COMMENT, call

# ShopfloorStage -> the progress comment's stage.
_VIEW_STAGE = {
    "triage": "triage",
    "policy": "policy",
    "setup": "setup",
    "fix": "fix",
    "ci": "ci",
    "review": "review",
    "merge": "merge",
    "done": "done",
    "parked": "policy",
    "waiting": "triage",
}


# Histories recorded before runs listed their cost as a search attribute do not set it.
COST_ATTRIBUTE_PATCH = "cost-search-attribute"


class ProgressComment:
    def __init__(
        self, workflow_id: str, repo: str, number: int, state: FactoryState, on_change: Callable[[], None] | None = None
    ) -> None:
        self.state = state
        self.on_change = on_change
        self.view = ProgressView(workflow_id=workflow_id, repo=repo, number=number)
        self.comment_id: int | None = None
        self.text_section = ""  # the issue text the agents work from (show_text)
        self.upserts = 0  # upserts made: a live edit (activities/live_progress.py) sees the run rewrote it
        self.live_view_of: str | None = None  # the agent run whose live view is editing the comment now
        self.live_views_stopped = 0
        self._upserting = asyncio.Lock()
        self._cost_listed = 0.0  # the ShopfloorCostUsd search attribute as last set

    def links(self, **links: Any) -> None:
        self.view.links = self.view.links.model_copy(update={k: v for k, v in links.items() if v})

    def stage(self, stage: str, agent: str | None = None) -> None:
        """Enter a stage: search attributes, timeline (no comment update: `show` does that)."""
        self.state.stage = stage  # type: ignore[assignment]
        workflow.upsert_search_attributes([SHOPFLOOR_STAGE.value_set(stage), SHOPFLOOR_AGENT.value_set(agent or "")])
        view_stage = _VIEW_STAGE.get(stage, "done")
        tl = self.view.timeline
        if not tl or tl[-1].stage != view_stage or tl[-1].ended_at is not None:
            if tl and tl[-1].ended_at is None:
                tl[-1].ended_at = workflow.now()
            tl.append(TimelineEntry(stage=view_stage, started_at=workflow.now()))  # type: ignore[arg-type]
            self.view = ProgressView.model_validate(self.view.model_dump())  # keep the timeline bounded
        self.view.stage = view_stage  # type: ignore[assignment]

    def outcome(self, text: str, *, steps: int = 0, cost: float = 0.0, end: bool = True) -> None:
        tl = self.view.timeline
        if tl:
            tl[-1].outcome = text[:200]
            tl[-1].steps += steps
            tl[-1].cost_usd += cost
            if end:
                tl[-1].ended_at = workflow.now()

    async def show(self, state: str = "running", *, waiting_for: str | None = None, reason: str | None = None) -> None:
        s, v = self.state, self.view
        v.state = state  # type: ignore[assignment]
        v.waiting_for, v.reason = waiting_for, reason
        v.round, v.step, v.cost_usd, v.tokens = s.review_round, s.steps, s.cost_usd, s.tokens
        v.updated_at = workflow.now()
        s.waiting_for = waiting_for
        if v.final and v.timeline and v.timeline[-1].ended_at is None:
            v.timeline[-1].ended_at = workflow.now()
        if v.final:
            v.waiting_calls = []  # a final comment asks nobody for an answer
        if s.cost_usd != self._cost_listed and workflow.patched(COST_ATTRIBUTE_PATCH):
            workflow.upsert_search_attributes([SHOPFLOOR_COST.value_set(round(s.cost_usd, 6))])
            self._cost_listed = s.cost_usd
        await self.refresh()

    async def refresh(self) -> None:
        """Upsert the comment as the view stands now (rendered once the previous upsert is done)."""
        # Uncontended, the lock is taken without yielding: runs that never refresh from the
        # inbox issue their commands exactly as before.
        async with self._upserting:
            v = self.view
            try:
                # Its own retry (COMMENT_RETRY): the comment is a view, skipped when GitHub stays away.
                out = await call(
                    GITHUB_UPSERT_COMMENT,
                    UpsertCommentInput(
                        repo=v.repo, issue_number=v.number, workflow_id=v.workflow_id, kind="progress", body=self.body()
                    ),
                    summary=f"progress comment: {v.stage} · {v.state}",
                    retry=COMMENT_RETRY,
                )
                self.comment_id = out.id
                self.upserts += 1
            except ActivityError as exc:
                workflow.logger.warning("progress comment not updated: %s", exc)
        if self.on_change is not None:
            self.on_change()

    def updating(self) -> bool:
        """True while an upsert is in flight (its activity must not be cancelled half-way)."""
        return self._upserting.locked()

    def body(self) -> str:
        return progress_body(self.view, self.text_section)

    def base(self) -> ProgressBase:
        """What a live edit of the comment renders its checklist into (workflows/live_progress.py)."""
        return ProgressBase(view=self.view, text_section=self.text_section, upserts=self.upserts)

    def show_text(self, text: IssueText, *, edited: IssueText | None = None, link: str | None = None) -> None:
        """The issue text the agents work from, and (`edited`) GitHub's newer text, in the next upsert.
        `link`: where the read was asked for (the maintainer's comment), if known."""
        cause = f"[{text.cause}]({link})" if link and text.cause and _safe_link(link) else text.cause
        lines = []
        if edited is not None:
            lines += [
                f"> [!WARNING]\n> **The issue was edited after work started**: GitHub's text as of "
                f"{_at(edited.updated_at)} is not the text below, which the agents work from. The run goes no "
                "further with it (it parks); comment `/shopfloor fix` to work on the new text.",
                "",
            ]
        lines += [
            f"**Issue text the agents work from:** as GitHub showed it at {_at(text.updated_at)}"
            + (f", read when {cause} started work." if cause else "."),
            "<details><summary>Show the text</summary>",
            "",
            text.quote or "(empty)",
            "",
            "</details>",
        ]
        self.text_section = "\n".join(lines)

    def details(self) -> list[str]:
        s = self.state
        lines = [
            f"pipeline: **{s.stage}**"
            + (f" · {s.result}" if s.result else "")
            + (f" · waiting for {s.waiting_for}" if s.waiting_for and not s.result else "")
        ]
        if s.kind:
            lines.append(f"triage: {s.kind}, fixability {s.fixability}")
        if s.pr_number:
            lines.append(
                f"PR #{s.pr_number} head `{(s.head_sha or '')[:12]}` · CI {s.ci_state or '–'} · "
                f"verdict {s.verdict or '–'} · fix round {s.fix_round} · review round {s.review_round}"
            )
        lines.append(f"spent: {s.steps} steps, {s.tokens} tokens, ${s.cost_usd:.2f}")
        lines += [
            f"waiting for an operator: {w.agent} `{w.summary[:80]}` (call {w.call_id[:64]}, `{w.workflow_id}`)"
            for w in self.view.waiting_calls
        ]
        if s.reason:
            lines.append(f"reason: {s.reason[:200]!r}")
        return lines


def _at(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC") if when is not None else "an unknown time"


def _safe_link(url: str) -> bool:
    return url.startswith(("https://", "http://")) and not any(ch in url for ch in " <>()[]`\"'\\\n")


__all__ = ["ProgressComment", "ProgressLinks"]
