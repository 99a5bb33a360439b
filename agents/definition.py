"""What an agent is: a prompt, a tool set, limits and (optionally) the result it must submit.
Pure data; the loop that runs an agent is agents/loop.py."""

from __future__ import annotations

import functools
from importlib import resources

from pydantic import BaseModel, Field

from shopfloor.agents.outputs import OUTPUT_MODELS
from shopfloor.agents.submission import SUBMIT, submit_spec
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
    # Past this estimated transcript size, older messages are summarized
    # (compaction: docs/design.md, The agent loop).
    compaction_budget_tokens: int = 80_000
    # A name in agents.outputs.OUTPUT_MODELS: the run ends only by calling `submit` with a valid one.
    output_model: str | None = None
    # submit is refused until the run's required command (AgentInput.required_command) has run
    # after the last edit of the workspace.
    submit_requires_command: bool = False

    def model_post_init(self, __context: object) -> None:
        if self.output_model is not None and self.output_model not in OUTPUT_MODELS:
            raise ValueError(f"agent {self.name}: unknown output model {self.output_model!r}")

    def system_prompt(self) -> str:
        return _prompt(self.prompt_file)

    def tool_names(self) -> list[str]:
        """What the model may call: the tools, plus `submit` when there is an output model."""
        return [*self.tools, SUBMIT] if self.output_model else list(self.tools)

    def tool_specs(self) -> list[ToolSpec]:
        """What the model is told about its tools. The specs are built once per tool set and
        shared: read them, never change them."""
        return list(_tool_specs(tuple(self.tools), self.output_model))


# A step asks for both every time; JSON schemas cost pydantic real work to generate, and prompts
# are package files that do not change while the process runs.
@functools.lru_cache(maxsize=64)
def _prompt(prompt_file: str) -> str:
    return resources.files("shopfloor.agents").joinpath(prompt_file).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=64)
def _tool_specs(tools: tuple[str, ...], output_model: str | None) -> tuple[ToolSpec, ...]:
    specs = [TOOLS[name].spec() for name in tools]
    return (*specs, submit_spec(output_model)) if output_model else tuple(specs)
