"""A PullRequestWorkflow's review-and-merge run on a pull request a person opened:
the activities' inputs and outputs, and what the run carries across continue-as-new.

Everything here travels through history: refs, digests and short previews, never the diff or the
description (those live in the blob store). New fields always get defaults.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import WorkspaceRef
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.github_ops import RepoName
from shopfloor.models.inbox import TextSnapshot

SHA = r"^[0-9a-f]{40}$"


class PullInput(BaseModel):
    repo: RepoName
    number: int = Field(ge=1)


class PullInfo(BaseModel):
    """A pull request as GitHub shows it now; its title and body snapshotted (sanitized)."""

    number: int
    state: Literal["open", "closed"]
    merged: bool = False
    draft: bool = False
    author: str = ""
    head_sha: str
    head_ref: str = ""
    same_repo: bool = True  # False: the head lives in a fork
    base_ref: str = "main"
    title: str = ""  # sanitized, capped
    text: TextSnapshot | None = None  # {"title", "body"} in the blob store
    html_url: str = ""


class PullChangeInput(BaseModel):
    """Bring a pull request's head and base into this worker's mirror and store its change."""

    repo: RepoName
    number: int = Field(ge=1)
    clone_url: str
    base_ref: str
    head_sha: str = Field(pattern=SHA)


class PullChange(BaseModel):
    workspace: WorkspaceRef  # the head commit, no patch: what the reviewer reads and tests
    merge_base: str
    diff_digest: str | None = None  # `git diff merge-base..head` (what GitHub's "Files changed" shows)
    diff_bytes: int = 0
    files: list[str] = Field(default_factory=list, max_length=200)  # changed paths (first 200)


class PullReviewCarry(BaseModel):
    """The review run's memory across continue-as-new (taken only between reviews)."""

    state: FactoryState = Field(default_factory=FactoryState)
    view: dict[str, Any] | None = None  # the progress comment's ProgressView
    review_requests: int = 0  # accepted `/shopfloor review` commands not yet served
    reviewed_head: str | None = None
    auto_reviews: int = 0  # reviews started without a request (bounded by max_review_rounds)
    author_permission: str | None = None
    # An event had woken the run and the pass it asked for had not finished: the next run makes it.
    woken: bool = False
