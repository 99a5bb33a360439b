"""Every activity the workflows call, and `call`, the one way workflow code starts one.

An entry says what Temporal needs to know: the activity's registered name (its type in history),
its input and output types, its start-to-close timeout, its heartbeat timeout if it has one, and
its retry policy (every policy below is named once and bounded). A call site gives the argument
and a summary for the Temporal UI; the result's type comes from the entry:

    from shopfloor.workflows.activity_catalogue import GITHUB_CI_STATUS, call

    st = await call(GITHUB_CI_STATUS, CiStatusInput(repo=repo, sha=head), summary=f"CI status of {head[:12]}")
    st.state  # a CiStatusOutput

A call that needs other values than the entry's passes them (`timeout=`, `heartbeat=`,
`retry=`, `schedule_to_close=`) and says why; the agent's model and tool calls take their
timeouts from the run's input (`Timeouts`), so their entries hold only the defaults. An agent's
tool call goes through `tool_activity(name)`; its read-only ones run as local activities
(`call_local`).

Entry names are the registered names, upper-cased. A registered name is never renamed: recorded
histories replay by it. `tests/unit/test_activity_catalogue.py` checks the catalogue against what
the worker registers (`shopfloor/worker.py`) and what workflow code calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityCancellationType

from shopfloor.workflows.late_cancel import unless_cancelled

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.policy import PolicyLoad
    from shopfloor.agents.run_environment import EnvironmentProbe, SandboxFacts
    from shopfloor.agents.tools import DELEGATE, TOOLS
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import (
        CompactInput,
        CompactOutput,
        ModelStepInput,
        ModelStepOutput,
        Timeouts,
        ToolInput,
        ToolResult,
        WorkspaceRef,
    )
    from shopfloor.models.alert_issue import (
        AlertGoalInput,
        AlertIssueStatus,
        AlertIssueStatusInput,
        FileAlertIssueInput,
        FiledAlertIssue,
        ReopenIssueInput,
        ReopenIssueOutput,
        StartAlertIssueInput,
        StartAlertIssueOutput,
    )
    from shopfloor.models.eval_run import (
        CheckInput,
        CheckOutput,
        EvalReportInput,
        FactoryEnd,
        FactoryStopInput,
        FactoryWaitInput,
        PreparedTask,
        PublishedTask,
        PublishInput,
        ReportOutput,
    )
    from shopfloor.models.eval_task import TaskRef
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.factory_run import GoalInput, GoalOutput, RepoInfo, RepoInfoInput
    from shopfloor.models.git_remote import (
        ProtectedCheckInput,
        ProtectedCheckOutput,
        PushInput,
        PushOutput,
        RevertInput,
        UpdateInput,
        UpdateOutput,
    )
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
    from shopfloor.models.github_reads import PolicyInput, SimilarIssuesInput, SimilarIssuesOutput
    from shopfloor.models.inbox import IssueState, IssueText, IssueTextInput
    from shopfloor.models.ledger import AdmissionRequest, Spend
    from shopfloor.models.live_progress import LiveProgressInput, LiveProgressOutput
    from shopfloor.models.mcp import McpCatalog, McpListInput
    from shopfloor.models.pull_request_review import PullChange, PullChangeInput, PullInfo, PullInput
    from shopfloor.models.reconcile import (
        AppRedeliverInput,
        FailedAppDeliveriesInput,
        FailedDeliveriesInput,
        FailedDeliveriesOutput,
        LabelledIssuesInput,
        LabelledIssuesOutput,
        RedeliverInput,
        RedeliverOutput,
        StartIssuesInput,
        StartIssuesOutput,
    )
    from shopfloor.models.repo_profile import ProfileInput, RepoProfile, SetupInput, SetupOutput

In = TypeVar("In")
Out = TypeVar("Out")

# -- retry policies: each value once, under a name that says where it is used ------------------

# A pipeline step on GitHub (reads, comments, labels, the pull request, the merge).
GITHUB_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=6,
)
# Git transfers (push, fetch, merge from the base), and the alert flow's GitHub and Temporal
# steps, whose loop tries a failed step again on its next tick.
STEADY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=60), maximum_attempts=5
)
# The alert flow's reads and the assessing agent's setup: the rules decide when they fail.
SHORT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30), maximum_attempts=3
)
# The progress comment: a view, skipped when GitHub stays unreachable.
COMMENT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
)
# Whether a new issue run's issue is open: it waits for GitHub's answer rather than guess (a few
# seconds normally), bounded by the entry's schedule-to-close budget, not by attempts.
STATE_READ_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2))
# The reconciler runs every few minutes: a few quick retries, then its report says what failed and
# the next run tries again. Non-retryable GitHub errors (401, 404 ...) end at once.
RECONCILE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
# A model call: retried through provider outages, never when the provider rejected the request.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=[failure_types.MODEL_CALL_REJECTED],
)
# A tool call: its result (or its failure) goes back to the model, which may try otherwise.
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)

GITHUB_CALL = timedelta(seconds=60)
GIT_TRANSFER = timedelta(seconds=900)  # a clone or fetch of a large repository
GIT_HEARTBEAT = timedelta(seconds=120)
_MODEL_DEFAULTS = Timeouts()


@dataclass(frozen=True)
class ActivityEntry(Generic[In, Out]):
    """One activity as workflows call it. `input` is `type(None)` for an activity without one.
    Its retries are bounded: by the policy's maximum attempts, or by `schedule_to_close`."""

    name: str
    input: type[In]
    output: type[Out]
    timeout: timedelta  # start to close, one attempt
    retry: RetryPolicy
    heartbeat: timedelta | None = None
    schedule_to_close: timedelta | None = None  # all attempts together


