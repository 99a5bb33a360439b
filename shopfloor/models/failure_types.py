"""The failure types shopfloor's activities and workflows raise (`ApplicationError.type`): one
spelling each, shared by the side that raises a failure and the side that tells failures apart.

A type is a wire value: Temporal records it in history and matches retry policies'
`non_retryable_error_types` against it, so a value never changes; a new failure gets a new name.
"""

from __future__ import annotations

from typing import Final

# -- GitHub's REST API (activities/github) ------------------------------------------------------
GITHUB_UNAVAILABLE: Final = "GitHubUnavailable"  # no answer (timeout, dropped connection): retried
GITHUB_UNEXPECTED: Final = "GitHubUnexpected"  # an exception the mapping does not know
GITHUB_RATE_LIMITED: Final = "GitHubRateLimited"  # retried after GitHub's delay
GITHUB_SERVER_ERROR: Final = "GitHubServerError"  # 5xx, 408, 429 without a delay: retried
GITHUB_BAD_CREDENTIALS: Final = "GitHubBadCredentials"
GITHUB_NOT_FOUND: Final = "GitHubNotFound"
GITHUB_VALIDATION: Final = "GitHubValidation"  # 422
GITHUB_FORBIDDEN: Final = "GitHubForbidden"
GITHUB_REQUEST_FAILED: Final = "GitHubRequestFailed"  # any other 4xx
GITHUB_HEAD_CHANGED: Final = "GitHubHeadChanged"  # a merge refused: the head is not the reviewed one
GITHUB_NOT_MERGEABLE: Final = "GitHubNotMergeable"  # a merge refused: GitHub will not merge it
# The pull request still shows an older head while its branch already holds the reviewed one
# (GitHub moves pull request heads in the background after a push): retried.
GITHUB_PR_HEAD_STALE: Final = "GitHubPullRequestHeadStale"
GITHUB_NOT_A_FILE: Final = "GitHubNotAFile"
GITHUB_FILE_TOO_LARGE: Final = "GitHubFileTooLarge"
# A merge GitHub refused for the pull request's state: the run waits for a push instead of failing.
MERGE_REFUSED: Final = frozenset({GITHUB_HEAD_CHANGED, GITHUB_NOT_MERGEABLE})

# -- git and workspaces (activities/git_remote.py, activities/workspace.py, tools) --------------
SHOPFLOOR_REFUSED: Final = "ShopfloorRefused"  # a write shopfloor never makes (a branch not its own)
GIT_ERROR: Final = "GitError"  # a git transfer failed: retried
PATCH_ERROR: Final = "PatchError"
WORKSPACE_ERROR: Final = "WorkspaceError"
WORKSPACE_MISSING: Final = "WorkspaceMissing"
WORKSPACE_BROKEN: Final = "WorkspaceBroken"
NOTHING_TO_PUSH: Final = "NothingToPush"
PUSH_REJECTED: Final = "PushRejected"
BRANCH_MOVED: Final = "BranchMoved"
PROTECTED_PATH_CHANGED: Final = "ProtectedPathChanged"
CHECKPOINT_FAILED: Final = "CheckpointFailed"
SETUP_FAILED: Final = "SetupFailed"  # a repository's setup command failed: the run fails, not retried
TOOL_CALL_MISSING: Final = "ToolCallMissing"

# -- model calls (activities/model_step.py) -----------------------------------------------------
MODEL_CALL_ERROR: Final = "ModelCallError"  # retried
MODEL_CALL_REJECTED: Final = "ModelCallRejected"  # the provider refused the request: not retried
# The conversation does not fit the model's context window: not retried; the loop compacts first.
MODEL_CONTEXT_TOO_LONG: Final = "ModelContextTooLong"
JUDGING_UNAVAILABLE: Final = "JudgingUnavailable"

# -- Temporal requests made by activities (activities/reconcile.py) -----------------------------
TEMPORAL_REQUEST_FAILED: Final = "TemporalRequestFailed"

# -- workflows ----------------------------------------------------------------------------------
INCONSISTENT_WORKFLOW_STATE: Final = "InconsistentWorkflowState"  # a broken invariant: never retried
UNKNOWN_AGENT: Final = "UnknownAgent"
AGENT_RUN_FAILED: Final = "AgentRunFailed"
