"""The one progress comment per run: live status, and always an explicit final state.

`render_progress` turns a `ProgressView` into the comment's markdown; the workflow upserts it
under the marker `comment_marker(workflow_id, "progress")`, which ends the body. Pure: no I/O.

Untrusted text (reasons and outcomes that quote model output, issue text or error messages) goes
into inline code spans: GitHub renders no markup, links, `#123` references or @mentions inside
code, so such text can neither notify anyone nor close the comment's markup. Before that it is
stripped of hidden content, folded onto one line and capped. (Replacing `@` with `&#64;` or a
zero-width space was rejected: whether an entity still becomes a mention depends on the order in
which a renderer decodes entities and links mentions, and zero-width characters are exactly what
shopfloor strips from text elsewhere.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from shopfloor.agents.call_waits import how_to_answer, when
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.models.call_waits import CallWait
from shopfloor.models.github_ops import RepoName, comment_marker

MAX_TIMELINE = 20  # entries kept; older ones are counted in `timeline_dropped`
MAX_UNTRUSTED_CHARS = 300
MAX_PROBLEMS = 21  # a policy load keeps 20 errors and a line counting the rest
MAX_PROBLEM_CHARS = 400
MAX_WAITING_CALLS = 10

Stage = Literal["triage", "policy", "setup", "fix", "ci", "review", "merge", "done"]
# closed: a pull request's review run ended because a person closed (or merged) the pull request.
RunState = Literal["running", "waiting", "merged", "parked", "failed", "cancelled", "salvaged", "closed"]
FINAL_STATES: frozenset[str] = frozenset({"merged", "parked", "failed", "cancelled", "salvaged", "closed"})
Subject = Literal["issue", "pull_request"]

# What a run can wait for, said to humans. Any other `waiting_for` is shown as quoted text.
WAITING_FOR: dict[str, str] = {
    "approval": "a maintainer's approval: comment `/shopfloor approve` on this {subject}",
    # With the head known: the approval names the commit the maintainer reviewed.
    "approval_of": "a maintainer's approval of `{sha}`: review it, then comment `/shopfloor approve {sha}` "
    "on this {subject}",
    "fix_command": "a maintainer to ask for a fix: comment `/shopfloor fix` on this {subject}",
    "ci": "CI to finish on the pull request",
    "review": "a review of the pull request",
    "operator": "an operator to approve or reject a step (Temporal UI, or `shopfloor approve <workflow id>`)",
    "policy": "a valid `.github/shopfloor.yml` on the default branch, then `/shopfloor retry` (the errors are in the reason)",
    "resume": "someone to resume the run: comment `/shopfloor resume`",
    "retry": "a maintainer to retry: comment `/shopfloor retry`",
    "push": "a new push to the pull request, or a maintainer's `/shopfloor review`",
    "review_command": "a maintainer to ask for a review: comment `/shopfloor review`",
    "budget": "the spend ledger to allow another run: it starts when the UTC day (or month) rolls over, or when "
    "an operator raises the limit (`shopfloor budget set`)",
    "queue": "a free slot: as many runs as the limit allows are working; it starts when one of them ends",
}


class TimelineEntry(BaseModel):
    stage: Stage
    started_at: datetime | None = None
    ended_at: datetime | None = None
    steps: int = 0
    cost_usd: float = 0.0
    outcome: str | None = None  # short; untrusted (may quote a model)


class ProgressLinks(BaseModel):
    pr_url: str | None = None
    workflow_url: str | None = None  # the run in the Temporal UI
    issue_url: str | None = None
    branch_url: str | None = None


class ProgressView(BaseModel):
    workflow_id: str
    repo: RepoName
    number: int = Field(ge=1)
    subject: Subject = "issue"  # what `number` is: the run's issue, or a person's pull request
    stage: Stage = "triage"
    round: int = 0  # review ⇄ fix round
    step: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    state: RunState = "running"
    waiting_for: str | None = None  # a WAITING_FOR key, or free text
    approve_sha: str | None = None  # the head an approval must name (short sha), while waiting for one
    reason: str | None = None  # why it failed / parked / was cancelled, or what salvage left
    links: ProgressLinks = Field(default_factory=ProgressLinks)
    timeline: list[TimelineEntry] = Field(default_factory=list)
    timeline_dropped: int = 0
    unpriced_models: list[str] = Field(default_factory=list, max_length=10)  # cost of their steps not counted
    updated_at: datetime | None = None
    # Tool calls the run's agents wait on an operator for (the workflow keeps at most MAX_WAITING_CALLS).
    waiting_calls: list[CallWait] = Field(default_factory=list)
    # Each problem of what the run waits on, listed whole (a policy file's errors): the reason
    # sentence is cut, and a maintainer must see every mistake to fix the file in one go.
    problems: list[str] = Field(default_factory=list, max_length=MAX_PROBLEMS)

    @model_validator(mode="after")
    def _bound_timeline(self) -> ProgressView:
        # History and the comment stay bounded however many rounds a run goes through.
        extra = len(self.timeline) - MAX_TIMELINE
        if extra > 0:
            self.timeline = self.timeline[extra:]
            self.timeline_dropped += extra
        return self

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def untrusted(text: str | None, limit: int = MAX_UNTRUSTED_CHARS) -> str:
    """Text from outside shopfloor as one inert inline code span (see the module docstring)."""
    flat = " ".join(sanitize(text or "").split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    if not flat:
        return "`(none given)`"
    # A fence longer than any backtick run inside; padding keeps edge backticks apart from it.
    fence = "`" * (max((len(r) for r in re.findall(r"`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}"


_SAFE_URL = re.compile(r"^https?://[^\s<>()\[\]`\"'\\]+$")


def _link(text: str, url: str | None) -> str | None:
    return f"[{text}]({url})" if url and _SAFE_URL.match(url) else None


def _when(at: datetime | None) -> str:
    if at is None:
        return "–"
    at = at.astimezone(UTC) if at.tzinfo else at
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # GFM splits cells on `|`, even inside code spans


def _waiting(view: ProgressView) -> str:
    if view.waiting_for == "approval" and view.approve_sha and re.fullmatch(r"[0-9a-f]{7,40}", view.approve_sha):
        return WAITING_FOR["approval_of"].format(subject=view.subject.replace("_", " "), sha=view.approve_sha)
    if view.waiting_for in WAITING_FOR:
        return WAITING_FOR[view.waiting_for].format(subject=view.subject.replace("_", " "))
    return f"a human: {untrusted(view.waiting_for)}" if view.waiting_for else "a human to decide how to go on"


def status_sentence(view: ProgressView) -> str:
    """The one sentence that says where the run stands; for a final state, which one and why."""
    reason = untrusted(view.reason)
    where = f"stage {view.stage}" + (f", review round {view.round}" if view.round else "") + f", step {view.step}"
    match view.state:
        case "running" if view.waiting_calls:
            n = len(view.waiting_calls)
            calls = "a tool call" if n == 1 else f"{n} tool calls"
            return f"**Waiting** for an operator to approve or reject {calls} ({where}); the run goes on once answered."
        case "running":
            return f"**Running** — {where}."
        case "waiting":
            why = f" Why: {reason}." if view.reason else ""
            return f"**Waiting** for {_waiting(view)} ({where}).{why}"
        case "merged":
            if view.subject == "pull_request":
                return "**Final state: merged.** shopfloor merged this pull request."
            pr = _link("the pull request", view.links.pr_url) or "the pull request"
            return f"**Final state: merged.** The fix in {pr} is merged and the issue is closed."
        case "closed":
            return f"**Final state: closed.** {reason}; nothing more will happen in this run."
        case "parked":
            n = len(view.problems)
            listed = f" Why: {n} problem{'s' if n > 1 else ''}, listed below." if n else ""
            why = listed or (f" Why: {reason}." if view.reason else "")
            return f"**Final state: waiting for a human.** The run is parked until {_waiting(view)}.{why}"
        case "failed":
            return f"**Final state: failed** at {view.stage}. Why: {reason}."
        case "cancelled":
            by = f" {reason}." if view.reason else ""
            return f"**Final state: cancelled** at {view.stage}; nothing more will happen in this run.{by}"
        case "salvaged":
            kept = _link("the branch", view.links.branch_url) or _link("the pull request", view.links.pr_url)
            saved = f" Work so far is saved in {kept}." if kept else " Work so far is saved."
            return f"**Final state: salvaged** — stopped at {view.stage} before finishing.{saved} Left to do: {reason}."
    raise ValueError(f"unknown state {view.state!r}")  # pragma: no cover - Literal guards it


_LABELS = {
    "running": "running",
    "waiting": "waiting",
    "merged": "merged",
    "parked": "needs a human",
    "failed": "failed",
    "cancelled": "cancelled",
    "salvaged": "salvaged",
    "closed": "closed",
}


def waiting_call_lines(view: ProgressView) -> list[str]:
    """One item per tool call waiting for an operator: what, which agent, since and until when, how to answer."""
    lines: list[str] = []
    for w in view.waiting_calls[-MAX_WAITING_CALLS:]:
        what = f"{untrusted(w.summary, 160)}" + (f" ({untrusted(w.reason, 120)})" if w.reason else "")
        lines += [
            f"- **{w.agent}** waits for approval of {what}, step {w.step}, since {when(w.since)}; "
            f"refused at {when(w.until)} if nobody answers.",
            f"  To answer: {how_to_answer(w)}.",
        ]
    return lines


def render_progress(view: ProgressView, live: Sequence[str] = ()) -> str:
    """The comment's markdown; `live`: the running agent's checklist (agents/live_checklist.py),
    shown under the timeline while the run is not final."""
    label = "waiting" if view.state == "running" and view.waiting_calls else _LABELS[view.state]
    lines = [f"### shopfloor · {view.repo}#{view.number} · {label}", "", status_sentence(view), ""]
    if view.problems and view.state in ("parked", "waiting"):
        lines += [*(f"- {untrusted(p, MAX_PROBLEM_CHARS)}" for p in view.problems), ""]
    if view.waiting_calls and not view.final:
        lines += [*waiting_call_lines(view), ""]
    if view.timeline:
        lines += ["| Stage | Started | Ended | Steps | Cost | Outcome |", "|---|---|---|---:|---:|---|"]
        if view.timeline_dropped:
            lines.append(f"| … | | | | | {view.timeline_dropped} earlier entries not shown |")
        for e in view.timeline:
            outcome = _cell(untrusted(e.outcome, 120)) if e.outcome else ("running" if e.ended_at is None else "–")
            lines.append(
                f"| {e.stage} | {_when(e.started_at)} | {_when(e.ended_at)} | {e.steps} | ${e.cost_usd:.2f} | {outcome} |"
            )
        lines.append("")
    if live and not view.final:
        lines += [*live, ""]
    unpriced = ""
    if view.unpriced_models:
        unpriced = (
            f" (cost not tracked for {', '.join(untrusted(m, 80) for m in view.unpriced_models)}: no price known)"
        )
    lines.append(f"Spent: {view.step} steps, {view.tokens:,} tokens, ${view.cost_usd:.2f}{unpriced}.")
    links = [
        _link("pull request", view.links.pr_url),
        _link("run in the Temporal UI", view.links.workflow_url),
        _link("branch", view.links.branch_url),
        _link("issue", view.links.issue_url),
    ]
    shown = [link for link in links if link]
    if shown:
        lines.append("Links: " + " · ".join(shown) + ".")
    lines.append(f"<sub>Workflow `{view.workflow_id}` · updated {_when(view.updated_at)}</sub>")
    lines += ["", comment_marker(view.workflow_id, "progress")]
    return "\n".join(lines)


class ProgressBase(BaseModel):
    """The comment as its run renders it (what a live edit adds its checklist to): the view, the
    issue text section, and how many upserts the run has made (a new one means the run rewrote the
    comment, without the checklist)."""

    view: ProgressView
    text_section: str = ""
    upserts: int = 0


def progress_body(view: ProgressView, text_section: str = "", live: Sequence[str] = ()) -> str:
    """The whole comment: `render_progress`, then the issue text section, then the marker last."""
    body = render_progress(view, live)
    if not text_section:
        return body
    marker = comment_marker(view.workflow_id, "progress")  # render_progress ends with it
    return f"{body.removesuffix(marker).rstrip()}\n\n{text_section}\n\n{marker}"