def _github(name: str, input: type[In], output: type[Out]) -> ActivityEntry[In, Out]:
    return ActivityEntry(name, input, output, GITHUB_CALL, GITHUB_RETRY)


def _git(name: str, input: type[In], output: type[Out]) -> ActivityEntry[In, Out]:
    return ActivityEntry(name, input, output, GIT_TRANSFER, STEADY_RETRY, heartbeat=GIT_HEARTBEAT)


# -- the pipeline's settings, repository and goals (activities/factory*.py, issue_text.py) -------
FACTORY_CONFIG = _github("factory_config", type(None), FactoryConfig)
FACTORY_REPO_INFO = _github("factory_repo_info", RepoInfoInput, RepoInfo)
FACTORY_GOAL = _github("factory_goal", GoalInput, GoalOutput)
FACTORY_ISSUE_TEXT = _github("factory_issue_text", IssueTextInput, IssueText)
FACTORY_ISSUE_STATE = ActivityEntry(
    "factory_issue_state",
    IssueTextInput,
    IssueState,
    GITHUB_CALL,
    STATE_READ_RETRY,
    schedule_to_close=timedelta(hours=1),
)
# The repository's test command, setup plan and instructions, read from git at the policy's commit.
REPO_PROFILE = _git("repo_profile", ProfileInput, RepoProfile)

# -- GitHub (activities/github/operations.py, activities/pull_requests.py) ----------------------
GITHUB_LOAD_POLICY = _github("github_load_policy", PolicyInput, PolicyLoad)
GITHUB_SIMILAR_ISSUES = _github("github_similar_issues", SimilarIssuesInput, SimilarIssuesOutput)
GITHUB_GET_ISSUE = _github("github_get_issue", IssueRef, IssueOutput)
GITHUB_ADD_LABELS = _github("github_add_labels", LabelsInput, LabelsOutput)
GITHUB_UPSERT_COMMENT = _github("github_upsert_comment", UpsertCommentInput, CommentOutput)
GITHUB_PERMISSION = _github("github_permission", PermissionInput, PermissionOutput)
GITHUB_FIND_OR_CREATE_PR = _github("github_find_or_create_pr", FindOrCreatePrInput, PrOutput)
GITHUB_GET_PULL = _github("github_get_pull", PullInput, PullInfo)
GITHUB_SUBMIT_REVIEW = _github("github_submit_review", SubmitReviewInput, ReviewOutput)
GITHUB_CI_STATUS = _github("github_ci_status", CiStatusInput, CiStatusOutput)
GITHUB_MERGE_PR = _github("github_merge_pr", MergePrInput, MergeOutput)
GITHUB_DELETE_BRANCH = _github("github_delete_branch", DeleteBranchInput, DeleteBranchOutput)
GITHUB_CLOSE_ISSUE = _github("github_close_issue", CloseIssueInput, CloseIssueOutput)

