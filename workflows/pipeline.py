"""What an issue's pipeline (workflows/factory_run.py) and a pull request's review run
(workflows/pr_review.py) share: the context their stage functions are passed, the steps of the
issue pipeline's fix ⇄ review loop, the stages' typed results, and the one way a run ends
(`Final`).

The context holds what the stages read and write — the repository and number, the state the
`factory` query shows, the progress comment, the deployment's settings and the repository's
policy — and nothing of the workflow around it, so a stage cannot reach into the inbox.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.policy import RepoPolicy
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.factory_run import FactoryState, PipelineResult
    from shopfloor.models.repo_profile import RepoProfile
    from shopfloor.workflows.admission import Admission
    from shopfloor.workflows.progress import ProgressComment


@dataclass
class PipelineContext:
    """One run's context, passed to every stage function."""

    repo: str
    number: int  # the issue (issue pipeline) or the pull request (review run)
    state: FactoryState  # what the `factory` query shows; carried across continue-as-new by review runs
    progress: ProgressComment
    config: FactoryConfig = field(default_factory=FactoryConfig)  # read when the run starts
    policy: RepoPolicy = field(default_factory=RepoPolicy)  # .github/shopfloor.yml, read by the run
    # Test command, setup plan and instructions, read from the default branch before any agent.
    profile: RepoProfile = field(default_factory=RepoProfile)
    base_branch: str = "main"  # what the pull request merges into
    ci_events: int = 0  # CI events the inbox routed here: each one wakes a CI wait
    # The run's place in the spend ledger (issue pipelines); its agents report their cost to it.
    admission: Admission | None = None


class OnPipeline:
    """A run that works through a PipelineContext (FactoryRun, PullRequestReview): what its
    workflow and watches read of it, by name."""

    ctx: PipelineContext

    @property
    def state(self) -> FactoryState:
        return self.ctx.state

    @property
    def progress(self) -> ProgressComment:
        return self.ctx.progress

    @property
    def policy(self) -> RepoPolicy:
        return self.ctx.policy

    @property
    def config(self) -> FactoryConfig:
        return self.ctx.config


class Step(enum.Enum):
    """Where the issue pipeline's fix ⇄ review loop stands."""

    FIX = "fix"  # the fix agent works (again)
    PUSH = "push"  # push its workspace, open the pull request if there is none
    CI = "ci"  # wait for CI's verdict on the pushed head
    REVIEW = "review"  # the review agent reads the head
    MERGE = "merge"  # approval, base update, protected-path check, merge


class Final(Exception):
    """Ends a run with this final state (raised inside a run, caught where the run started)."""

    def __init__(self, result: PipelineResult, reason: str, waiting_for: str | None = None) -> None:
        super().__init__(reason)
        self.result, self.reason, self.waiting_for = result, reason, waiting_for


# -- the merge stage's results ---------------------------------------------------------------------


@dataclass(frozen=True)
class Merged:
    sha: str  # the merge commit


@dataclass(frozen=True)
class ProtectedPathsChanged:
    """Not merged by shopfloor: the change touches protected paths (people merge it)."""

    reason: str


@dataclass(frozen=True)
class MergeRefused:
    """GitHub refused the merge: the head moved, or the pull request is not mergeable."""

    reason: str


@dataclass(frozen=True)
class BaseConflicts:
    """The base moved and merging it in conflicts: the fix agent resolves `files` in `workspace`."""

    workspace: WorkspaceRef
    files: list[str]


@dataclass(frozen=True)
class BaseMergedIn:
    """The base moved and was merged in cleanly: `workspace` is pushed, CI and review run again."""

    workspace: WorkspaceRef


# What merging one head of a pull request came to (shared by both runs).
MergeResult = Merged | ProtectedPathsChanged | MergeRefused
# What the issue pipeline's merge step came to (it first brings the branch up to date).
IssueMergeResult = MergeResult | BaseConflicts | BaseMergedIn
