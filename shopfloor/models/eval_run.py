"""An eval run (`shopfloor eval run`): its input, what each task came to, and the stored results
that reports and `shopfloor eval compare` read."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import WorkspaceRef
from shopfloor.models.eval_task import TaskRef

EVAL_WORKFLOW = "EvalWorkflow"
EVAL_PROGRESS_QUERY = "eval_progress"

# What a task came to. `resolved`: every FAIL_TO_PASS test passes and every PASS_TO_PASS test
# still does. The others say why not, in the order they are decided.
Category = Literal["resolved", "harness_error", "limit_reached", "no_patch", "tests_fail"]
CATEGORIES: tuple[Category, ...] = ("resolved", "tests_fail", "no_patch", "limit_reached", "harness_error")


def eval_workflow_id(run_id: str) -> str:
    return f"eval/{run_id}"


class EvalModel(BaseModel):
    """A model under evaluation: `model` for every task, or per task (`scripted:DIR` plays
    DIR/<instance_id>.json for each task)."""

    label: str  # as given on the command line
    model: str
    by_task: dict[str, str] = Field(default_factory=dict)

    def for_task(self, instance_id: str) -> str:
        return self.by_task.get(instance_id, self.model)


class EvalRunInput(BaseModel):
    run_id: str
    suite: str  # its name, as shown in reports
    tasks: list[TaskRef] = Field(min_length=1)
    models: list[EvalModel] = Field(min_length=1)
    # fix: the fix agent alone on a checkout. factory: the whole factory on the GitHub simulator
    # (triage → fix → PR → CI → review), stopped where it would wait for a merge approval.
    agents: Literal["fix", "factory"] = "fix"
    concurrency: int = Field(default=2, ge=1, le=64)
    max_steps: int = Field(default=30, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    # A call the permissions send to an operator (an install, the network) waits this long, then
    # is refused and the agent goes on: an eval usually runs with nobody watching.
    approval_timeout_s: float = Field(default=60.0, gt=0)
    # factory: how long a task's factory run may take to reach its merge stage (or end).
    factory_timeout_s: float = Field(default=3600.0, gt=0)
    results_dir: str  # where the report activity writes results.json, report.md and plot.png


class PreparedTask(BaseModel):
    """What an agent gets of a task: the repository at its base commit and the issue as a goal."""

    workspace: WorkspaceRef
    goal: str
    test_command: str


class CheckInput(BaseModel):
    task_digest: str
    workspace: WorkspaceRef  # the agent's last checkpoint, or the factory's pull request head
    run_id: str  # names the check's own checkout
    # What the change is measured against: the commit its work started from (None: the
    # workspace's base, which for the fix agent is the task's base commit).
    diff_base: str | None = None


class PublishInput(BaseModel):
    """A task for the factory: its base as a new repository on the GitHub simulator, with a
    policy that has every agent use `model` and stops before merging, and its issue opened."""

    task_digest: str
    eval_run: str
    model: str
    max_steps: int = Field(ge=1)
    max_cost_usd: float | None = None
    approval_timeout_s: float = Field(gt=0)


class PublishedTask(BaseModel):
    repo: str  # owner/name on the simulator
    number: int  # the task's issue
    clone_url: str
    base_sha: str  # the default branch's commit the factory starts from
    workflow_id: str  # the IssueWorkflow


class FactoryWaitInput(BaseModel):
    workflow_id: str
    timeout_s: float = Field(gt=0)


class FactoryEnd(BaseModel):
    """Where a task's factory run stood when the eval took its change: waiting for the merge
    approval, or ended (parked, failed, salvaged)."""

    stage: str
    result: str = ""
    reason: str = ""
    pr_number: int | None = None
    head_sha: str | None = None
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    children: list[str] = Field(default_factory=list)


class FactoryStopInput(BaseModel):
    workflow_id: str
    reason: str


class CheckOutput(BaseModel):
    patch_lines: int = 0  # lines the agent's change adds or removes (0: no change)
    fail_to_pass_passed: list[str] = Field(default_factory=list)
    fail_to_pass_failed: list[str] = Field(default_factory=list)
    pass_to_pass_failed: list[str] = Field(default_factory=list)
    error: str | None = None  # the check could not run (test patch did not apply, no pytest, ...)
    output_digest: str | None = None  # the test run's output, in the blob store


class TaskOutcome(BaseModel):
    instance_id: str
    model: str  # EvalModel.label
    category: Category
    resolved: bool
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    agent_run_id: str = ""  # `shopfloor transcript <id>` shows what the agent did
    factory_run_id: str = ""  # --agents factory: the IssueWorkflow on the simulator
    pr_url: str = ""  # --agents factory: the pull request it opened
    detail: str = ""  # one line: why it is in its category


class EvalResults(BaseModel):
    """Everything a run measured (results.json)."""

    run_id: str
    suite: str
    started_at: datetime
    ended_at: datetime
    models: list[str]
    outcomes: list[TaskOutcome]


class EvalReportInput(BaseModel):
    results: EvalResults
    results_dir: str


class ReportOutput(BaseModel):
    results: str
    markdown: str
    plot: str | None = None  # None: matplotlib could not draw it (the reason is in the report)


class EvalProgress(BaseModel):
    """The `eval_progress` query: how far the run is."""

    total: int
    done: int
    outcomes: list[TaskOutcome] = Field(default_factory=list)