# -- git with the worker's token (activities/git_remote.py) -------------------------------------
GIT_PUSH_WORKSPACE = _git("git_push_workspace", PushInput, PushOutput)
GIT_UPDATE_FROM_BASE = _git("git_update_from_base", UpdateInput, UpdateOutput)
GIT_PULL_REQUEST_CHANGE = _git("git_pull_request_change", PullChangeInput, PullChange)
GIT_PROTECTED_CHANGES = _git("git_protected_changes", ProtectedCheckInput, ProtectedCheckOutput)
GIT_REVERT_PATCH = _git("git_revert_patch", RevertInput, WorkspaceRef)

# -- the workspace's environment (activities/workspace_setup.py) ---------------------------------
# The repository's setup commands: the call gives the timeout (each command's, in turn); a few
# attempts, since a retry reuses what an earlier attempt checkpointed. A failed command is not
# retried (SETUP_FAILED): it fails the same way again.
SETUP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=3,
    non_retryable_error_types=[failure_types.SETUP_FAILED],
)
WORKSPACE_SETUP = ActivityEntry(
    "workspace_setup", SetupInput, SetupOutput, timedelta(minutes=30), SETUP_RETRY, heartbeat=timedelta(seconds=60)
)

# -- the agent loop (activities/model_step.py, activities/tools/activities.py) -------------------
# Timeouts come from the run's input (Timeouts); these are its defaults.
MODEL_STEP = ActivityEntry(
    "model_step",
    ModelStepInput,
    ModelStepOutput,
    timedelta(seconds=_MODEL_DEFAULTS.model_call_s),
    MODEL_RETRY,
    heartbeat=timedelta(seconds=_MODEL_DEFAULTS.model_heartbeat_s),
)
COMPACT_TRANSCRIPT = ActivityEntry(
    "compact_transcript",
    CompactInput,
    CompactOutput,
    timedelta(seconds=_MODEL_DEFAULTS.model_call_s),
    MODEL_RETRY,
    heartbeat=timedelta(seconds=_MODEL_DEFAULTS.model_heartbeat_s),
)
# One activity per tool an agent may call, registered under the tool's name. The agent gives each
# call max(Timeouts.tool_s, the command timeout + 60 s); commands heartbeat while they run.
TOOL_ACTIVITIES: Mapping[str, ActivityEntry[ToolInput, ToolResult]] = {
    name: ActivityEntry(
        name,
        ToolInput,
        ToolResult,
        timedelta(seconds=_MODEL_DEFAULTS.tool_s),
        TOOL_RETRY,
        heartbeat=timedelta(seconds=60),
    )
    for name in TOOLS
    if name != DELEGATE  # a child workflow (workflows/subagents.py), not an activity
}
# The repository's before-submit hooks on an accepted submit's workspace: the agent gives each call
# the hooks' timeouts together plus a minute; commands heartbeat while they run.
BEFORE_SUBMIT_HOOKS = ActivityEntry(
    "before_submit_hooks",
    ToolInput,
    ToolResult,
    timedelta(seconds=_MODEL_DEFAULTS.tool_s),
    TOOL_RETRY,
    heartbeat=timedelta(seconds=60),
)

# What the sandbox of the run's commands looks like (activities/sandbox_facts.py), once per run for
# its system prompt: a short probe, after the checkout and its prepared environment are in place.
SANDBOX_FACTS = ActivityEntry(
    "sandbox_facts",
    EnvironmentProbe,
    SandboxFacts,
    timedelta(minutes=10),
    SHORT_RETRY,
    heartbeat=timedelta(seconds=60),
)

