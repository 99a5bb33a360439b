"""The GitHub activities: one pydantic model in, one out, every write idempotent under retries.

PyGithub blocks, so each runs in a worker thread. Writes take the per-installation lock first
(one write at a time per installation, per worker); reads do not. Any failure leaves here as
an ApplicationError that says whether Temporal should retry (see errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import structlog
from pydantic import BaseModel
from temporalio import activity

from shopfloor.activities.github import branches, issues, policy, pulls, reads, similar
from shopfloor.activities.github.api import GitHubApi, read_github, write_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.agents.policy import PolicyLoad
from shopfloor.models.github_ops import (
    CiStatusInput,
    CiStatusOutput,
    CloseIssueInput,
    CloseIssueOutput,
    CommentOutput,
    DeleteBranchInput,
    DeleteBranchOutput,
    FindOrCreatePrInput,
    IssueOutput,
    IssueRef,
    LabelsInput,
    LabelsOutput,
    MergeOutput,
    MergePrInput,
    PermissionInput,
    PermissionOutput,
    PrOutput,
    ReviewOutput,
    SubmitReviewInput,
    UpsertCommentInput,
)
from shopfloor.models.github_reads import (
    PolicyInput,
    SimilarIssuesInput,
    SimilarIssuesOutput,
)

log = structlog.get_logger(__name__)


class _OnRepo(Protocol):
    """An input that names its repository (`owner/name`): every GitHub operation's input."""

    @property
    def repo(self) -> str: ...


In = TypeVar("In", bound=_OnRepo)
Out = TypeVar("Out", bound=BaseModel)  # a write's result: logged in brief
Read = TypeVar("Read")


class GitHubActivities:
    def __init__(self, clients: GitHubClients) -> None:
        self._clients = clients

    async def read(self, fn: Callable[[GitHubApi, In], Read], inp: In) -> Read:
        return await read_github(self._clients, inp.repo, fn, inp)

    async def write(self, fn: Callable[[GitHubApi, In], Out], inp: In) -> Out:
        out = await write_github(self._clients, inp.repo, fn, inp)
        log.info("github write", op=fn.__name__, repo=inp.repo, result=_brief(out))
        return out

    @activity.defn(name="github_delete_branch")
    async def delete_branch(self, inp: DeleteBranchInput) -> DeleteBranchOutput:
        return await self.write(branches.delete_branch, inp)

    @activity.defn(name="github_find_or_create_pr")
    async def find_or_create_pr(self, inp: FindOrCreatePrInput) -> PrOutput:
        return await self.write(pulls.find_or_create_pr, inp)

    @activity.defn(name="github_submit_review")
    async def submit_review(self, inp: SubmitReviewInput) -> ReviewOutput:
        return await self.write(pulls.submit_review, inp)

    @activity.defn(name="github_merge_pr")
    async def merge_pr(self, inp: MergePrInput) -> MergeOutput:
        return await self.write(pulls.merge_pr, inp)

    @activity.defn(name="github_upsert_comment")
    async def upsert_comment(self, inp: UpsertCommentInput) -> CommentOutput:
        return await self.write(issues.upsert_comment, inp)

    @activity.defn(name="github_add_labels")
    async def add_labels(self, inp: LabelsInput) -> LabelsOutput:
        return await self.write(issues.add_labels, inp)

    @activity.defn(name="github_close_issue")
    async def close_issue(self, inp: CloseIssueInput) -> CloseIssueOutput:
        return await self.write(issues.close_issue, inp)

    @activity.defn(name="github_get_issue")
    async def get_issue(self, inp: IssueRef) -> IssueOutput:
        return await self.read(issues.get_issue, inp)

    @activity.defn(name="github_permission")
    async def permission(self, inp: PermissionInput) -> PermissionOutput:
        return await self.read(reads.permission, inp)

    @activity.defn(name="github_ci_status")
    async def ci_status(self, inp: CiStatusInput) -> CiStatusOutput:
        return await self.read(reads.ci_status, inp)

    @activity.defn(name="github_load_policy")
    async def load_policy(self, inp: PolicyInput) -> PolicyLoad:
        return await self.read(policy.load_policy, inp)

    @activity.defn(name="github_similar_issues")
    async def similar_issues(self, inp: SimilarIssuesInput) -> SimilarIssuesOutput:
        return await self.read(similar.similar_issues, inp)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.delete_branch,
            self.find_or_create_pr,
            self.submit_review,
            self.merge_pr,
            self.upsert_comment,
            self.add_labels,
            self.close_issue,
            self.get_issue,
            self.permission,
            self.ci_status,
            self.load_policy,
            self.similar_issues,
        ]


def _brief(out: BaseModel) -> dict[str, Any]:
    """What a log line needs of a result: short scalars only (never bodies or file contents)."""

    def short(v: Any) -> bool:
        return isinstance(v, (bool, int)) or (isinstance(v, str) and len(v) <= 80)

    return {k: v for k, v in out.model_dump().items() if short(v)}
