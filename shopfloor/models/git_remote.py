"""Inputs and outputs of the git remote activities: pushing a workspace as one commit, and
bringing a workspace up to date with its base branch.

No credentials here: the worker finds its own token for the repository (docs/design.md, Trust and
safety). New fields always get defaults: old histories must still deserialize.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import WorkspaceRef

BOT_NAME = "shopfloor[bot]"
BOT_EMAIL = "shopfloor-bot@users.noreply.github.com"


class PushInput(BaseModel):
    """Push `workspace` (base + patch) as ONE commit on `base_sha` to `refs/heads/<branch>`.

    The commit is a pure function of these fields, so a retried push makes the same sha:
    `committed_at` comes from `workflow.now()`, never from the worker's clock.
    `expected_remote_sha` is where the workflow last left the branch (None: it must not exist
    yet); a branch found anywhere else was moved by someone else and is never overwritten.
    """

    workspace: WorkspaceRef
    branch: str
    message: str
    committed_at: datetime
    author_name: str = BOT_NAME
    author_email: str = BOT_EMAIL
    expected_remote_sha: str | None = None
    # The policy's protected_paths (None: the default list); the files agents/policy.py always
    # protects are added to them. A commit that changes any of them is never pushed.
    protected_paths: list[str] | None = None


class PushOutput(BaseModel):
    head_sha: str
    pushed: bool  # False: the branch already pointed at head_sha (a retry after a lost answer)
    files_changed: int = 0
    additions: int = 0
    deletions: int = 0


class UpdateInput(BaseModel):
    workspace: WorkspaceRef
    base_branch: str


class UpdateOutput(BaseModel):
    """`up_to_date`: `workspace` is the input unchanged. `merged`: `workspace` is based on the
    branch's new tip, its patch the merge result. `conflicts`: the same, but the patch leaves
    the conflicting files with git's conflict markers (`<<<<<<<`/`=======`/`>>>>>>>`) for an
    agent to resolve; `conflicts` lists them."""

    status: Literal["up_to_date", "merged", "conflicts"]
    workspace: WorkspaceRef
    base_sha: str  # the base branch's tip that was merged (or found already included)
    conflicts: list[str] = Field(default_factory=list)


class ProtectedChange(BaseModel):
    path: str  # a path the change adds, deletes or modifies (content, mode or type)
    glob: str  # the protected_paths glob that covers it


class ProtectedCheckInput(BaseModel):
    """Which protected paths pull request `number` changes at `head_sha`: the diff from its
    merge base with `base_ref`'s tip to the head, what GitHub would merge."""

    repo: str
    clone_url: str
    base_ref: str
    head_sha: str
    number: int | None = None  # its head may live in a fork: fetched through refs/pull/<n>/head
    protected_paths: list[str] | None = None  # as PushInput.protected_paths


class ProtectedCheckOutput(BaseModel):
    merge_base: str
    changes: list[ProtectedChange] = Field(default_factory=list)  # the first MAX_LISTED
    total: int = 0
    message: str = ""  # for people: which protected paths, and that shopfloor will not merge them


class RevertInput(BaseModel):
    """The change that undoes commit `sha` of `repo` (a squash merge: one parent)."""

    repo: str
    clone_url: str
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")