# MCP tool servers (activities/mcp_tools.py): the tools listed once when a run starts, and a call.
# Each starts the server in its own sandbox; a server that fails is a note, not an activity failure.
MCP_LIST_TOOLS = ActivityEntry(
    "mcp_list_tools",
    McpListInput,
    McpCatalog,
    timedelta(minutes=12),  # up to 10 servers, each started and asked within a minute
    SHORT_RETRY,
    heartbeat=timedelta(seconds=60),
)
MCP_CALL_TOOL = ActivityEntry(
    "mcp_call_tool",
    ToolInput,
    ToolResult,
    timedelta(minutes=3),
    TOOL_RETRY,
    heartbeat=timedelta(seconds=60),
)

# -- the progress comment, live (activities/live_progress.py) ------------------------------------
# Runs as long as the agent run beside it (cancelled when it ends) and heartbeats every second or
# so: a dead worker's live view moves to another worker after the heartbeat timeout, a stopping
# worker's at once (an attempt each). A view: bounded; an agent run that outlasts them goes on
# without it.
LIVE_PROGRESS_RETRY = RetryPolicy(initial_interval=timedelta(seconds=5), maximum_attempts=10)
LIVE_PROGRESS = ActivityEntry(
    "live_progress",
    LiveProgressInput,
    LiveProgressOutput,
    timedelta(hours=12),
    LIVE_PROGRESS_RETRY,
    heartbeat=timedelta(seconds=10),
)

# -- the alert flow (activities/github/alert_issues.py, activities/alert_goal.py) ----------------
ALERT_GOAL = ActivityEntry("alert_goal", AlertGoalInput, GoalOutput, GITHUB_CALL, SHORT_RETRY)
GITHUB_FILE_ALERT_ISSUE = ActivityEntry(
    "github_file_alert_issue", FileAlertIssueInput, FiledAlertIssue, GITHUB_CALL, STEADY_RETRY
)
GITHUB_REOPEN_ISSUE = ActivityEntry(
    "github_reopen_issue", ReopenIssueInput, ReopenIssueOutput, GITHUB_CALL, STEADY_RETRY
)
ALERT_START_ISSUE_WORKFLOW = ActivityEntry(
    "alert_start_issue_workflow", StartAlertIssueInput, StartAlertIssueOutput, GITHUB_CALL, STEADY_RETRY
)
ALERT_ISSUE_STATUS = ActivityEntry(
    "alert_issue_status", AlertIssueStatusInput, AlertIssueStatus, GITHUB_CALL, SHORT_RETRY
)

# -- the reconciler (activities/github/deliveries.py, activities/reconcile.py) -------------------
_LISTING = timedelta(minutes=2)  # up to 50 pages of deliveries per hook
_REDELIVERY = timedelta(seconds=30)
GITHUB_FAILED_DELIVERIES = ActivityEntry(
    "github_failed_deliveries", FailedDeliveriesInput, FailedDeliveriesOutput, _LISTING, RECONCILE_RETRY
)
GITHUB_FAILED_APP_DELIVERIES = ActivityEntry(
    "github_failed_app_deliveries", FailedAppDeliveriesInput, FailedDeliveriesOutput, _LISTING, RECONCILE_RETRY
)
GITHUB_REDELIVER = ActivityEntry("github_redeliver", RedeliverInput, RedeliverOutput, _REDELIVERY, RECONCILE_RETRY)
GITHUB_REDELIVER_APP = ActivityEntry(
    "github_redeliver_app", AppRedeliverInput, RedeliverOutput, _REDELIVERY, RECONCILE_RETRY
)
GITHUB_OPEN_ISSUES_WITH_LABEL = ActivityEntry(
    "github_open_issues_with_label", LabelledIssuesInput, LabelledIssuesOutput, _LISTING, RECONCILE_RETRY
)
RECONCILE_START_MISSING_ISSUES = ActivityEntry(  # three requests per missing issue
    "reconcile_start_missing_issues", StartIssuesInput, StartIssuesOutput, timedelta(minutes=5), RECONCILE_RETRY
)

# -- the spend ledger (activities/ledger.py) -----------------------------------------------------
LEDGER_REQUEST = ActivityEntry("ledger_request", AdmissionRequest, bool, GITHUB_CALL, STEADY_RETRY)
LEDGER_SPEND = ActivityEntry("ledger_spend", Spend, bool, GITHUB_CALL, STEADY_RETRY)

