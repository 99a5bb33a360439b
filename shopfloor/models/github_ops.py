"""Inputs and outputs of the GitHub activities, and the hidden marker that makes comments and
reviews idempotent (docs/design.md, The factory workflows).

These travel through workflow history: repositories are `owner/repo` strings, and nothing here
ever holds a token or key. New fields always get defaults.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StringConstraints,
    field_validator,
)

# GitHub owners: letters, digits and single hyphens; repository names add "." and "_".
REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$"


def _not_dots(value: str) -> str:
    if value.split("/", 1)[1] in (".", ".."):
        raise ValueError(f"{value!r} is not an owner/repo name")
    return value


RepoName = Annotated[str, StringConstraints(pattern=REPO_PATTERN), AfterValidator(_not_dots)]

# The only branches shopfloor creates, moves or deletes unless an input says otherwise
# (docs/design.md, Trust and safety).
BRANCH_PREFIX = "shopfloor/"

Permission = Literal["none", "read", "triage", "write", "maintain", "admin"]
CiState = Literal["pending", "success", "failure"]
ReviewEvent = Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]

# --- the hidden marker ------------------------------------------------------------------------

_KIND_CHARS = r"[A-Za-z0-9_.-]+"
_MARKER_RE = re.compile(rf"<!-- shopfloor:(?P<workflow_id>[^\n]+?):(?P<kind>{_KIND_CHARS}) -->")


class Marker(BaseModel):
    workflow_id: str
    kind: str


def comment_marker(workflow_id: str, kind: str) -> str:
    """`<!-- shopfloor:<workflow-id>:<kind> -->`: found again after a retry, invisible on GitHub."""
    if not workflow_id or "\n" in workflow_id or "-->" in workflow_id:
        raise ValueError(f"workflow id {workflow_id!r} cannot go into a comment marker")
    if not re.fullmatch(_KIND_CHARS, kind):
        raise ValueError(f"marker kind {kind!r} must be letters, digits, '.', '_' or '-'")
    return f"<!-- shopfloor:{workflow_id}:{kind} -->"


def find_markers(text: str | None) -> list[Marker]:
    """Every shopfloor marker in a comment or review body, in order."""
    return [Marker(**m.groupdict()) for m in _MARKER_RE.finditer(text or "")]


def with_marker(body: str, workflow_id: str, kind: str) -> str:
    """The body with its marker on the first line (GitHub keeps HTML comments; it renders none),
    unless it already starts or ends with it (the progress comment ends with its own)."""
    marker = comment_marker(workflow_id, kind)
    return body if body.startswith(marker) or body.rstrip().endswith(marker) else f"{marker}\n{body}"


def _check_branch(value: str) -> str:
    value = value.removeprefix("refs/heads/")
    if not value or value.startswith(("/", "-")) or ".." in value or any(c in value for c in " ~^:?*[\\"):
        raise ValueError(f"{value!r} is not a valid branch name")
    return value


class _RepoInput(BaseModel):
    repo: RepoName


# --- branches ---------------------------------------------------------------------------------


class DeleteBranchInput(_RepoInput):
    branch: str
    allow_any_branch: bool = False

    _branch = field_validator("branch")(_check_branch)


class DeleteBranchOutput(BaseModel):
    deleted: bool  # False: it was already gone


# --- pull requests ----------------------------------------------------------------------------


class FindOrCreatePrInput(_RepoInput):
    head: str  # branch in the same repository
    base: str
    title: str
    body: str = ""
    draft: bool = False
    # Set: the body ends with this workflow's `pr` marker, added after the text is cleaned of
    # markers (the edge routes comments on the pull request by it).
    workflow_id: str | None = None

    _head = field_validator("head", "base")(_check_branch)


class PrOutput(BaseModel):
    number: int
    url: str
    head_sha: str
    created: bool


class MergePrInput(_RepoInput):
    pr_number: int = Field(ge=1)
    head_sha: str = Field(pattern=r"^[0-9a-f]{40}$")  # merge only if the head is still this commit
    method: Literal["merge", "squash", "rebase"] = "squash"
    title: str | None = None
    message: str | None = None


class MergeOutput(BaseModel):
    sha: str  # the merge commit
    already_merged: bool = False  # a retry after a lost response found the merge done


class ReviewComment(BaseModel):
    path: str
    line: int = Field(ge=1)
    body: str
    side: Literal["LEFT", "RIGHT"] = "RIGHT"


class SubmitReviewInput(_RepoInput):
    pr_number: int = Field(ge=1)
    workflow_id: str
    round: int = Field(ge=0)
    event: ReviewEvent
    body: str
    comments: list[ReviewComment] = Field(default_factory=list)
    commit_id: str | None = None  # the head the review is about; None: the current head


class ReviewOutput(BaseModel):
    id: int
    state: str  # as GitHub lists it: APPROVED, CHANGES_REQUESTED, COMMENTED
    url: str = ""
    created: bool


# --- issues and comments ----------------------------------------------------------------------


class UpsertCommentInput(_RepoInput):
    issue_number: int = Field(ge=1)
    workflow_id: str
    kind: str  # "progress", "triage", ...: one comment per (workflow, kind)
    body: str


class CommentOutput(BaseModel):
    id: int
    url: str
    action: Literal["created", "updated", "unchanged"]


class IssueRef(_RepoInput):
    number: int = Field(ge=1)


class IssueOutput(BaseModel):
    number: int
    title: str
    body: str = ""
    state: str
    state_reason: str | None = None
    labels: list[str] = Field(default_factory=list)
    author: str = ""
    author_type: str = ""
    author_association: str | None = None
    is_pull_request: bool = False
    url: str = ""


class LabelsInput(_RepoInput):
    issue_number: int = Field(ge=1)
    labels: list[str] = Field(min_length=1)


class LabelsOutput(BaseModel):
    labels: list[str]  # the issue's labels afterwards


class CloseIssueInput(_RepoInput):
    issue_number: int = Field(ge=1)
    state_reason: Literal["completed", "not_planned"] = "completed"


class CloseIssueOutput(BaseModel):
    state_reason: str | None = None
    already_closed: bool = False


# --- reads ------------------------------------------------------------------------------------


class PermissionInput(_RepoInput):
    login: str


class PermissionOutput(BaseModel):
    permission: Permission

    @property
    def can_write(self) -> bool:
        return self.permission in ("write", "maintain", "admin")


class ReadFileInput(_RepoInput):
    path: str
    ref: str | None = None  # None: the default branch
    max_bytes: int = Field(default=256_000, ge=1)  # files land in history: keep them small


class FileOutput(BaseModel):
    found: bool
    content: str | None = None  # None when absent
    sha: str | None = None  # the blob sha


class CiStatusInput(_RepoInput):
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")
    # The branch the head merges into: its protection's required checks count as pending until
    # they report, so a quick check's green never stands in for a required one not yet started.
    base_branch: str | None = None


class CiCheck(BaseModel):
    name: str
    # "required": a check the base branch's protection requires that has not reported yet.
    kind: Literal["status", "check_run", "required"]
    state: CiState
    url: str | None = None


class CiStatusOutput(BaseModel):
    # pending also when nothing has reported yet (total == 0): CI may not have started.
    state: CiState
    total: int = 0
    checks: list[CiCheck] = Field(default_factory=list)

    @property
    def failing(self) -> list[str]:
        return [c.name for c in self.checks if c.state == "failure"]

    @property
    def pending(self) -> list[str]:
        return [c.name for c in self.checks if c.state == "pending"]
