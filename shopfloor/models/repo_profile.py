"""What a run learns about its repository before any agent starts, and how its workspace is
prepared: the test command, the setup plan, the repository's instructions to the agents, and the
prepared environment (setup's result, checkpointed in the blob store).

All of it is read from the default branch's head commit, never from a pull request's branch: a
pull request cannot change how its own agents are taught, tested or set up.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import WorkspaceRef

Source = Literal["policy", "detected", "none"]


class ProfileInput(BaseModel):
    workspace: WorkspaceRef  # the default branch's head commit (base_sha), never a PR head
    test_command: str | None = None  # the policy's; None: detect
    setup: list[str] | None = None  # the policy's; None: detect, []: none


class SetupPlan(BaseModel):
    commands: list[str] = Field(default_factory=list)
    source: Source = "none"
    reason: str = ""  # why these commands ("package-lock.json: npm ci"), shown on the progress comment


class RepoProfile(BaseModel):
    test_command: str | None = None  # what the fix agent must run green, and what run_tests runs
    test_command_source: Source = "none"
    test_command_reason: str = ""  # "pyproject.toml has [tool.pytest.ini_options]"
    setup: SetupPlan = Field(default_factory=SetupPlan)
    instructions: str | None = None  # blob digest of the repository's instructions (None: none found)
    instruction_files: list[str] = Field(default_factory=list)  # the files read, for the progress comment


class SetupInput(BaseModel):
    workspace: WorkspaceRef  # the base the environment is prepared for
    commands: list[str]
    timeout_s: float = Field(default=1200.0, gt=0)  # for each command
    network_allow: list[str] = Field(default_factory=list)  # the policy's, within the operator's bound
    run_id: str = ""  # keys the worker's checkout


class SetupOutput(BaseModel):
    workspace: WorkspaceRef  # the same base, with `environment` set
    reused: bool = False  # the environment was already checkpointed: nothing ran
    commands_run: int = 0
    seconds: float = 0.0
    output_preview: str = ""  # the tail of what the commands printed (small)
