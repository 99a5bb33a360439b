"""The factory pipeline of one IssueWorkflow run: what the workflow remembers of it,
what the `factory` query shows, and the inputs/outputs of the activities only the pipeline uses.

Everything here travels through history: refs, ids, digests and short previews; every field has
a default so that older histories still deserialize.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from shopfloor.models.github_ops import RepoName
from shopfloor.models.transcript import ImageRef

# ShopfloorStage values while the pipeline runs (the inbox's own are received/closed/stopped/idle).
PipelineStage = Literal["waiting", "triage", "policy", "setup", "fix", "ci", "review", "merge", "done", "parked"]
# closed: (pull request runs) a person closed or merged the pull request.
PipelineResult = Literal["", "merged", "salvaged", "failed", "cancelled", "parked", "closed"]


# What people's feedback on a run's pull request was: a writer's changes_requested review (its
# body), a writer's line comment on the run's own pull request, a writer's `/shopfloor fix <text>`.
FeedbackKind = Literal["review", "line_comment", "instructions"]


class FeedbackItem(BaseModel):
    """One writer's feedback for the next fix round: a reference to its snapshotted text (the goal
    activity reads and quotes it), never the text itself."""

    kind: FeedbackKind
    author: str
    digest: str  # TextSnapshot.digest of the review, comment or command comment
    preview: str = ""  # the start of the visible text (what the progress and status show)
    path: str | None = None  # line comments: the file and line
    line: int | None = None
    review_id: int | None = None
    comment_id: int | None = None


class HeadSeen(BaseModel):
    """A pull request head and the time it was the head by at the latest (approvals name heads)."""

    sha: str
    since: datetime


class FactoryState(BaseModel):
    """Where the pipeline stands (the `factory` query; also the IssueOutcome's detail)."""

    started: bool = False
    stage: PipelineStage = "waiting"
    result: PipelineResult = ""  # set once the pipeline ended (parked: waiting for a human)
    reason: str = ""
    waiting_for: str | None = None
    kind: str | None = None  # triage's kind
    fixability: float | None = None
    labels: list[str] = Field(default_factory=list)
    fix_round: int = 0
    review_round: int = 0
    branch: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    head_sha: str | None = None
    ci_state: str | None = None  # for head_sha
    verdict: str | None = None  # the last review's verdict, about verdict_head
    verdict_head: str | None = None
    approved_heads: list[str] = Field(default_factory=list)  # heads a writer approved
    heads: list[HeadSeen] = Field(default_factory=list)  # every head of the pull request, in order
    merged_sha: str | None = None
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    children: list[str] = Field(default_factory=list)  # agent run workflow ids, in order
    feedback: list[FeedbackItem] = Field(default_factory=list)  # people's, for the next fix round (bounded)
    feedback_rounds: int = 0  # fix rounds people's feedback started
    running_agent: str | None = None  # the child among them running now (its controls go there)


class RepoInfoInput(BaseModel):
    repo: RepoName


class RepoInfo(BaseModel):
    default_branch: str = "main"
    head_sha: str | None = None  # the default branch's tip (None: an empty repository)
    clone_url: str = ""
    html_url: str = ""


# pr_review: a pull request a person opened (PullRequestWorkflow); `number` is the PR.
GoalKind = Literal["triage", "fix", "review", "pr_review"]


class GoalInput(BaseModel):
    """What an agent's goal is rendered from. Untrusted text is referenced (issue snapshot digest)
    and quoted by the activity; the workflow never holds it."""

    kind: GoalKind
    repo: RepoName
    number: int = Field(ge=1)
    issue_digest: str | None = None  # TextSnapshot.digest of the trigger text
    title: str | None = None
    triage: dict[str, Any] | None = None  # TriageResult
    similar: list[dict[str, Any]] = Field(default_factory=list)  # SimilarIssue dumps
    round: int = 1
    ci_failed_sha: str | None = None  # fix: CI failed on this commit (its check output is quoted)
    review: dict[str, Any] | None = None  # fix: the review that requested changes (ReviewResult)
    conflicts: list[str] = Field(default_factory=list)  # fix: files in conflict with the base
    base_branch: str = "main"
    patch_digest: str | None = None  # review: the change under review
    pr_number: int | None = None
    ci_summary: str = ""  # review: "CI passed: ci"
    test_command: str | None = None
    author: str | None = None  # pr_review: who opened the pull request
    feedback: list[FeedbackItem] = Field(default_factory=list)  # triage/fix: what writers asked for
    images: bool = False  # fetch the images the body shows (from GitHub's hosts only)


class GoalOutput(BaseModel):
    goal: str
    chars: int = 0
    images: list[ImageRef] = Field(default_factory=list)  # shown to the model after the goal
