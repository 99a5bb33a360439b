"""The pipelines' repository profile step: the test command, setup plan and instructions of the
default branch's head commit (activity `repo_profile`), read before any agent starts, and the
line the progress comment shows for the test command.

Always the default branch's commit the policy was read at, never a pull request's head: a pull
request (a person's, or the fix agent's own work) cannot change how its own agents are taught,
tested or set up.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.repo_profile import ProfileInput, RepoProfile
    from shopfloor.workflows.activity_catalogue import REPO_PROFILE, call
    from shopfloor.workflows.pipeline import PipelineContext

# Runs recorded before the profile existed replay without reading it (their agents got the
# policy's test command and no instructions).
REPO_PROFILE_PATCH = "repo-profile"
# Likewise for preparing the workspace's environment with the profile's setup plan.
WORKSPACE_SETUP_PATCH = "workspace-setup"


async def read_profile(ctx: PipelineContext, ws: WorkspaceRef) -> RepoProfile:
    """The profile of `ws.base_sha` (the default branch's head commit), with the policy's
    `test_command` and `setup:` taking precedence over detection."""
    base = WorkspaceRef(repo=ws.repo, clone_url=ws.clone_url, base_sha=ws.base_sha)  # the commit alone
    policy = ctx.policy
    profile = await call(
        REPO_PROFILE,
        ProfileInput(
            workspace=base,
            test_command=policy.test_command,
            setup=list(policy.setup) if policy.setup is not None else None,
        ),
        summary=f"profile of {ws.repo} at {(ws.base_sha or '')[:12]}",
    )
    return profile


def test_command_note(profile: RepoProfile, command: str | None) -> str:
    """The progress comment's line: which test command (`command`) the fix agent must run, and why."""
    if command and profile.test_command != command:  # a run from before profiles: the policy's
        return f"tests: `{command}`"
    if not profile.test_command:
        return "tests: none found" + (f" ({profile.test_command_reason})" if profile.test_command_reason else "")
    why = {"policy": "from .github/shopfloor.yml", "detected": f"detected: {profile.test_command_reason}"}.get(
        profile.test_command_source, profile.test_command_source
    )
    return f"tests: `{profile.test_command}` ({why})"
