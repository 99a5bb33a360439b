"""What MergeVerifyWorkflow (workflows/merge_verify.py) takes and gives: CI on the default branch
after shopfloor merged an issue's fix, reported on the issue."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.github_ops import RepoName

MERGE_VERIFY_WORKFLOW = "MergeVerifyWorkflow"
# The comment kind of its report on the issue (one comment per verification run, edited in place).
MAIN_CI_KIND = "main-ci"

# "pending" only while the run waits (its `merge_verify` query); a finished run says one of the others.
# "no_ci": no check or status ever showed on the merge commit (CI that runs on pull requests only):
# nothing to report, and nothing is said on the issue.
MainCiState = Literal["pending", "success", "failure", "timeout", "no_ci"]


def merge_verify_workflow_id(repo: str, number: int, sha: str) -> str:
    """`verify/<owner>/<repo>/<issue>/<merge sha, 12>`: one verification per merge commit."""
    return f"verify/{repo}/{number}/{sha[:12]}"


class MergeVerifyInput(BaseModel):
    repo: RepoName
    number: int = Field(ge=1)  # the issue the merged fix closed
    pr_number: int | None = Field(default=None, ge=1)
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")  # the squash-merge commit on `branch`
    branch: str = Field(min_length=1)  # the default branch the pull request merged into
    timeout_minutes: int = Field(default=60, ge=1, le=1440)  # the policy's ci_timeout_minutes
    # CI is read at once, then after poll_seconds, doubling up to poll_max_seconds.
    poll_seconds: float = Field(default=5.0, gt=0, le=3600)
    poll_max_seconds: float = Field(default=300.0, gt=0, le=3600)
    # The policy's revert_on_red_default_branch: a red default branch also gets a pull request that
    # reverts the merge (never a push to the default branch); clone_url is where to build it.
    revert: bool = False
    clone_url: str = ""
    protected_paths: list[str] = Field(default_factory=list)


class MergeVerifyOutcome(BaseModel):
    state: MainCiState
    sha: str
    failing: list[str] = Field(default_factory=list)  # the failing checks' names
    waiting: list[str] = Field(default_factory=list)  # on timeout: the checks still running
    reopened: bool = False  # a red default branch reopened the issue
    reported: bool = False  # the report is on the issue
    error: str = ""  # the last GitHub step that failed, if any
    revert_pr: int | None = None  # the pull request that reverts the merge (revert on)
