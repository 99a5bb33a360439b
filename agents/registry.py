"""The agents shopfloor knows, by name."""

from __future__ import annotations

from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.tools import READ_ONLY_TOOLS, TOOLS
from shopfloor.models.agent_run import Limits

AGENTS: dict[str, AgentDefinition] = {
    a.name: a
    for a in [
        AgentDefinition(
            name="explore",
            description="Answers questions about a repository using read-only tools.",
            prompt_file="explore.md",
            tools=list(READ_ONLY_TOOLS),
            limits=Limits(max_steps=40),
        ),
        AgentDefinition(
            name="code",
            description="Changes a repository: reads, edits, runs commands and tests in a sandbox.",
            prompt_file="code.md",
            tools=list(TOOLS),
            limits=Limits(max_steps=60),
        ),
    ]
}


def get_agent(name: str) -> AgentDefinition:
    try:
        return AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; known agents: {', '.join(sorted(AGENTS))}") from None
