"""What an agent is: a prompt, a tool set and limits. Pure data; the loop lives in workflows."""

from __future__ import annotations

from importlib import resources

from pydantic import BaseModel, Field

from shopfloor.agents.tools import TOOLS
from shopfloor.models.agent_run import Limits
from shopfloor.models.transcript import ToolSpec


class AgentDefinition(BaseModel):
    name: str
    description: str
    prompt_file: str  # a file beside this package, so prompts are read and reviewed as text
    tools: list[str]
    limits: Limits = Field(default_factory=Limits)
    # Tool output longer than this is cut for the model (the full output stays in the blob store).
    tool_output_cap_chars: int = 16_000
    # Past this estimated transcript size, older messages are summarized (DESIGN §3 compaction).
    compaction_budget_tokens: int = 80_000

    def system_prompt(self) -> str:
        return resources.files("shopfloor.agents").joinpath(self.prompt_file).read_text(encoding="utf-8")

    def tool_specs(self) -> list[ToolSpec]:
        return [TOOLS[name].spec() for name in self.tools]