# -- eval runs (activities/eval.py) --------------------------------------------------------------
EVAL_PREPARE = _git("eval_prepare", TaskRef, PreparedTask)
EVAL_CHECK = ActivityEntry(  # the hidden tests run within the sandbox's own 15-minute bound
    "eval_check", CheckInput, CheckOutput, timedelta(minutes=20), STEADY_RETRY, heartbeat=GIT_HEARTBEAT
)
EVAL_REPORT = ActivityEntry("eval_report", EvalReportInput, ReportOutput, timedelta(minutes=2), SHORT_RETRY)
# --agents factory (activities/eval_factory.py). The wait's start-to-close is the run's factory
# timeout, given per call; it polls and heartbeats throughout.
EVAL_PUBLISH = _git("eval_publish", PublishInput, PublishedTask)
EVAL_FACTORY_WAIT = ActivityEntry(
    "eval_factory_wait", FactoryWaitInput, FactoryEnd, timedelta(hours=1), SHORT_RETRY, heartbeat=timedelta(seconds=60)
)
EVAL_FACTORY_STOP = ActivityEntry("eval_factory_stop", FactoryStopInput, bool, GITHUB_CALL, SHORT_RETRY)


def catalogue() -> dict[str, ActivityEntry[Any, Any]]:
    """Every entry by its registered name (the tools' included)."""
    entries = [v for v in globals().values() if isinstance(v, ActivityEntry)]
    return {e.name: e for e in [*entries, *TOOL_ACTIVITIES.values()]}


def tool_activity(name: str) -> ActivityEntry[ToolInput, ToolResult]:
    """The activity behind an agent's tool `name` (the loop refuses unknown tools before this)."""
    entry = TOOL_ACTIVITIES.get(name)
    if entry is None:
        raise ApplicationError(
            f"no activity runs the tool {name!r}",
            type=failure_types.INCONSISTENT_WORKFLOW_STATE,
            non_retryable=True,
        )
    return entry


async def call(
    activity: ActivityEntry[In, Out],
    arg: In,
    *,
    summary: str | None,
    timeout: timedelta | None = None,
    heartbeat: timedelta | None = None,
    retry: RetryPolicy | None = None,
    schedule_to_close: timedelta | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
) -> Out:
    """Run `activity` with `arg` (None for an activity without input) and return its result, as
    the entry's output type. The keyword overrides replace the entry's values for this call
    (`cancellation_type`: what cancelling the call waits for; the SDK's default)."""
    result: Out = await unless_cancelled(
        workflow.execute_activity(
            activity.name,
            args=[] if arg is None else [arg],
            result_type=activity.output,
            start_to_close_timeout=timeout or activity.timeout,
            schedule_to_close_timeout=schedule_to_close or activity.schedule_to_close,
            heartbeat_timeout=heartbeat or activity.heartbeat,
            retry_policy=retry or activity.retry,
            summary=summary[:200] if summary else None,
            cancellation_type=cancellation_type,
        )
    )
    return result


async def call_local(
    activity: ActivityEntry[In, Out], arg: In, *, summary: str | None, timeout: timedelta | None = None
) -> Out:
    """Run `activity` with `arg` as a local activity: on the worker that runs this workflow task,
    within it, its result recorded as a marker when the task completes; no activity task of its
    own goes through the server, and no workflow task follows it. For short read-only calls only:
    it cannot heartbeat, a query waits while it runs, and (Temporal's guarantee) it runs at least
    once: a worker that dies before the marker is recorded leaves it to run again on the next."""
    result: Out = await unless_cancelled(
        workflow.execute_local_activity(
            activity.name,
            args=[] if arg is None else [arg],
            result_type=activity.output,
            start_to_close_timeout=timeout or activity.timeout,
            schedule_to_close_timeout=activity.schedule_to_close,
            retry_policy=activity.retry,
            summary=summary[:200] if summary else None,
        )
    )
    return result


def failure_message(exc: BaseException) -> str:
    """The first ApplicationError's message in the chain (what the activity or child said)."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.message
        current = current.__cause__
    return str(exc) or type(exc).__name__


def failure_type(exc: BaseException) -> str | None:
    """The first ApplicationError's type in the chain (a `shopfloor.models.failure_types` value)."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            return current.type
        current = current.__cause__
    return None
