"""What an agent run carries from one turn to the next, and across continue-as-new.

Pure data: references, counters and small texts only — it travels through workflow history.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shopfloor.agents.budget import Spent
from shopfloor.agents.circuit_breakers import BreakerState
from shopfloor.agents.doom_loop import DoomLoopState
from shopfloor.agents.submission import SubmitRecord
from shopfloor.models.agent_run import Limits, ToolResult, WorkspaceRef


class AgentCarry(BaseModel):
    # Three fields keep their first JSON names (the alias) in history and across continue-as-new,
    # so recorded runs and runs started by an older worker read the same.
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    transcript: str | None = None
    # The last reply's tool results, not yet sent: the next model step appends them.
    pending_tool_results: list[ToolResult] = Field(default_factory=list, alias="append")
    # User messages for the next model step (operator steering, loop warnings, the submit reminder).
    queued_notes: list[str] = Field(default_factory=list, alias="inject")
    workspace: WorkspaceRef
    limits: Limits
    spent: Spent = Field(default_factory=Spent)
    doom: DoomLoopState = Field(default_factory=DoomLoopState)
    breakers: BreakerState = Field(default_factory=BreakerState)  # per-tool errors, replies without progress
    # Digests of the outputs cut for the model: the ones read_output may page through.
    readable_outputs: list[str] = Field(default_factory=list, alias="readable")
    context_tokens: int = 0
    seq: int = 0  # event counter, so the live view continues across runs
    paused: bool = False
    submit: SubmitRecord = Field(default_factory=SubmitRecord)  # edits, test runs, the submit reminder
    # Reply digests of the replies cut off at the output limit that the model is continuing.
    cut_off: list[str] = Field(default_factory=list)
    # The model an operator switched to (switch_model), used from the next step on; None: AgentInput.model.
    model: str | None = None
