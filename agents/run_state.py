"""What an agent run carries from one turn to the next, and across continue-as-new.

Pure data: references, counters and small texts only — it travels through workflow history.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from shopfloor.agents.budget import Spent
from shopfloor.agents.doom_loop import DoomLoopState
from shopfloor.agents.submission import SubmitRecord
from shopfloor.models.agent_run import Limits, ToolResult, WorkspaceRef


class AgentCarry(BaseModel):
    transcript: str | None = None
    append: list[ToolResult] = Field(default_factory=list)
    inject: list[str] = Field(default_factory=list)
    workspace: WorkspaceRef
    limits: Limits
    spent: Spent = Field(default_factory=Spent)
    doom: DoomLoopState = Field(default_factory=DoomLoopState)
    readable: list[str] = Field(default_factory=list)  # truncated outputs read_output may page
    context_tokens: int = 0
    seq: int = 0  # event counter, so the live view continues across runs
    paused: bool = False
    submit: SubmitRecord = Field(default_factory=SubmitRecord)  # edits, test runs, the submit reminder
